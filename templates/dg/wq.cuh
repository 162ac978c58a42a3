// dg/wq.cuh — the `wq` family: integer weights B (int4 and uint4 packed eight to a 32-bit word, int8 and uint8)
// dequantized in registers with their scales and zero points, times f16/bf16 activations A on the CUDA cores in f32,
// for every view, packed layout and scale layout the spec allows (docs/design/weight-only.md).
//
// A block owns COLS consecutive output columns (flat n, one a thread: consecutive lanes read consecutive columns'
// words) and MT consecutive rows (flat m). Its KSPLIT = THREADS / COLS thread rows split K: thread row s takes
// k = s, s + KSPLIT, ..., and for each k dequantizes its column's weight once and adds it times A into MT f32 sums.
// The block then adds the KSPLIT partial sums in thread-row order through shared memory, so a result is
// bit-identical run to run, and stores through the traits' store (alpha, beta, the epilogue).
//
// T is the traits type the generated code defines: the views of A and C (dg/view.cuh) with the output's store, and
//   W_t                     the weights' element type: uint32_t (4-bit: a word of eight), int8_t or uint8_t
//   Weights                 B's index map: k and n (Role<...>: a role's flat index -> word offset, and the place of
//                           the value in its word), ORDER, SIGNED, BITS; DG (the dg layout: word and nibble follow
//                           from (k, n); K_CHUNKS its 64-k chunks)
//   Scales                  the scales' Roles (k, n; per block), S_t
//   Zeros                   HAS: whether there are zero points; their Roles, Z_t, BITS (0: a float), ORDER, FORM
//   THREADS, COLS, MT, KSPLIT, TILES_N
#pragma once

#include <cstdint>

#include "convert.cuh"
#include "launch.cuh"
#include "view.cuh"

