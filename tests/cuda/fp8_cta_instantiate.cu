// Instantiates dg/fp8_cta.cuh with hand-written traits, as a generated folder does: A [m][k] k-contiguous by 16-byte
// cp.async (and its direct gather fallback), B [k][n] n-contiguous by the gather along n, a K tail, A's scales 1 x 128 (m-contiguous)
// and B's 128 x 128, both varying along k; tests/test_device_headers.py compiles it for sm_89 and sm_90a.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "dg/fp8_cta.cuh"

namespace {

// C[m][n] (bf16) = (A[m][k] sa[m][k/128]) . (B[k][n] sb[k/128][n/128]): 200 x 136 x 1000.
struct Fp8 {
  using index_t = int;
  using A_t = __nv_fp8_e4m3;
  using B_t = __nv_fp8_e4m3;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<200, 1008>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1000, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<136, 1>>,
                          dg::Role<index_t, dg::Seg<1000, 136>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<200, 136>>, dg::Role<index_t, dg::Seg<136, 1>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 200, N = 136, K = 1000;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    float out = alpha * v;
    if (beta != 0.0f) out = fmaf(beta, dg::to_float(*p), out);
    *p = dg::from_float<C_t>(out);
  }
  static constexpr int THREADS = 128;
  static constexpr int BM = 64, BN = 64, BK = 32, STAGES = 2;  // a k-tile of 32: the gather stages 16 bytes a thread
  static constexpr bool MMA = true;
  static constexpr int WARPS_M = 2, WARPS_N = 2;
  static constexpr bool A_K_INNER = true, B_K_INNER = true;
  static constexpr int MIN_BLOCKS = 1;
  static constexpr bool MIN_BLOCKS_NEEDS_CP_ASYNC = false;
  static constexpr int BATCH = 1, SMEM_BYTES = 2 * (64 * 48 + 64 * 48);
  // sa[m][kb]: m-contiguous (stride 1 along m, 200 along k's blocks of 128).
  struct A_scales {
    using batch = dg::fp8_cta::ScaleRole<index_t>;
    using mn = dg::fp8_cta::ScaleRole<index_t, dg::fp8_cta::ScaleSeg<200, 1, 1>>;
    using k = dg::fp8_cta::ScaleRole<index_t, dg::fp8_cta::ScaleSeg<1000, 128, 200>>;
    static constexpr bool K_VARYING = true;
  };
  // sb[kb][nb]: blocks of 128 x 128, row-major.
  struct B_scales {
    using batch = dg::fp8_cta::ScaleRole<index_t>;
    using mn = dg::fp8_cta::ScaleRole<index_t, dg::fp8_cta::ScaleSeg<136, 128, 1>>;
    using k = dg::fp8_cta::ScaleRole<index_t, dg::fp8_cta::ScaleSeg<1000, 128, 2>>;
    static constexpr bool K_VARYING = true;
  };
};
static_assert(dg::fp8_cta::ScaleRole<int, dg::fp8_cta::ScaleSeg<9, 9, 0>, dg::fp8_cta::ScaleSeg<256, 128, 5>>::offset(
                  9 * 130 + 4) == 5,
              "an inner letter without scales, an outer one in blocks of 128");

using ALoad = dg::cta::LoadCpAsync<Fp8, dg::cta::Operand::A, 16>;
using ALoadGather = dg::cta::LoadGatherDirect<Fp8, dg::cta::Operand::A>;
using BLoad = dg::cta::LoadGather<Fp8, dg::cta::Operand::B, true>;  // lanes along n

}  // namespace

cudaError_t run_fp8(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, __nv_bfloat16* C, const float* sa, const float* sb,
                    cudaStream_t stream) {
  const dg::fp8_cta::Scales scales{sa, sb};
  if (reinterpret_cast<uintptr_t>(A) % 16 == 0)
    return dg::fp8_cta::launch<Fp8, ALoad, BLoad>(A, B, C, Fp8::M, Fp8::Epilogue{}, scales, 1.0f, 0.0f, stream);
  return dg::fp8_cta::launch<Fp8, ALoadGather, BLoad>(A, B, C, Fp8::M, Fp8::Epilogue{}, scales, 1.0f, 0.0f, stream);
}
