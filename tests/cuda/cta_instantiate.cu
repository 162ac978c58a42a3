// Instantiates dg/cta.cuh with hand-written traits, as a generated folder does: the mma path on a batch with
// cp.async loaders and both gather fallbacks, and the FFMA path with rows at run time, a K tail, transposing loads
// and cp.async; tests/test_device_headers.py compiles it.
#include <cuda_fp16.h>

#include "dg/cta.cuh"

namespace {

// C[b][m][n] (f16) = A[b][k][m] . B[b][n][k]: 2 products of 100 x 72 x 200.
struct Mma {
  using index_t = int;
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t, dg::Seg<2, 20000>>, dg::Role<index_t, dg::Seg<100, 1>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<200, 100>>>;
  using B_view = dg::View<dg::Role<index_t, dg::Seg<2, 14400>>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<72, 200>>,
                          dg::Role<index_t, dg::Seg<200, 1>>>;
  using C_view = dg::View<dg::Role<index_t, dg::Seg<2, 7200>>, dg::Role<index_t, dg::Seg<100, 72>>,
                          dg::Role<index_t, dg::Seg<72, 1>>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 100, N = 72, K = 200;
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
  static constexpr int THREADS = 128;
  static constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3;
  static constexpr bool MMA = true;
  static constexpr int WARPS_M = 2, WARPS_N = 2;
  static constexpr bool A_K_INNER = false, B_K_INNER = true;
  static constexpr int MIN_BLOCKS = 2;
  static constexpr bool MIN_BLOCKS_NEEDS_CP_ASYNC = true;
  static constexpr int BATCH = 2, SMEM_BYTES = 3 * (32 * 72 + 64 * 40) * 2;
};
static_assert(dg::cta::Shape<Mma>::tiles(Mma::M) == 2 * 2 * 2, "tiles: m, n, batch");

// C[m][n] (f32) = A[m][k] . B[k][n], m (1..2048) at run time, A's rows 1028 apart, K = 1022 (a k-tile tail).
struct Ffma {
  using index_t = int;
  using A_t = float;
  using B_t = float;
  using C_t = float;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<2048, 1028>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1022, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<256, 1>>,
                          dg::Role<index_t, dg::Seg<1022, 256>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<2048, 256>>, dg::Role<index_t, dg::Seg<256, 1>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M_UNIT = 1;
  static constexpr index_t M = 2048, N = 256, K = 1022;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    *p = beta != 0.0f ? fmaf(beta, *p, alpha * v) : alpha * v;
  }
  static constexpr int THREADS = 256;
  static constexpr int BM = 64, BN = 64, BK = 16, STAGES = 3;
  static constexpr bool MMA = false;
  static constexpr int TM = 4, TN = 4;
  static constexpr int TRANSPOSE_DEPTH = 2;  // two register sets: the main loop steps two k-tiles at a time
  static constexpr bool A_K_INNER = false, B_K_INNER = false;
  static constexpr int MIN_BLOCKS = 2;
  static constexpr bool MIN_BLOCKS_NEEDS_CP_ASYNC = false;
  static constexpr int BATCH = 1, SMEM_BYTES = 3 * (16 * 68 + 16 * 68) * 4;
};

using dg::cta::Operand;

}  // namespace

cudaError_t cta_mma(const __half* A, const __half* B, __half* C, bool aligned, cudaStream_t s) {
  if (aligned)
    return dg::cta::launch<Mma, dg::cta::LoadCpAsync<Mma, Operand::A, 8>, dg::cta::LoadCpAsync<Mma, Operand::B, 8>>(
        A, B, C, Mma::M, {}, 1.0f, 0.0f, s);
  return dg::cta::launch<Mma, dg::cta::LoadGather<Mma, Operand::A>, dg::cta::LoadGatherDirect<Mma, Operand::B>>(
      A, B, C, Mma::M, {}, 1.0f, 0.0f, s);
}

cudaError_t cta_ffma(const float* A, const float* B, float* C, int64_t m, bool aligned, cudaStream_t s) {
  const int M = int(m) * Ffma::M_UNIT;
  if (aligned)
    return dg::cta::launch<Ffma, dg::cta::LoadTranspose<Ffma, Operand::A, 4>, dg::cta::LoadCpAsync<Ffma, Operand::B, 4>>(
        A, B, C, M, {}, 1.0f, 0.5f, s);
  return dg::cta::launch<Ffma, dg::cta::LoadTranspose<Ffma, Operand::A, 1>, dg::cta::LoadCpAsync<Ffma, Operand::B, 1>>(
      A, B, C, M, {}, 1.0f, 0.5f, s);
}
