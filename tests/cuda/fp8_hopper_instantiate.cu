// Instantiates dg/fp8_hopper.cuh with the hand-written traits of fp8_hopper_traits.cuh, as a generated folder does;
// tests/test_device_headers.py compiles it.
#include "fp8_hopper_traits.cuh"

cudaError_t launch_deepgemm_format(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, __nv_bfloat16* C, const float* sa,
                                   const float* sb, cudaStream_t stream) {
  return dg::fp8_hopper::launch<DeepGemmFormat>(A, B, C, NoViews{}, dg::fp8_hopper::Scales{sa, sb}, 1.0f, 0.0f,
                                                stream);
}

cudaError_t launch_per_channel(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, float* C, const float* sa,
                               const float* sb, cudaStream_t stream) {
  return dg::fp8_hopper::launch<PerChannel>(A, B, C, NoViews{}, dg::fp8_hopper::Scales{sa, sb}, 1.0f, 0.0f, stream);
}
