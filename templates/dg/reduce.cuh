// dg/reduce.cuh — the end of the small-M kernels: a block's f32 partial tile to the output, summed over the K
// slices of a cluster where K is split.
#pragma once

#include <cooperative_groups.h>

#include "ptx.cuh"

namespace dg {

// The block's rank in its cluster of `Splits` (0 where there is no cluster). The cluster API exists from sm_90 on:
// compiled for an earlier arch, a kernel may not split K over a cluster (its plan says so through arch_features).
template <int Splits>
__device__ __forceinline__ int cluster_rank() {
  if constexpr (Splits > 1) {
#ifdef _CG_HAS_CLUSTER_GROUP
    return int(cooperative_groups::this_cluster().block_rank());
#else
    static_assert(Splits == 1, "a K split over a cluster needs sm_90");
#endif
  }
  return 0;
}

// Every block of a cluster of `Splits` holds its partial BM x BN tile (f32, `RedPitch` floats a row) at `partial`
// in its own shared memory; block `split` sums its share of the tile's valid elements over ranks 0..Splits-1 in
// rank order (the same order on every launch: bit-identical results run to run) and stores them through
// T::store. With Splits == 1 there is no cluster: the block stores its own tile. Consecutive threads take
// consecutive elements along the output's contiguous role (T::c_along_m), so that the stores coalesce.
template <class T, int BM, int BN, int Threads, int Splits, int RedPitch>
__device__ __forceinline__ void store_partial_tile(float* partial, typename T::C_param* C, typename T::index_t M,
                                                   typename T::index_t m0, typename T::index_t n0, int split,
                                                   float alpha, float beta, const typename T::Epilogue& ep) {
  using index_t = typename T::index_t;
  const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));
  if constexpr (Splits > 1) {
#ifdef _CG_HAS_CLUSTER_GROUP
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    // This block's loads are done: the next kernel in the stream may be scheduled.
    launch_dependents();
    cluster.sync();  // every block's partial is written and visible across the cluster
    for (int e = split * Threads + int(threadIdx.x); e < rows * cols; e += Splits * Threads) {
      const int r = T::c_along_m ? e % rows : e / cols, c = T::c_along_m ? e / rows : e % cols;
      float sum = 0.0f;
#pragma unroll
      for (int s = 0; s < Splits; ++s) sum += cluster.map_shared_rank(partial, s)[r * RedPitch + c];
      T::store(C, m0 + r, n0 + c, sum, alpha, beta, M, ep);
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
#else
    static_assert(Splits == 1, "a K split over a cluster needs sm_90");
#endif
  } else {
    __syncthreads();  // the block's tile is complete: one K slice, nothing to sum
    for (int e = int(threadIdx.x); e < rows * cols; e += Threads) {
      const int r = T::c_along_m ? e % rows : e / cols, c = T::c_along_m ? e / rows : e % cols;
      T::store(C, m0 + r, n0 + c, partial[r * RedPitch + c], alpha, beta, M, ep);
    }
  }
}

}  // namespace dg
