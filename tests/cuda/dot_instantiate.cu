// Instantiates dg/dot.cuh with hand-written traits, as a generated folder does: a batch of dot products over groups
// (a scratch buffer and the second kernel), and a full reduction in one block a product; tests/test_device_headers.py
// compiles it.
#include <cuda_fp16.h>

#include "dg/dot.cuh"

namespace {

// C[z] (f16) = sum_k A[z][k] B[z][k]: 3 products of K = 100000, 4 blocks (K slices) each.
struct Groups {
  using index_t = int;
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t, dg::Seg<3, 100000>>, dg::Role<index_t>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<100000, 1>>>;
  using B_view = A_view;
  using C_view = dg::View<dg::Role<index_t, dg::Seg<3, 1>>, dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 1, N = 1, K = 100000;
  static constexpr bool has_batch = true;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void move_to_batch(Epilogue&, index_t) {}
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    float out = alpha * v;
    if (beta != 0.0f) out = fmaf(beta, dg::to_float(*C), out);
    *C = dg::from_float<C_t>(out);
  }
  static constexpr int THREADS = 256, CH = 8, UNROLL = 4;
  static constexpr int GROUPS = 4;
  static constexpr index_t K_SLICE = 25000;
  static constexpr int TILES = 3;
  static constexpr int FINISH_THREADS = 32;
};
static_assert(dg::dot::Grid<Groups>::BLOCKS == 12 && dg::dot::Grid<Groups>::scratch_bytes() == 48, "a float a block");

// C (f32) = sum_ab A[a][b] B[b][a]: 40 x 50, one block; B's k strided.
struct OneBlock {
  using index_t = int;
  using A_t = float;
  using B_t = float;
  using C_t = float;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<2000, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<50, 40>, dg::Seg<40, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 1, N = 1, K = 2000;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    *C = beta != 0.0f ? fmaf(beta, *C, alpha * v) : alpha * v;
  }
  static constexpr int THREADS = 128, CH = 4, UNROLL = 2;
  static constexpr int GROUPS = 1;
  static constexpr index_t K_SLICE = 2000;
  static constexpr int TILES = 1;
};

}  // namespace

cudaError_t dot_groups(const __half* A, const __half* B, __half* C, bool aligned, cudaStream_t s) {
  if (aligned) return dg::dot::launch<Groups, 8, 8>(A, B, C, {}, 1.0f, 0.0f, s);
  return dg::dot::launch<Groups, 1, 1>(A, B, C, {}, 1.0f, 0.0f, s);
}

cudaError_t dot_one_block(const float* A, const float* B, float* C, cudaStream_t s) {
  return dg::dot::launch<OneBlock, 4, 1>(A, B, C, {}, 1.0f, 0.5f, s);
}
