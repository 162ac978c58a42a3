// The FP8 kernel's debug build without promotion (-DDG_FP8_NO_PROMOTION: all of K summed on the tensor core), which
// tests/test_gpu_verify.py builds to show that promotion is what passes at K = 7168: it compiles for scales constant
// along k (per channel); tests/test_device_headers.py compiles it.
#define DG_FP8_NO_PROMOTION
#include "fp8_hopper_traits.cuh"

cudaError_t launch_per_channel_without_promotion(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, float* C,
                                                 const float* sa, const float* sb, cudaStream_t stream) {
  return dg::fp8_hopper::launch<PerChannel>(A, B, C, NoViews{}, dg::fp8_hopper::Scales{sa, sb}, 1.0f, 0.0f, stream);
}
