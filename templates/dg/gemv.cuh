// dg/gemv.cuh — the `gemv` family: a few rows of A (M <= 4) times B on the FMA units, B streamed once through
// registers with two rounds of loads in flight.
//
// A block owns BN columns of C (all M rows) and one K slice of K_SLICE elements; the SPLITS slices of one column
// tile form a cluster and sum their partial tiles through distributed shared memory (dg/reduce.cuh). A's slice
// goes through shared memory once; lanes run along k (each warp owns COLS columns and its lanes split the slice)
// or along n (each lane owns CH adjacent columns and the warps of a column split the slice's k rows).
//
// T is the traits type the generated code defines: the views (dg/view.cuh) with the types, sizes and store of the
// output, and the plan's tile parameters:
//   THREADS, BN, CH, UNROLL, LANES_ALONG_K, COLS (lanes along k), WN (lanes along n), SPLITS, K_SLICE, TILES_N,
//   BLOCKS, RED_PITCH, PARTIAL_OFFSET, SMEM_BYTES, PARTIAL_SLICES, A_VEC (A's staging vector, elements; 1: none),
//   A_CHECK (bytes A's pointer is checked for before vector staging; 0: always), DEPENDENT_LAUNCH, CLUSTER_ATTRIBUTES.
#pragma once

#include <cstdint>

#include "convert.cuh"
#include "launch.cuh"
#include "ptx.cuh"
#include "reduce.cuh"
#include "view.cuh"

