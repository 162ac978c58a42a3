// Instantiates dg/splitk.cuh with hand-written traits, as a generated folder does: the mma tile with K split over
// clusters and groups (a scratch buffer and the second kernel), and the FFMA tile over one cluster with rows at run
// time; tests/test_device_headers.py compiles it.
#include <cuda_fp16.h>

#include "dg/splitk.cuh"

namespace {

// C[m][n] (f16) = A[m][k] . B[n][k]: 4 x 16 x 65536, K over 2 groups of clusters of 4.
struct Groups {
  using index_t = int;
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<4, 65536>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<65536, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 65536>>,
                          dg::Role<index_t, dg::Seg<65536, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<4, 16>>, dg::Role<index_t, dg::Seg<16, 1>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 4, N = 16, K = 65536;
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
  static constexpr int THREADS = 32;
  static constexpr int BM = 16, BN = 16, BK = 64, STAGES = 3;
  static constexpr bool MMA = true;
  static constexpr int WARPS_M = 1, WARPS_N = 1;
  static constexpr bool A_K_INNER = true, B_K_INNER = true;
  static constexpr int MIN_BLOCKS = 4;
  static constexpr bool MIN_BLOCKS_NEEDS_CP_ASYNC = true;
  static constexpr int BATCH = 1, SMEM_BYTES = 3 * (16 * 72 + 16 * 72) * 2;
  static constexpr int SPLITS = 4, GROUPS = 2, KT_PER_SPLIT = 128;
  static constexpr int TILE_ELEMS = 4 * 16;
  static constexpr int RED_PITCH = 20, LAUNCH_SMEM_BYTES = SMEM_BYTES;
};
static_assert(dg::splitk::Split<Groups>::blocks(Groups::M) == 8 && dg::splitk::Split<Groups>::scratch_bytes() == 512,
              "a tile, 2 groups of 4 blocks, a partial tile a group");

// C[m][n] (f32) = A[m][k] . B[k][n], m (1..64) at run time, K over a cluster of 4; C's m contiguous.
struct OneGroup {
  using index_t = int;
  using A_t = float;
  using B_t = float;
  using C_t = float;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<64, 4096>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<4096, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<128, 1>>,
                          dg::Role<index_t, dg::Seg<4096, 128>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<64, 1>>, dg::Role<index_t, dg::Seg<128, 64>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M_UNIT = 1;
  static constexpr index_t M = 64, N = 128, K = 4096;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = true;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    *p = beta != 0.0f ? fmaf(beta, *p, alpha * v) : alpha * v;
  }
  static constexpr int THREADS = 64;
  static constexpr int BM = 32, BN = 32, BK = 16, STAGES = 2;
  static constexpr bool MMA = false;
  static constexpr int TM = 4, TN = 4;
  static constexpr int TRANSPOSE_DEPTH = 1;  // one register set: two stages
  static constexpr bool A_K_INNER = false, B_K_INNER = false;
  static constexpr int MIN_BLOCKS = 1;
  static constexpr bool MIN_BLOCKS_NEEDS_CP_ASYNC = false;
  static constexpr int BATCH = 1, SMEM_BYTES = 2 * (16 * 36 + 16 * 36) * 4;
  static constexpr int SPLITS = 4, GROUPS = 1, KT_PER_SPLIT = 64;
  static constexpr int RED_PITCH = 36, LAUNCH_SMEM_BYTES = SMEM_BYTES;
};

using dg::cta::Operand;

}  // namespace

cudaError_t splitk_groups(const __half* A, const __half* B, __half* C, bool aligned, cudaStream_t s) {
  if (aligned)
    return dg::splitk::launch<Groups, dg::cta::LoadCpAsync<Groups, Operand::A, 8>,
                              dg::cta::LoadCpAsync<Groups, Operand::B, 8>>(A, B, C, Groups::M, {}, 1.0f, 0.0f, s);
  return dg::splitk::launch<Groups, dg::cta::LoadGatherDirect<Groups, Operand::A>,
                            dg::cta::LoadGatherDirect<Groups, Operand::B>>(A, B, C, Groups::M, {}, 1.0f, 0.0f, s);
}

cudaError_t splitk_one_group(const float* A, const float* B, float* C, int64_t m, cudaStream_t s) {
  return dg::splitk::launch<OneGroup, dg::cta::LoadTranspose<OneGroup, Operand::A, 4>,
                            dg::cta::LoadCpAsync<OneGroup, Operand::B, 4>>(A, B, C, int(m) * OneGroup::M_UNIT, {}, 1.0f, 0.5f, s);
}
