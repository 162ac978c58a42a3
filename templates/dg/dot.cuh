// dg/dot.cuh — the split-K dot kernel (the `dot` family, families/dot/): M = N = 1, C one element a batch
// index (a full reduction `ab,ab->`, a batch of dot products). A block has no output tile: its threads all run along
// K. With GROUPS > 1 the K slices of an output are separate blocks whose sums meet in a scratch buffer, added in
// order by a second kernel (finish).
//
// Thread t takes the chunks of CH consecutive k that start at t * CH + j * THREADS * CH in its block's K slice,
// UNROLL chunks of each input loaded a round; the order of the sum depends only on these constants, never on the
// width of the loads.
//
// T is the traits type the generated code defines: the views (dg/view.cuh) with the types, sizes and store of the
// output, and THREADS, CH, UNROLL, GROUPS (blocks, K slices, of one output), K_SLICE (a multiple of CH), TILES (the
// outputs: the batch), FINISH_THREADS (the second kernel's threads, GROUPS > 1).
#pragma once

#include <cstdint>

#include "convert.cuh"
#include "launch.cuh"
#include "ptx.cuh"
#include "view.cuh"

namespace dg {
namespace dot {

template <class T>
struct Grid {
  static constexpr int BLOCKS = T::TILES * T::GROUPS;
  static_assert(T::M == 1 && T::N == 1 && !T::rows_at_run_time, "the dot shape has one output element a batch index");
  static_assert(T::K_SLICE % T::CH == 0 && (T::GROUPS - 1) * T::K_SLICE < T::K,
                "every K slice starts at a chunk and is not empty");
  static constexpr size_t scratch_bytes() { return size_t(BLOCKS) * 4; }  // a float a block: [output][group]
};

// One chunk of an input (elements E, view V): CH elements at K-slice index kk (k = k0 + kk), VEC elements a load
// when the chunk is whole (VEC > 1 only where k is the input's stride-1 role: the views keep a vector inside one
// segment); zero past the slice's end.
template <class T, class E, class V, int VEC>
__device__ __forceinline__ void load_chunk(E (&w)[T::CH], const E* __restrict__ P, typename T::index_t k0,
                                           typename T::index_t kk, typename T::index_t k_len) {
  constexpr int CH = T::CH;
  if (kk + CH <= k_len) {
    if constexpr (VEC > 1) {
      using R = raw_t<VEC * int(sizeof(E))>;
#pragma unroll
      for (int v = 0; v < CH; v += VEC)
        *reinterpret_cast<R*>(&w[v]) = __ldg(reinterpret_cast<const R*>(P + V::k::offset(k0 + kk + v)));
    } else {
#pragma unroll
      for (int e = 0; e < CH; ++e) w[e] = P[V::k::offset(k0 + kk + e)];
    }
  } else {
#pragma unroll
    for (int e = 0; e < CH; ++e) w[e] = kk + e < k_len ? P[V::k::offset(k0 + kk + e)] : E(0.0f);
  }
}

// The block's sum, in a fixed order: a butterfly over each warp's lanes, then the warps in order. Valid in thread 0.
__device__ __forceinline__ float block_sum(float v, float* warp_sums) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x == 0) {
    for (int w = 0; w < int(blockDim.x / 32); ++w) sum += warp_sums[w];
  }
  return sum;
}