namespace dg {
namespace gemv {

// One chunk of B: CH elements along the lane direction at (column gn, K-slice index kk), VEC elements a load; zero
// where the chunk leaves the view or the slice (tails).
template <class T, int VEC>
__device__ __forceinline__ void load_b_chunk(typename T::B_t (&w)[T::CH], const typename T::B_t* __restrict__ B,
                                             typename T::index_t gn, typename T::index_t k0, int kk, int k_len) {
  using index_t = typename T::index_t;
  using B_t = typename T::B_t;
  using Bv = typename T::B_view;
  constexpr int CH = T::CH;
  const int valid = T::LANES_ALONG_K ? (gn < T::N ? min(CH, k_len - kk) : 0)
                                     : (kk < k_len ? int(min(index_t(CH), T::N - gn)) : 0);
  if (valid == CH) {
    const B_t* p = B + (Bv::n::offset(gn) + Bv::k::offset(k0 + kk));
    using R = raw_t<VEC * int(sizeof(B_t))>;
#pragma unroll
    for (int v = 0; v < CH; v += VEC) *reinterpret_cast<R*>(&w[v]) = __ldg(reinterpret_cast<const R*>(p + v));
  } else {
#pragma unroll
    for (int e = 0; e < CH; ++e) {
      if constexpr (T::LANES_ALONG_K)
        w[e] = e < valid ? B[Bv::n::offset(gn) + Bv::k::offset(k0 + kk + e)] : B_t(0.0f);
      else
        w[e] = e < valid ? B[Bv::n::offset(gn + e) + Bv::k::offset(k0 + kk)] : B_t(0.0f);
    }
  }
}

// A's K slice, every row, into shared memory [M][K_SLICE], zero past the slice's end (whole chunks can be read):
// A_VEC-element vectors, up to 4 a thread loaded before any is stored (one round trip for many vectors), or
// element by element (VEC == 1).
template <class T, int AV>
__device__ __forceinline__ void stage_a(typename T::A_t* xs, const typename T::A_t* __restrict__ A,
                                       typename T::index_t k0, int k_len) {
  using A_t = typename T::A_t;
  using Av = typename T::A_view;
  constexpr int M = int(T::M), K_SLICE = T::K_SLICE, THREADS = T::THREADS;
  if constexpr (AV == 1) {
    for (int i = threadIdx.x; i < M * K_SLICE; i += THREADS) {
      const int r = i / K_SLICE, kk = i % K_SLICE;
      xs[i] = kk < k_len ? A[Av::m::offset(r) + Av::k::offset(k0 + kk)] : A_t(0.0f);
    }
  } else {
    constexpr int A_VECS = M * (K_SLICE / AV);
    constexpr int A_PER = (A_VECS + THREADS - 1) / THREADS, A_BATCH = A_PER < 4 ? A_PER : 4;
    using AV_t = raw_t<AV * int(sizeof(A_t))>;
#pragma unroll 1
    for (int b0 = 0; b0 < A_PER; b0 += A_BATCH) {
      AV_t v[A_BATCH];
#pragma unroll
      for (int b = 0; b < A_BATCH; ++b) {
        const int i = threadIdx.x + (b0 + b) * THREADS;
        const int r = i / (K_SLICE / AV), kk = i % (K_SLICE / AV) * AV;
        if constexpr (T::K % AV != 0) {
          if (i < A_VECS && kk + AV <= k_len) {
            v[b] = __ldg(reinterpret_cast<const AV_t*>(A + (Av::m::offset(r) + Av::k::offset(k0 + kk))));
          } else {  // K's end (not whole vectors): element by element, zero past it
            alignas(16) A_t e[AV];
#pragma unroll
            for (int x = 0; x < AV; ++x)
              e[x] = i < A_VECS && kk + x < k_len ? A[Av::m::offset(r) + Av::k::offset(k0 + kk + x)] : A_t(0.0f);
            v[b] = *reinterpret_cast<const AV_t*>(e);
          }
        } else {
          // K is whole vectors (and so is every slice): a vector is in the slice or past its end (zero).
          v[b] = i < A_VECS && kk < k_len
                     ? __ldg(reinterpret_cast<const AV_t*>(A + (Av::m::offset(r) + Av::k::offset(k0 + kk))))
                     : AV_t{};
        }
      }
#pragma unroll
      for (int b = 0; b < A_BATCH; ++b) {
        const int i = threadIdx.x + (b0 + b) * THREADS;
        if (i < A_VECS) reinterpret_cast<AV_t*>(xs)[i] = v[b];
      }
    }
  }
}

// VEC: elements of B a load (CH, or fewer where B's pointer fails the plan's alignment check). At most 128
// registers a thread with full-width loads (MIN_BLOCKS blocks an SM keep enough loads in flight); the narrow-load
// fallback keeps the whole register file: under the cap it spills.
template <class T, int VEC>
__global__ void __launch_bounds__(T::THREADS, VEC == T::CH ? 65536 / (T::THREADS * 128) : 1)
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::Epilogue ep, float alpha, float beta) {
  static_assert(!T::rows_at_run_time, "gemv's rows are fixed: a bucket of the run-time size has its own instantiation");
  using index_t = typename T::index_t;
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  constexpr int M = int(T::M), CH = T::CH, K_SLICE = T::K_SLICE, RED_PITCH = T::RED_PITCH;
  extern __shared__ __align__(16) unsigned char smem[];
  A_t* const xs = reinterpret_cast<A_t*>(smem);
  float* const partial = reinterpret_cast<float*>(smem + T::PARTIAL_OFFSET);
  if constexpr (T::DEPENDENT_LAUNCH) wait_for_predecessor();
  // Blocks [SPLITS * t, SPLITS * (t + 1)) form the cluster of column tile t; the rank is the K slice.
  const int split = cluster_rank<T::SPLITS>();
  const index_t tile = blockIdx.x / T::SPLITS;
  const index_t n0 = (tile % T::TILES_N) * T::BN;
  if constexpr (T::has_batch) {
    const index_t batch = tile / T::TILES_N;
    A += T::A_view::batch::offset(batch);
    B += T::B_view::batch::offset(batch);
    C += T::C_view::batch::offset(batch);
    T::move_to_batch(ep, batch);
  }
  const index_t k0 = index_t(split) * K_SLICE;
  const int k_len = int(min(index_t(K_SLICE), T::K - k0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int U = VEC == CH ? T::UNROLL : 1;  // narrower loads take more registers: one chunk a round

  // Lanes along k: warp w owns columns [w * COLS, (w + 1) * COLS) of the block; lane l takes elements
  // [l * CH, (l + 1) * CH) of every 32 * CH wide step of the slice. Lanes along n: lane l of warp column wn owns
  // columns [(wn * 32 + l) * CH, + CH) of the block; the WK warps of a column take the slice's k rows in turn.
  constexpr int COLS = T::LANES_ALONG_K ? T::COLS : 1;
  constexpr int WN = T::LANES_ALONG_K ? 1 : T::WN, WK = T::THREADS / 32 / WN;
  constexpr int STEP = T::LANES_ALONG_K ? 32 * CH * U : WK * U;  // elements (rows) of K a round
  const int wn = warp % WN, wk = warp / WN;
  const index_t col0 = T::LANES_ALONG_K ? n0 + warp * COLS : n0 + (wn * 32 + lane) * CH;
  const int kb0 = T::LANES_ALONG_K ? lane * CH : wk;
  alignas(16) B_t wa[U][COLS][CH], wb[U][COLS][CH];
  const auto load = [&](B_t (&w)[U][COLS][CH], int kb) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < COLS; ++c) {
        if constexpr (T::LANES_ALONG_K)
          load_b_chunk<T, VEC>(w[u][c], B, col0 + c, k0, kb + u * 32 * CH, k_len);
        else
          load_b_chunk<T, VEC>(w[u][c], B, col0, k0, kb + u * WK, k_len);
      }
  };
  // B's first round is in flight while A's slice is staged: the two round trips overlap.
  load(wa, kb0);
  if constexpr (T::A_VEC > 1 && T::A_CHECK > 0) {
    // Vectors where A's view pointer allows them (uniform over the grid), else element by element.
    if (reinterpret_cast<uintptr_t>(A) % T::A_CHECK == 0)
      stage_a<T, T::A_VEC>(xs, A, k0, k_len);
    else
      stage_a<T, 1>(xs, A, k0, k_len);
  } else {
    stage_a<T, T::A_VEC>(xs, A, k0, k_len);
  }
  __syncthreads();

  float acc[M][COLS * (T::LANES_ALONG_K ? 1 : CH)];
#pragma unroll
  for (int r = 0; r < M; ++r)
#pragma unroll
    for (int c = 0; c < COLS * (T::LANES_ALONG_K ? 1 : CH); ++c) acc[r][c] = 0.0f;
  const auto fma_round = [&](const B_t (&w)[U][COLS][CH], int kb) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = kb + u * (T::LANES_ALONG_K ? 32 * CH : WK);
      if (kk < k_len) {
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if constexpr (T::LANES_ALONG_K) {
            using AR = raw_t<CH * int(sizeof(A_t))>;
            alignas(16) A_t x[CH];
            *reinterpret_cast<AR*>(x) = *reinterpret_cast<const AR*>(xs + r * K_SLICE + kk);
#pragma unroll
            for (int e = 0; e < CH; ++e) {
              const float xf = to_float(x[e]);
#pragma unroll
              for (int c = 0; c < COLS; ++c) acc[r][c] = fmaf(xf, to_float(w[u][c][e]), acc[r][c]);
            }
          } else {
            const float xf = to_float(xs[r * K_SLICE + kk]);
#pragma unroll
            for (int e = 0; e < CH; ++e) acc[r][e] = fmaf(xf, to_float(w[u][0][e]), acc[r][e]);
          }
        }
      }
    }
  };
  // Two register buffers: one round's loads are in flight while the other's FMAs run. Loads past the slice fetch
  // nothing (zeros), so the loop needs no epilogue.
