// dg/splitk.cuh — the `splitk` family's tile shape: dg/cta.cuh's block tile over one K slice, K split over a cluster
// of SPLITS blocks (summed through distributed shared memory) and, with GROUPS > 1, over GROUPS clusters whose sums
// meet in a scratch buffer that a second kernel (finish) adds in group order.
//
// T is dg/cta.cuh's traits type plus: SPLITS, GROUPS, KT_PER_SPLIT (k-tiles a block), RED_PITCH (floats a row of
// the partial tile), LAUNCH_SMEM_BYTES (the pipeline's or the partial tile's shared memory, the larger), and with
// GROUPS > 1 TILE_ELEMS (floats of a group's partial tile: min(BM, M) x min(BN, N)).
#pragma once

#include <cooperative_groups.h>

#include "cta.cuh"
#include "reduce.cuh"

namespace dg {
namespace splitk {

template <class T>
struct Split {
  // Output tiles (a cluster each, GROUPS clusters each with groups) x SPLITS blocks.
  static constexpr int blocks(typename T::index_t M) { return cta::Shape<T>::tiles(M) * T::GROUPS * T::SPLITS; }
  static constexpr size_t scratch_bytes() { return size_t(cta::Shape<T>::tiles(T::M)) * T::GROUPS * T::TILE_ELEMS * 4; }
  static_assert(T::LAUNCH_SMEM_BYTES == (T::SMEM_BYTES > T::BM * T::RED_PITCH * 4 ? T::SMEM_BYTES
                                                                                 : T::BM * T::RED_PITCH * 4),
                "the partial tile reuses the pipeline's shared memory: the launch asks for the larger");
};

// Element e of a tile's valid rows x cols -> (r, c): consecutive e along C's contiguous role.
template <class T>
__device__ __forceinline__ void element_rc(int e, int rows, int cols, int& r, int& c) {
  r = T::c_along_m ? e % rows : e / cols;
  c = T::c_along_m ? e / rows : e % cols;
}

// Cluster c of SPLITS blocks is group c % GROUPS of output tile c / GROUPS; block r of it streams k-tiles
// [s * KT_PER_SPLIT, (s + 1) * KT_PER_SPLIT), s = g * SPLITS + r. One group: the cluster's sum is C (through
// T::store); more: the cluster writes its sum to its slot of `partials` ([output tile][group][element]).
template <class T, class LoadA, class LoadB>
__global__ void __launch_bounds__(T::THREADS, (cta::min_blocks<T, LoadA, LoadB>()))
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::index_t M_arg, typename T::Epilogue ep, float alpha,
           float beta, float* __restrict__ partials) {
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  using index_t = typename T::index_t;
  static_assert(T::GROUPS == 1 || !T::rows_at_run_time, "a plan with groups has a fixed scratch: fixed rows");
  constexpr int SPLITS = T::SPLITS, GROUPS = T::GROUPS;
  const index_t M = T::rows_at_run_time ? M_arg : T::M;
  extern __shared__ __align__(16) unsigned char smem[];
  A_t* const As = reinterpret_cast<A_t*>(smem);
  B_t* const Bs = reinterpret_cast<B_t*>(smem + T::STAGES * cta::Shape<T>::A_ELEMS * sizeof(A_t));
  wait_for_predecessor();

  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int split = int(cluster.block_rank());
  const int group = GROUPS > 1 ? int((blockIdx.x / SPLITS) % GROUPS) : 0;
  const int kt0 = (group * SPLITS + split) * T::KT_PER_SPLIT;
  const int kt_count = min(T::KT_PER_SPLIT, cta::Shape<T>::K_TILES - kt0);  // >= 1: the plan leaves no slice empty
  const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x / (SPLITS * GROUPS), M, A, B, C, ep);
  const cta::Math<T> math;
  typename cta::Math<T>::Acc acc;
  cta::mainloop<T, LoadA, LoadB>(As, Bs, A, B, t.m0, t.n0, M, kt0, kt_count, math, acc);