namespace dg {
namespace wq {

enum Order { LINEAR = 0, AWQ = 1 };  // value j of a word in nibble j; AWQ's: nibble i holds value (0 2 4 6 1 3 5 7)[i]
enum Form { SUBTRACT = 0, PRESCALED = 1 };  // w = (q - z) s; w = q s - z (z holding the zero point times the scale)

// One letter of a role: Size indices, one element per Block of them, Stride elements apart (0: the view lacks the
// letter, or one element covers all of it). Packed: eight consecutive elements a 32-bit word, Stride words apart.
template <long long Size, long long Block, long long Stride, bool Packed = false>
struct Seg {
  static constexpr long long size = Size, block = Block, stride = Stride;
  static constexpr bool packed = Packed;
};

// A role's flat index -> the view's element (word) offset, and the place of the value among its word's eight (0
// where the role holds no packed letter); one Seg a letter, innermost first.
template <class I, class... Segs>
struct Role;

template <class I>
struct Role<I> {
  __host__ __device__ static constexpr I offset(I) { return I(0); }
  __host__ __device__ static constexpr int slot(I) { return 0; }
};

template <class I, class S, class... Outer>
struct Role<I, S, Outer...> {
  __host__ __device__ static constexpr I index(I i) { return (sizeof...(Outer) ? i % I(S::size) : i) / I(S::block); }
  __host__ __device__ static constexpr I offset(I i) {
    const I j = index(i);
    const I here = S::packed ? (j / I(8)) * I(S::stride) : j * I(S::stride);
    if constexpr (sizeof...(Outer) == 0) {
      return here;
    } else {
      return here + Role<I, Outer...>::offset(i / I(S::size));
    }
  }
  __host__ __device__ static constexpr int slot(I i) {
    const int here = S::packed ? int(index(i) % I(8)) : 0;
    if constexpr (sizeof...(Outer) == 0) {
      return here;
    } else {
      return here + Role<I, Outer...>::slot(i / I(S::size));
    }
  }
};

// The 4-bit value at place v (0..7) of a word in the given order; signed: two's complement.
template <int ORDER, bool SIGNED>
__device__ __forceinline__ int nibble(uint32_t word, int v) {
  const int at = ORDER == AWQ ? (v & 1) * 4 + (v >> 1) : v;
  const int q = int((word >> (4 * at)) & 15u);
  return SIGNED ? (q ^ 8) - 8 : q;
}

// The integer at (k, n) of a view whose index map is R (Weights, or Zeros): a byte, or a nibble of a word.
template <class R, class I, class E>
__device__ __forceinline__ int integer_at(const E* __restrict__ p, I k, I n) {
  if constexpr (R::BITS == 8) {
    return int(__ldg(p + (R::k::offset(k) + R::n::offset(n))));
  } else if constexpr (R::DG) {
    // 16 (n) x 64 (k) chunks of 128 words, n-major; lane 4 g + t (g = n % 8, t = (k % 64) / 16) holds the chunk's
    // k 16 t .. 16 t + 15 as its four 16-k tiles' mma.m16n8k16 A fragments, words 4 lane .. 4 lane + 3, word kt =
    // (k % 16) / 4 the k 16 t + 4 kt + r (r = k % 4); nibble 0 (g, r = 0), 1 (g + 8, 0), 2 (g, 2), 3 (g + 8, 2), 4 .. 7
    // the same at r = 1 and 3 (the fragment's slots 2t, 2t + 8 and 2t + 1, 2t + 9).
    const I lane = I(4) * (n % I(8)) + (k % I(64)) / I(16);
    const uint32_t word = __ldg(p + ((n / I(16) * I(R::K_CHUNKS) + k / I(64)) * I(128) + I(4) * lane + (k % I(16)) / I(4)));
    const int at = int((n % I(16)) / I(8) + I(2) * ((k % I(4)) / I(2)) + I(4) * (k % I(2)));
    const int q = int((word >> (4 * at)) & 15u);
    return R::SIGNED ? (q ^ 8) - 8 : q;
  } else {
    const uint32_t word = __ldg(p + (R::k::offset(k) + R::n::offset(n)));
    return nibble<R::ORDER, R::SIGNED>(word, R::k::slot(k) + R::n::slot(n));
  }
}

// The pointers of the scales and zero points, at their views' first elements.
template <class T>
struct Quant {
  const typename T::S_t* scales;
  const typename T::Z_t* zeros;  // nullptr without zero points
};

// B's weight at (k, n), dequantized in f32: q s, (q - z) s, or q s - z.
template <class T>
__device__ __forceinline__ float weight(const typename T::W_t* __restrict__ B, const Quant<T>& quant,
                                        typename T::index_t k, typename T::index_t n) {
  using W = typename T::Weights;
  using S = typename T::Scales;
  using Z = typename T::Zeros;
  const float q = float(integer_at<W>(B, k, n));
  const float s = to_float(__ldg(quant.scales + (S::k::offset(k) + S::n::offset(n))));
  if constexpr (!Z::HAS) {
    return q * s;
  } else {
    float z;
    if constexpr (Z::BITS == 0) {
      z = to_float(__ldg(quant.zeros + (Z::k::offset(k) + Z::n::offset(n))));
    } else {
      z = float(integer_at<Z>(quant.zeros, k, n));
    }
    return Z::FORM == SUBTRACT ? (q - z) * s : fmaf(q, s, -z);
  }
}

// M: the rows (T::M unless T::rows_at_run_time). Block b owns column tile b % TILES_N and row tile b / TILES_N.
template <class T>
__global__ void __launch_bounds__(T::THREADS)
    kernel(const typename T::A_t* __restrict__ A, const typename T::W_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::index_t M_arg, typename T::Epilogue ep, Quant<T> quant,
           float alpha, float beta) {
  using index_t = typename T::index_t;
  using Av = typename T::A_view;
  static_assert(!T::has_batch, "the family takes no batch of weight matrices");
  (void)T::c_along_m;  // stores go element by element from the sums, whatever C's contiguous role
  const index_t M = T::rows_at_run_time ? M_arg : T::M;
  const int col = int(threadIdx.x) % T::COLS, row = int(threadIdx.x) / T::COLS;
  const index_t n0 = index_t(blockIdx.x % unsigned(T::TILES_N)) * T::COLS;
  const index_t m0 = index_t(blockIdx.x / unsigned(T::TILES_N)) * T::MT;
  const index_t n = n0 + col;
  float acc[T::MT];
#pragma unroll
  for (int r = 0; r < T::MT; ++r) acc[r] = 0.0f;
  if (n < T::N) {
    for (index_t k = row; k < T::K; k += T::KSPLIT) {
      const float w = weight<T>(B, quant, k, n);
      const typename T::A_t* a = A + Av::k::offset(k);
#pragma unroll
      for (int r = 0; r < T::MT; ++r)
        if (m0 + r < M) acc[r] = fmaf(to_float(a[Av::m::offset(m0 + r)]), w, acc[r]);
    }
  }
  __shared__ float partial[T::KSPLIT][T::MT][T::COLS];
#pragma unroll
  for (int r = 0; r < T::MT; ++r) partial[row][r][col] = acc[r];
  __syncthreads();
  for (int t = int(threadIdx.x); t < T::MT * T::COLS; t += T::THREADS) {
    const int r = t / T::COLS, c = t % T::COLS;
    float v = 0.0f;
    for (int s = 0; s < T::KSPLIT; ++s) v += partial[s][r][c];  // thread-row order: bit-identical run to run
    T::store(C, m0 + r, n0 + c, v, alpha, beta, M, ep);
  }
}

// One grid of TILES_N x ceil(M / MT) blocks.
template <class T>
cudaError_t launch(const typename T::A_t* A, const typename T::W_t* B, typename T::C_param* C, typename T::index_t M,
                   typename T::Epilogue ep, Quant<T> quant, float alpha, float beta, cudaStream_t stream) {
  const long long tiles = (long long)T::TILES_N * ((M + T::MT - 1) / T::MT);
  const LaunchShape shape{unsigned(tiles), unsigned(T::THREADS), 0u, false, 1};
  return dg::launch(kernel<T>, shape, stream, A, B, C, M, ep, quant, alpha, beta);
}

}  // namespace wq
}  // namespace dg