#pragma unroll 1
  for (int kb = kb0; kb < k_len; kb += 2 * STEP) {
    load(wb, kb + STEP);
    fma_round(wa, kb);
    load(wa, kb + 2 * STEP);
    fma_round(wb, kb + STEP);
  }

  if constexpr (T::LANES_ALONG_K) {
    // The warp's 32 partial sums of each output, added with shuffles (a fixed tree: deterministic).
#pragma unroll
    for (int r = 0; r < M; ++r)
#pragma unroll
      for (int c = 0; c < COLS; ++c) {
        float v = acc[r][c];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) partial[r * RED_PITCH + warp * COLS + c] = v;
      }
  } else {
    // Each k-splitting warp row's sums, then the rows added in order into the first.
    float* const warp_rows = partial + wk * (M * RED_PITCH);
    const int cl = (wn * 32 + lane) * CH;
#pragma unroll
    for (int r = 0; r < M; ++r)
#pragma unroll
      for (int e = 0; e < CH; ++e) warp_rows[r * RED_PITCH + cl + e] = acc[r][e];
    __syncthreads();
    for (int i = threadIdx.x; i < M * T::BN; i += T::THREADS) {
      const int r = i / T::BN, c = i % T::BN;
      float s = partial[r * RED_PITCH + c];
      for (int w = 1; w < WK; ++w) s += partial[(w * M + r) * RED_PITCH + c];
      partial[r * RED_PITCH + c] = s;
    }
  }
  store_partial_tile<T, M, T::BN, T::THREADS, T::SPLITS, RED_PITCH>(partial, C, T::M, 0, n0, split, alpha, beta, ep);
}

// Launches the kernel with VEC-element loads of B: in clusters of SPLITS blocks along x where K is split, as a
// programmatic dependent launch where the plan says so (a cluster launch always is one).
template <class T, int VEC>
cudaError_t launch_with(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C,
                        typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  auto* k = kernel<T, VEC>;
  if constexpr (T::SMEM_BYTES > 48 * 1024 || T::SPLITS > 8) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, k, T::SMEM_BYTES, T::SPLITS > 8);
    if (err != cudaSuccess) return err;
  }
  const LaunchShape shape{unsigned(T::BLOCKS), unsigned(T::THREADS), unsigned(T::SMEM_BYTES),
                          T::SPLITS > 1 || T::DEPENDENT_LAUNCH, unsigned(T::SPLITS)};
  return dg::launch(k, shape, stream, A, B, C, ep, alpha, beta);
}

// A, B and C point at the views' first elements. CH-element loads of B need its pointer B_CHECK-byte aligned
// (B_CHECK 0: the spec's promise is enough); otherwise the kernel takes CH_PROMISED-element loads.
template <class T>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  if constexpr (T::B_CHECK > 0) {
    if (reinterpret_cast<uintptr_t>(B) % T::B_CHECK == 0) return launch_with<T, T::CH>(A, B, C, ep, alpha, beta, stream);
    return launch_with<T, T::CH_PROMISED>(A, B, C, ep, alpha, beta, stream);
  } else {
    return launch_with<T, T::CH>(A, B, C, ep, alpha, beta, stream);
  }
}

}  // namespace gemv
}  // namespace dg