  // Park the partial tile in this block's shared memory (the pipeline's stages are free once every copy has landed
  // and every thread is past its last k-tile).
  if constexpr (LoadA::kAsync || LoadB::kAsync) cp_async_wait<0>();
  __syncthreads();
  float* const partial = reinterpret_cast<float*>(smem);
  math.park(partial, T::RED_PITCH, acc);
  if constexpr (GROUPS == 1) {
    (void)partials;
    store_partial_tile<T, T::BM, T::BN, T::THREADS, SPLITS, T::RED_PITCH>(partial, C, M, t.m0, t.n0, split, alpha,
                                                                            beta, ep);
  } else {
    // This block's loads are done: the next kernel in the stream (finish) may be scheduled; it waits for this grid
    // to complete before it reads the partials.
    launch_dependents();
    cluster.sync();  // every block's partial is written and visible across the cluster
    // Block `split` sums its share of the tile's valid elements over ranks 0..SPLITS-1 in order, into the slot
    // numbered as finish numbers it.
    const int rows = int(min(index_t(T::BM), M - t.m0)), cols = int(min(index_t(T::BN), T::N - t.n0));
    float* const slot = partials + size_t(blockIdx.x / SPLITS) * T::TILE_ELEMS;  // cluster = tile * GROUPS + group
    for (int e = split * T::THREADS + int(threadIdx.x); e < rows * cols; e += SPLITS * T::THREADS) {
      int r, c;
      element_rc<T>(e, rows, cols, r, c);
      float sum = 0.0f;
#pragma unroll
      for (int s = 0; s < SPLITS; ++s) sum += cluster.map_shared_rank(partial, s)[r * T::RED_PITCH + c];
      slot[e] = sum;
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
  }
}

// The second kernel (GROUPS > 1): block t adds the GROUPS partial tiles of output tile t in group order (the same
// order on every launch: bit-identical results) and stores C through T::store.
template <class T>
__global__ void __launch_bounds__(T::THREADS)
    finish(const float* __restrict__ partials, typename T::C_param* __restrict__ C, typename T::Epilogue ep,
           float alpha, float beta) {
  using index_t = typename T::index_t;
  wait_for_predecessor();  // the first kernel has completed and its partials are visible
  const typename T::A_t* A = nullptr;  // the tile's batch moves only C and the epilogue's views here
  const typename T::B_t* B = nullptr;
  const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x, T::M, A, B, C, ep);
  const int rows = int(min(index_t(T::BM), T::M - t.m0)), cols = int(min(index_t(T::BN), T::N - t.n0));
  const float* const in = partials + size_t(blockIdx.x) * T::GROUPS * T::TILE_ELEMS;
  for (int e = int(threadIdx.x); e < rows * cols; e += T::THREADS) {
    int r, c;
    element_rc<T>(e, rows, cols, r, c);
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < T::GROUPS; ++g) sum += in[g * T::TILE_ELEMS + e];
    T::store(C, t.m0 + r, t.n0 + c, sum, alpha, beta, T::M, ep);
  }
}

// Clusters of SPLITS blocks as a programmatic dependent launch; with groups, the scratch buffer from the
// stream-ordered allocator, the second kernel and the free, all on `stream` (graph capture records them as nodes;
// a concurrent stream gets its own buffer).
template <class T, class LoadA, class LoadB>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, typename T::index_t M,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  auto* k = kernel<T, LoadA, LoadB>;
  if constexpr (T::LAUNCH_SMEM_BYTES > 48 * 1024 || T::SPLITS > 8) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, k, T::LAUNCH_SMEM_BYTES, T::SPLITS > 8);
    if (err != cudaSuccess) return err;
  }
  const LaunchShape shape{unsigned(Split<T>::blocks(M)), unsigned(T::THREADS), unsigned(T::LAUNCH_SMEM_BYTES), true,
                          unsigned(T::SPLITS)};
  if constexpr (T::GROUPS == 1) {
    return dg::launch(k, shape, stream, A, B, C, M, ep, alpha, beta, static_cast<float*>(nullptr));
  } else {
    float* partials = nullptr;
    cudaError_t status = cudaMallocAsync(reinterpret_cast<void**>(&partials), Split<T>::scratch_bytes(), stream);
    if (status != cudaSuccess) return status;
    status = dg::launch(k, shape, stream, A, B, C, M, ep, alpha, beta, partials);
    if (status == cudaSuccess) {
      const LaunchShape second{unsigned(cta::Shape<T>::tiles(T::M)), unsigned(T::THREADS), 0u, true, 1u};
      status = dg::launch(finish<T>, second, stream, static_cast<const float*>(partials), C, ep, alpha, beta);
    }
    const cudaError_t freed = cudaFreeAsync(partials, stream);
    return status != cudaSuccess ? status : freed;
  }
}

}  // namespace splitk
}  // namespace dg
