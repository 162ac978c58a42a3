// Instantiates dg/gemv.cuh with hand-written traits, as a generated folder does: lanes along k with a K split over a
// cluster and a batch, and lanes along n with one K slice; tests/test_device_headers.py compiles it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dg/gemv.cuh"

namespace {

// C[b][n] (bf16) = A[b][k] . B[b][n][k]: 3 products of 2 x 512 x 1024, B's k contiguous.
struct LanesAlongK {
  using index_t = int;
  using A_t = __nv_bfloat16;
  using B_t = __nv_bfloat16;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t, dg::Seg<3, 2048>>, dg::Role<index_t, dg::Seg<2, 1024>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1024, 1>>>;
  using B_view = dg::View<dg::Role<index_t, dg::Seg<3, 524288>>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<512, 1024>>,
                          dg::Role<index_t, dg::Seg<1024, 1>>>;
  using C_view = dg::View<dg::Role<index_t, dg::Seg<3, 1024>>, dg::Role<index_t, dg::Seg<2, 512>>,
                          dg::Role<index_t, dg::Seg<512, 1>>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 2, N = 512, K = 1024;
  static constexpr bool has_batch = true;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void move_to_batch(Epilogue&, index_t) {}
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    float out = alpha * v;
    if (beta != 0.0f) out = fmaf(beta, dg::to_float(*p), out);
    *p = dg::from_float<C_t>(out);
  }
  static constexpr int THREADS = 128, BN = 4;
  static constexpr bool LANES_ALONG_K = true;
  static constexpr int CH = 8, B_CHECK = 16, CH_PROMISED = 1;
  static constexpr int UNROLL = 2, COLS = 1, WN = 1;
  static constexpr int SPLITS = 2, K_SLICE = 512;
  static constexpr int TILES_N = 128, BLOCKS = 3 * 128 * 2;
  static constexpr int A_VEC = 8, A_CHECK = 16;
  static constexpr int RED_PITCH = 8, PARTIAL_OFFSET = 2048, SMEM_BYTES = 2048 + 2 * 8 * 4;
  static constexpr bool DEPENDENT_LAUNCH = true;
};

// C[m][n] (f32) = A[m][k] B[k][n] with B's n contiguous: lanes along n, 4 columns a lane.
struct LanesAlongN {
  using index_t = long long;
  using A_t = float;
  using B_t = float;
  using C_t = float;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<3, 300>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<300, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<2048, 1>>,
                          dg::Role<index_t, dg::Seg<300, 2048>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<3, 2048>>, dg::Role<index_t, dg::Seg<2048, 1>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 3, N = 2048, K = 300;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    *p = beta != 0.0f ? fmaf(beta, *p, alpha * v) : alpha * v;
  }
  static constexpr int THREADS = 256, BN = 512;
  static constexpr bool LANES_ALONG_K = false;
  static constexpr int CH = 4, B_CHECK = 0;
  static constexpr int UNROLL = 2, COLS = 1, WN = 4;
  static constexpr int SPLITS = 1, K_SLICE = 300;
  static constexpr int TILES_N = 4, BLOCKS = 4;
  static constexpr int A_VEC = 1, A_CHECK = 0;
  static constexpr int RED_PITCH = 516, PARTIAL_OFFSET = 3600, SMEM_BYTES = 3600 + 2 * 3 * 516 * 4;
  static constexpr bool DEPENDENT_LAUNCH = false;
};

}  // namespace

cudaError_t gemv_lanes_along_k(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, cudaStream_t s) {
  return dg::gemv::launch<LanesAlongK>(A, B, C, {}, 1.0f, 0.0f, s);
}

cudaError_t gemv_lanes_along_n(const float* A, const float* B, float* C, cudaStream_t s) {
  return dg::gemv::launch<LanesAlongN>(A, B, C, {}, 1.0f, 0.5f, s);
}