// Block b: output b / GROUPS, K slice b % GROUPS. VA, VB: elements a load of A and B (the launcher checks the
// pointers for the wide instantiation). One group: thread 0 stores C; more: the block's sum goes to partials[b].
template <class T, int VA, int VB>
__global__ void __launch_bounds__(T::THREADS)
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::Epilogue ep, float alpha, float beta,
           float* __restrict__ partials) {
  using index_t = typename T::index_t;
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  constexpr int CH = T::CH, UNROLL = T::UNROLL;
  (void)T::c_along_m;  // one output element a block: no store order to choose
  wait_for_predecessor();
  __shared__ float warp_sums[T::THREADS / 32];
  const int tile = int(blockIdx.x) / T::GROUPS, group = int(blockIdx.x) % T::GROUPS;
  if constexpr (T::has_batch) {
    A += T::A_view::batch::offset(tile);
    B += T::B_view::batch::offset(tile);
    C += T::C_view::batch::offset(tile);
    T::move_to_batch(ep, tile);
  } else {
    (void)tile;
  }
  const index_t k0 = index_t(group) * T::K_SLICE;
  const index_t k_len = min(index_t(T::K_SLICE), T::K - k0);  // >= 1: the plan leaves no slice empty

  float acc[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
  constexpr index_t STEP = index_t(T::THREADS) * CH;
#pragma unroll 1
  for (index_t kb = index_t(threadIdx.x) * CH; kb < k_len; kb += STEP * UNROLL) {
    alignas(16) A_t a[UNROLL][CH];
    alignas(16) B_t b[UNROLL][CH];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      load_chunk<T, A_t, typename T::A_view, VA>(a[u], A, k0, kb + u * STEP, k_len);
      load_chunk<T, B_t, typename T::B_view, VB>(b[u], B, k0, kb + u * STEP, k_len);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int e = 0; e < CH; ++e) acc[u] = fmaf(to_float(a[u][e]), to_float(b[u][e]), acc[u]);
  }
  // This block's loads are done: the next kernel in the stream may be scheduled (it waits for this grid to complete
  // before it touches memory).
  launch_dependents();

  float v = acc[0];
#pragma unroll
  for (int u = 1; u < UNROLL; ++u) v += acc[u];
  const float sum = block_sum(v, warp_sums);
  if constexpr (T::GROUPS > 1) {
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;  // [output][group]
  } else {
    (void)partials;
    if (threadIdx.x == 0) T::store(C, 0, 0, sum, alpha, beta, T::M, ep);
  }
}

// The second kernel (GROUPS > 1): block t adds the GROUPS sums of output t (thread i those at i, i + FINISH_THREADS,
// ... in order, then the same fixed tree) and stores C through T::store.
template <class T>
__global__ void __launch_bounds__(T::FINISH_THREADS)
    finish(const float* __restrict__ partials, typename T::C_param* __restrict__ C, typename T::Epilogue ep,
           float alpha, float beta) {
  wait_for_predecessor();  // the first kernel has completed and its sums are visible
  __shared__ float warp_sums[T::FINISH_THREADS / 32];
  const int tile = int(blockIdx.x);
  if constexpr (T::has_batch) {
    C += T::C_view::batch::offset(tile);
    T::move_to_batch(ep, tile);
  }
  float v = 0.0f;
  for (int g = int(threadIdx.x); g < T::GROUPS; g += T::FINISH_THREADS) v += partials[size_t(tile) * T::GROUPS + g];
  const float sum = block_sum(v, warp_sums);
  if (threadIdx.x == 0) T::store(C, 0, 0, sum, alpha, beta, T::M, ep);
}

// A programmatic dependent launch; with groups, the scratch buffer from the stream-ordered allocator, the second
// kernel and the free, all on `stream`.
template <class T, int VA, int VB>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, typename T::Epilogue ep,
                   float alpha, float beta, cudaStream_t stream) {
  auto* k = kernel<T, VA, VB>;
  const LaunchShape shape{unsigned(Grid<T>::BLOCKS), unsigned(T::THREADS), 0u, true, 1u};
  if constexpr (T::GROUPS == 1) {
    return dg::launch(k, shape, stream, A, B, C, ep, alpha, beta, static_cast<float*>(nullptr));
  } else {
    float* partials = nullptr;
    cudaError_t status = cudaMallocAsync(reinterpret_cast<void**>(&partials), Grid<T>::scratch_bytes(), stream);
    if (status != cudaSuccess) return status;
    status = dg::launch(k, shape, stream, A, B, C, ep, alpha, beta, partials);
    if (status == cudaSuccess) {
      const LaunchShape second{unsigned(T::TILES), unsigned(T::FINISH_THREADS), 0u, true, 1u};
      status = dg::launch(finish<T>, second, stream, static_cast<const float*>(partials), C, ep, alpha, beta);
    }
    const cudaError_t freed = cudaFreeAsync(partials, stream);
    return status != cudaSuccess ? status : freed;
  }
}

}  // namespace dot
}  // namespace dg
