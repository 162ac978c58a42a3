// dg/wqtc.cuh — the `wqtc` family: 4-bit weights in deepgemm's dg layout (`deepgemm pack --to dg`) or in GPTQ's
// words, or 8-bit weights contiguous along k (nn.Linear's [n, k]), times f16 or bf16 activations on the tensor cores
// (mma.sync m16n8k16, f32 sums), for decode: up to 64 rows, run-time rows too (docs/design/weight-only.md).
//
// The weights are the mma's A operand (16 columns n by 16 k: its rows are n), the activations its B operand (16 k
// by 8 rows m, zero past M), so each mma adds a 16 n x 8 m tile of C^T. The sum does not depend on which k of a
// chunk meets which mma k slot, as long as both operands agree, so lane t's slots take the chunk's k 16 t .. 16 t +
// 15 in either layout: tile kt's pairs (2t, 2t + 1) and (2t + 8, 2t + 9) take k 16 t + 4 kt + (0, 1) and + (2, 3).
// A lane's activations of a chunk are then 16 consecutive k of a row (two 16-byte loads where A allows), under one
// scale (a group covers whole 16-k tiles).
//
// The dg layout stores a 16 n x 64 k chunk as 128 words in which lane l's four words, one 16-byte load, are its A
// fragments of the chunk's four 16-k tiles: word kt holds the slots (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8) in
// nibbles 0..3 and the same at slot + 1 in nibbles 4..7 (g = l / 4, t = l % 4; (n, slot) within the tile): nibble
// j holds column g + 8 (j % 2) at k 16 t + 4 kt + 2 ((j / 2) % 2) + j / 4. So `(word >> 4 i) & 0x000F000F` is
// register i's pair, one nibble in the low bits of each 16-bit half; one lop3 ORs it into the bits of 1024.0 (f16
// 0x6400) or 128.0 (bf16 0x4300), and each half reads magic + q exactly. One subtraction leaves q (int4: the word XOR
// 0x88888888 first, so that the nibble is q + 8, then magic + 8 is subtracted), exact in both types (f16 takes the
// odd registers' pairs unshifted, as 1024 + 16 q, and one fma by 1/16); the weight is
// q s (one multiply), (q - z) s with subtracted zero points or q s - z with prescaled ones (one fma), rounded once to
// the activations' type, with s and z those of the fragment row's column and the lane's 16 k. An integer z folds
// into the subtraction (magic + z replaces magic, still exact), so that its (q - z) s costs what q s does; a float
// z takes one exact-input subtraction more.
//
// Words of eight consecutive k of one column (GPTQ's qweight, K_WORDS) are read as they lie: the lane loads two
// words of each of its two columns, and one byte permute of a word gives a register's pair.
//
// 8-bit weights contiguous along k (K_BYTES) are read as they lie too: the lane's 16 k of each of its two columns
// are one 16-byte load (a chunk of a strip is 1024 bytes), word kt of it tile kt's bytes, and register i's pair
// bytes 2 (i / 2) and + 1 of the word of row g + 8 (i % 2). In f16 one byte permute puts them under 0x64 (1024 + q,
// exact: q + 128 for int8, the word XOR 0x80808080 first) and one subtraction leaves q, or q - z folded; bf16 holds
// too few significant bits for 128 + q, so each byte goes under the f32 2^23 (0x4B000000), one f32 subtraction
// leaves q exactly and one conversion makes the pair (exact: |q| < 256), its zero point then subtracted in bf16
// (exact where |q - z| < 256, as for uint8 weights and zero points; int8 with a zero point past 127 rounds once,
// relative to q - z).
//
// Work: a block of WK warps owns NS consecutive 16-column strips; warp w takes the chunks w, w + WK, w + 2 WK, ...
// of each strip's K_CHUNKS, so the block's warps read consecutive 512-byte chunks (of the dg layout; 8-bit weights'
// 1024-byte chunks are 16 column runs of 64 bytes). The weights stream through
// registers DEPTH chunks ahead, in 16-byte loads that bypass L1, with their chunks' scales and zero points (held as
// loaded, converted when used, so that no load stalls before its chunk); the activations' fragments come through
// L1 (every warp of the grid reads the same rows of A), a lane's run of k in 16-byte loads where A's rows allow
// (A_VEC16), else in 32-bit pairs where A is k-contiguous (A_PAIRS).
// The WK warps' partial sums meet in shared memory and warp 0 adds them in warp order (bit-identical run to run),
// then stores through the traits' store (alpha, beta, the epilogue), nothing past M or N.
//
// T is the traits type the generated code defines: the views of A and C (dg/view.cuh) with the output's store, and
//   B_t, SIGNED               B: uint32_t, 4-bit values eight a word (int4 when SIGNED, else uint4); or int8_t /
//                             uint8_t (K_BYTES)
//   LAYOUT, Weights           DG_WORDS: the dg layout (the padding past K and N holds zero nibbles); K_WORDS: words
//                             of eight consecutive k, nibble j holding k % 8 = j (GPTQ's), at Weights::k and ::n's
//                             offsets (dg/wq.cuh's Roles); K_BYTES: bytes at those offsets, k's stride 1 and each
//                             column's first byte 16-byte aligned
//   K_CHUNKS, STRIPS          64-k chunks a strip (ceil(K / 64)) and 16-column strips (ceil(N / 16))
//   Scales, S_t, GROUP_K      the scales' Roles (k, n; dg/wq.cuh's, per block) and the k indices one scale covers
//                             (a multiple of 16, or K and more: one a column)
//   QPC                       scale (and zero-point) loads a chunk of a strip: 0 (one a column, read once) or 1
//                             (a lane's k of a chunk lie in one 16-k tile, so in one group)
//   Zeros, Z_t                HAS: whether there are zero points; their Roles, BITS (0: a float), ORDER, FORM
//   A_VEC16                   every run of 8 k from a multiple of 8 of a row of A is one aligned 16-byte load
//   A_PAIRS                   A's k letter is its one contiguous k segment and every pair (k, k + 1), k even, of a
//                             row is 4-byte aligned: a pair is one load
//   WK, NS, MT, DEPTH, BLOCKS warps a block (K slices), strips a warp, 8-row m tiles (ceil(max M / 8)), chunks in
//                             flight a strip, blocks of the grid (ceil(strips / NS))
//   MIN_BLOCKS                blocks an SM the launch bound asks for: the plan's registers a thread (128), which
//                             ptxas would otherwise undercut and spill
#pragma once

#include <cstdint>
#include <type_traits>

#include "convert.cuh"
#include "launch.cuh"
#include "ptx.cuh"
#include "view.cuh"
#include "wq.cuh"

namespace dg {
namespace wqtc {

// The layouts of B the family reads: deepgemm's dg chunks; words of eight consecutive k of one column (GPTQ's
// qweight[k / 8][n], any strides: Weights::k and ::n, dg/wq.cuh's Roles, give a word's offset); bytes contiguous
// along k (8-bit weights as nn.Linear keeps them, [n][k]).
enum Layout { DG_WORDS = 0, K_WORDS = 1, K_BYTES = 2 };

// E's 16-bit pattern of `magic` + q for the nibble values of a pair (f16: 1024 + q; bf16: 128 + q).
template <class E>
struct Magic;
template <>
struct Magic<__half> {
  static constexpr uint32_t BITS = 0x64006400u;  // 1024.0 in each half: a nibble ORed in is 1024 + q exactly
  __device__ static __forceinline__ __half2 value(float x) { return __float2half2_rn(x); }
  __device__ static __forceinline__ __half2 sub(uint32_t a, __half2 b) {
    return __hsub2(*reinterpret_cast<__half2*>(&a), b);
  }
};
template <>
struct Magic<__nv_bfloat16> {
  static constexpr uint32_t BITS = 0x43004300u;  // 128.0 in each half: 128 + q exactly (8 significant bits)
  __device__ static __forceinline__ __nv_bfloat162 value(float x) { return __float2bfloat162_rn(x); }
  __device__ static __forceinline__ __nv_bfloat162 sub(uint32_t a, __nv_bfloat162 b) {
    return __hsub2(*reinterpret_cast<__nv_bfloat162*>(&a), b);
  }
};

template <class E>
using pair_t = typename std::conditional<std::is_same<E, __half>::value, __half2, __nv_bfloat162>::type;

// (a & b) | c in one instruction.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));  // 0xEA: (F0 & CC) | AA
  return d;
}

template <class T>
struct Quant {
  const typename T::S_t* scales;
  const typename T::Z_t* zeros;  // nullptr without zero points
};

// The scales and zero points of the fragment rows g and g + 8 of a strip at one k, as loaded (converted at use, so
// that a load issued chunks ahead does not stall until its values are needed): zero past N or K (padding, whose
// products are never stored or meet zero activations). A 4-bit zero point is its word.
template <class T>
struct QuantRaw {
  typename T::S_t s[2];
  typename T::Z_t z[2];
};

template <class T>
__device__ __forceinline__ QuantRaw<T> load_quant(const Quant<T>& quant, typename T::index_t k, typename T::index_t n) {
  using S = typename T::Scales;
  using Z = typename T::Zeros;
  QuantRaw<T> r;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const typename T::index_t col = n + 8 * h;
    const bool in = col < T::N && k < T::K;
    r.s[h] = in ? __ldg(quant.scales + (S::k::offset(k) + S::n::offset(col))) : typename T::S_t(0);
    if constexpr (Z::HAS) r.z[h] = in ? __ldg(quant.zeros + (Z::k::offset(k) + Z::n::offset(col))) : typename T::Z_t(0);
  }
  return r;
}

// The zero point in a loaded element: a float, a byte, or the nibble of (k, n) in its word.
template <class Z, class I, class E>
__device__ __forceinline__ float zero_value(E raw, I k, I n) {
  if constexpr (Z::BITS == 0) {
    return to_float(raw);
  } else if constexpr (Z::BITS == 8) {
    return float(raw);
  } else {
    return float(wq::nibble<Z::ORDER, false>(raw, Z::k::slot(k) + Z::n::slot(n)));
  }
}

// Whether integer zero points fold into the subtraction that turns magic + q into q: magic + (8) + z is exact in E
// for a 4-bit z, and for an 8-bit one in f16 (bf16's 8 significant bits end at 255), so (magic + q) - (magic + z)
// is q - z exactly, and the weight is (q - z) s with no instruction beyond those of w = q s. 8-bit weights fold in
// f16 only (1024 + 128 + 255 is exact there; bf16 forms q in f32).
enum ZeroTerm { NO_ZERO, FOLDED_ZERO, SUBTRACTED_ZERO, PRESCALED_ZERO };
template <class T, class E, bool HAS = T::Zeros::HAS>
constexpr ZeroTerm ZERO_TERM = NO_ZERO;
template <class T, class E>
constexpr ZeroTerm ZERO_TERM<T, E, true> =
    T::Zeros::FORM == wq::PRESCALED                                                        ? PRESCALED_ZERO
    : T::Zeros::BITS != 0 && (std::is_same<E, __half>::value || (T::Zeros::BITS == 4 && T::LAYOUT != K_BYTES))
        ? FOLDED_ZERO
        : SUBTRACTED_ZERO;
template <class T, class E>
constexpr bool FOLDS_ZERO = ZERO_TERM<T, E> == FOLDED_ZERO;

// The scale s and the zero term b of the rows g (lo) and g + 8 (hi) at k, in E pairs: folded zero points (see
// FOLDS_ZERO) b = -(magic + (8 or 128) + z) in both halves, 4-bit f16's high half -(64 + (8) + z) (the odd
// registers' 16 q + 1024, scaled by 1/16); other subtracted ones w = (q - b) s, b = z; prescaled ones w = q s + b,
// b = -z; none w = q s (b unused). Halves of s, and of b but where folded for 4-bit weights in f16, are the same.
template <class T, class E>
__device__ __forceinline__ void scale_and_offset(const QuantRaw<T>& r, typename T::index_t k, typename T::index_t n,
                                                 pair_t<E>& s_lo, pair_t<E>& b_lo, pair_t<E>& s_hi,
                                                 pair_t<E>& b_hi) {
  using Z = typename T::Zeros;
  constexpr bool F16 = std::is_same<E, __half>::value;
  constexpr bool BYTES = T::LAYOUT == K_BYTES;
  constexpr float MAGIC = (F16 ? 1024.0f : 128.0f) + (T::SIGNED ? (BYTES ? 128.0f : 8.0f) : 0.0f);
  float s[2], b[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    s[h] = to_float(r.s[h]);
    if constexpr (Z::HAS) {
      const float z = zero_value<Z>(r.z[h], k, n + 8 * h);
      b[h] = FOLDS_ZERO<T, E> ? -(MAGIC + z) : ZERO_TERM<T, E> == SUBTRACTED_ZERO ? z : -z;
    }
  }
  s_lo = Magic<E>::value(s[0]);
  s_hi = Magic<E>::value(s[1]);
  if constexpr (FOLDS_ZERO<T, E> && F16 && !BYTES) {
    b_lo = __floats2half2_rn(b[0], b[0] + 960.0f);  // -(1024 + (8) + z), -(64 + (8) + z)
    b_hi = __floats2half2_rn(b[1], b[1] + 960.0f);
  } else {
    b_lo = Magic<E>::value(b[0]);
    b_hi = Magic<E>::value(b[1]);
  }
}

// Fragment register i from its integers' pair q: q s; q s with folded zero points (q is q - z); (q - z) s with other
// subtracted ones (float z), so that the weight is rounded once, relative to itself (q s - z s, with z s rounded
// first, would carry an error of z s where q is near z); q s - z with prescaled ones. Rows g (even i) take (s_lo,
// b_lo), rows g + 8 (odd i) (s_hi, b_hi).
template <class T, class E>
__device__ __forceinline__ uint32_t weight_pair(const pair_t<E>& q, int i, const pair_t<E>& s_lo,
                                                const pair_t<E>& b_lo, const pair_t<E>& s_hi, const pair_t<E>& b_hi) {
  using P = pair_t<E>;
  P w;
  if constexpr (FOLDS_ZERO<T, E>) {
    w = __hmul2(q, (i & 1) ? s_hi : s_lo);  // q holds q - z already
  } else if constexpr (ZERO_TERM<T, E> == SUBTRACTED_ZERO) {
    w = __hmul2(__hsub2(q, (i & 1) ? b_hi : b_lo), (i & 1) ? s_hi : s_lo);
  } else if constexpr (ZERO_TERM<T, E> == PRESCALED_ZERO) {
    w = __hfma2(q, (i & 1) ? s_hi : s_lo, (i & 1) ? b_hi : b_lo);
  } else {
    w = __hmul2(q, (i & 1) ? s_hi : s_lo);
  }
  return *reinterpret_cast<uint32_t*>(&w);
}

// One word of four fragment registers' pairs (one 16-k tile) -> the four registers in E: rows g (registers 0 and 2)
// take (s_lo, b_lo), rows g + 8 (registers 1 and 3) (s_hi, b_hi). In f16 the odd registers' nibbles (1, 5 and 3, 7)
// are masked where they lie, four bits up: 1024 + 16 q reads, and (1024 + 16 q) / 16 - 64 = q is one exact fma; bf16
// has too few significant bits for 128 + 16 q, so each pair is shifted down.
template <class T, class E>
__device__ __forceinline__ void dequantize(uint32_t word, const pair_t<E>& s_lo, const pair_t<E>& b_lo,
                                           const pair_t<E>& s_hi, const pair_t<E>& b_hi, uint32_t (&a)[4]) {
  using P = pair_t<E>;
  constexpr bool F16 = std::is_same<E, __half>::value;
  if constexpr (T::SIGNED) word ^= 0x88888888u;  // q + 8 in every nibble
  constexpr float OFFSET = T::SIGNED ? 8.0f : 0.0f;
  const P low_bias = Magic<E>::value((F16 ? 1024.0f : 128.0f) + OFFSET);  // magic (+ 8): exact in E
  P q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (F16) {
      const uint32_t w = i < 2 ? word : word >> 8;
      if (i % 2 == 0) {
        const uint32_t x = and_or(w, 0x000F000Fu, Magic<E>::BITS);
        if constexpr (FOLDS_ZERO<T, E>) {
          q[i] = __hadd2(*reinterpret_cast<const P*>(&x), __low2half2(b_lo));
        } else {
          q[i] = Magic<E>::sub(x, low_bias);
        }
      } else {
        const uint32_t h = and_or(w, 0x00F000F0u, Magic<E>::BITS);
        q[i] = __hfma2(*reinterpret_cast<const P*>(&h), Magic<E>::value(1.0f / 16.0f),
                       FOLDS_ZERO<T, E> ? __high2half2(b_hi) : Magic<E>::value(-64.0f - OFFSET));
      }
    } else {
      const uint32_t x = and_or(word >> (4 * i), 0x000F000Fu, Magic<E>::BITS);
      if constexpr (FOLDS_ZERO<T, E>) {
        q[i] = __hadd2(*reinterpret_cast<const P*>(&x), i % 2 == 0 ? b_lo : b_hi);
      } else {
        q[i] = Magic<E>::sub(x, low_bias);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = weight_pair<T, E>(q[i], i, s_lo, b_lo, s_hi, b_hi);
}


// A lane's words of one 64-k chunk of a strip: its 16 bytes of a dg chunk; or w[h][j], the word of k = 16 t + 8 j ..
// 16 t + 8 j + 7 of the column of row g + 8 h.
template <int LAYOUT>
struct ChunkWords;
template <>
struct ChunkWords<DG_WORDS> {
  uint4 w;
};
template <>
struct ChunkWords<K_WORDS> {
  uint32_t w[2][2];
};
template <>
struct ChunkWords<K_BYTES> {  // w[h]: k 16 t .. 16 t + 15 of the column of row g + 8 h
  uint4 w[2];
};

// A 16-k tile's four fragment registers from k-packed words: w[h] is the lane's word of the tile's k (16 t + 8 (kt / 2)
// ..) of the column of row g + 8 h. Register i takes row g + 8 (i % 2) at the lane's k 4 kt + 2 (i / 2) + (0, 1):
// byte byte0 + i / 2 of w[i % 2], byte0 = 2 (kt % 2). One byte permute puts it in bytes 0 and 2; its low nibble (the
// even k) is masked in the low half, its high nibble in the high half four bits up. f16: 1024 + q and 1024 + 16 q,
// both exact, then one fma by (1, 1/16) and (-1024, -64) (- 8 each for int4); bf16 shifts the high nibble down first.
template <class T, class E>
__device__ __forceinline__ void dequantize_words(const uint32_t (&w)[2], int byte0, const pair_t<E>& s_lo,
                                                 const pair_t<E>& b_lo, const pair_t<E>& s_hi, const pair_t<E>& b_hi,
                                                 uint32_t (&a)[4]) {
  using P = pair_t<E>;
  constexpr bool F16 = std::is_same<E, __half>::value;
  constexpr float OFFSET = T::SIGNED ? 8.0f : 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t word = w[i % 2];
    if constexpr (T::SIGNED) word ^= 0x88888888u;  // q + 8 in every nibble
    const uint32_t byte = uint32_t(byte0 + i / 2);
    const uint32_t r = __byte_perm(word, 0u, byte | 0x4000u | (byte << 8) | 0x40u);  // bytes b, 0, b, 0
    P q;
    if constexpr (F16) {
      const uint32_t h = and_or(r, 0x00F0000Fu, Magic<E>::BITS);
      q = __hfma2(*reinterpret_cast<const P*>(&h), __halves2half2(__float2half(1.0f), __float2half(1.0f / 16.0f)),
                  FOLDS_ZERO<T, E> ? (i % 2 == 0 ? b_lo : b_hi)
                                     : __halves2half2(__float2half(-1024.0f - OFFSET), __float2half(-64.0f - OFFSET)));
    } else {
      const uint32_t h = and_or(r, 0x0000000Fu, Magic<E>::BITS) | ((r >> 4) & 0x000F0000u);
      if constexpr (FOLDS_ZERO<T, E>) {
        q = __hadd2(*reinterpret_cast<const P*>(&h), i % 2 == 0 ? b_lo : b_hi);
      } else {
        q = Magic<E>::sub(h, Magic<E>::value(128.0f + OFFSET));
      }
    }
    a[i] = weight_pair<T, E>(q, i, s_lo, b_lo, s_hi, b_hi);
  }
}

// Tile kt's four fragment registers from 8-bit weights: w[h] is word kt of the lane's 16 bytes of the column of row
// g + 8 h. Register i takes row g + 8 (i % 2) at the lane's k 16 t + 4 kt + 2 (i / 2) + (0, 1): bytes 2 (i / 2) and
// + 1 of w[i % 2], the lower k in the low half.
template <class T, class E>
__device__ __forceinline__ void dequantize_bytes(const uint32_t (&w)[2], const pair_t<E>& s_lo, const pair_t<E>& b_lo,
                                                 const pair_t<E>& s_hi, const pair_t<E>& b_hi, uint32_t (&a)[4]) {
  using P = pair_t<E>;
  constexpr bool F16 = std::is_same<E, __half>::value;
  constexpr float OFFSET = T::SIGNED ? 128.0f : 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t word = w[i % 2];
    if constexpr (T::SIGNED) word ^= 0x80808080u;  // q + 128 in every byte
    P q;
    if constexpr (F16) {
      // Bytes (b, 0x64, b + 1, 0x64): 1024 + q in each half.
      const uint32_t x = __byte_perm(word, 0x64u, i / 2 ? 0x4342u : 0x4140u);
      q = __hadd2(*reinterpret_cast<const P*>(&x),
                  FOLDS_ZERO<T, E> ? (i % 2 ? b_hi : b_lo) : Magic<E>::value(-1024.0f - OFFSET));
    } else {
      // Bytes (b, 0, 0, 0x4B): 2^23 + q exactly in f32.
      const float lo = __uint_as_float(__byte_perm(word, 0x4Bu, i / 2 ? 0x4552u : 0x4550u)) - (8388608.0f + OFFSET);
      const float hi = __uint_as_float(__byte_perm(word, 0x4Bu, i / 2 ? 0x4553u : 0x4551u)) - (8388608.0f + OFFSET);
      q = __floats2bfloat162_rn(lo, hi);
    }
    a[i] = weight_pair<T, E>(q, i, s_lo, b_lo, s_hi, b_hi);
  }
}

// The activations of row m at k0 .. k0 + 2 PAIRS - 1 (k0 a multiple of 4), r[q] = (k0 + 2q, k0 + 2q + 1); zero past
// M and K. 16-byte loads (A_VEC16, k0 a multiple of 8) or 8-byte ones (PAIRS = 2), else pairs, else elements.
template <class T, int PAIRS>
__device__ __forceinline__ void activation_run(const typename T::A_t* __restrict__ A, typename T::index_t m,
                                               typename T::index_t k0, typename T::index_t M, uint32_t (&r)[PAIRS]) {
  using Av = typename T::A_view;
  using E = typename T::A_t;
#pragma unroll
  for (int q = 0; q < PAIRS; ++q) r[q] = 0u;
  if (m >= M) return;
  const E* row = A + Av::m::offset(m);
  if (k0 + 2 * PAIRS <= T::K) {
    if constexpr (T::A_PAIRS && T::A_VEC16 && PAIRS % 4 == 0) {
#pragma unroll
      for (int v = 0; v < PAIRS / 4; ++v) {
        const uint4 x = __ldg(reinterpret_cast<const uint4*>(row + Av::k::offset(k0 + 8 * v)));
        r[4 * v] = x.x;
        r[4 * v + 1] = x.y;
        r[4 * v + 2] = x.z;
        r[4 * v + 3] = x.w;
      }
      return;
    } else if constexpr (T::A_PAIRS && T::A_VEC16 && PAIRS == 2) {
      const uint2 x = __ldg(reinterpret_cast<const uint2*>(row + Av::k::offset(k0)));
      r[0] = x.x;
      r[1] = x.y;
      return;
    } else if constexpr (T::A_PAIRS) {
#pragma unroll
      for (int q = 0; q < PAIRS; ++q) r[q] = __ldg(reinterpret_cast<const unsigned*>(row + Av::k::offset(k0 + 2 * q)));
      return;
    }
  }
#pragma unroll
  for (int q = 0; q < PAIRS; ++q) {
    unsigned short h[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const typename T::index_t k = k0 + 2 * q + e;
      if (k < T::K) h[e] = __ldg(reinterpret_cast<const unsigned short*>(row + Av::k::offset(k)));
    }
    r[q] = uint32_t(h[0]) | (uint32_t(h[1]) << 16);
  }
}

// A row's activation fragments of tiles KT0 .. KT0 + TILES - 1 of a chunk: b[kt][0], b[kt][1] (the mma's b0, b1: slots
// (2t, 2t + 1) at k 16 t + 4 kt + (0, 1), (2t + 8, 2t + 9) at + (2, 3)), one run of the lane's k.
template <class T, int TILES>
__device__ __forceinline__ void activation_fragments(const typename T::A_t* __restrict__ A, typename T::index_t m,
                                                     typename T::index_t chunk, int kt0, typename T::index_t M, int t,
                                                     uint32_t (&b)[TILES][2]) {
  uint32_t r[2 * TILES];
  activation_run<T, 2 * TILES>(A, m, chunk * 64 + 16 * t + 4 * kt0, M, r);
#pragma unroll
  for (int kt = 0; kt < TILES; ++kt) {
    b[kt][0] = r[2 * kt];
    b[kt][1] = r[2 * kt + 1];
  }
}

// 16 bytes from global memory that will not be read again: no L1 allocation.
__device__ __forceinline__ uint4 load_stream(const uint32_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Word j of four.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// The 16 bytes of k .. k + 15 of column n of 8-bit weights (k a multiple of 16, each column's first byte 16-byte
// aligned: one load), zero past K (byte loads up to K where the run crosses it).
template <class T>
__device__ __forceinline__ uint4 byte_run(const typename T::B_t* __restrict__ B, typename T::index_t k,
                                          typename T::index_t n) {
  const typename T::B_t* p = B + (T::Weights::k::offset(k) + T::Weights::n::offset(n));
  if (k + 16 <= T::K) return load_stream(reinterpret_cast<const uint32_t*>(p));
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int j = 0; j < 16; ++j)
    if (k + j < T::K) w[j / 4] |= uint32_t(static_cast<uint8_t>(__ldg(p + j))) << (8 * (j % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Block b owns strips b NS .. b NS + NS - 1; warp w of the block its chunks w, w + WK, ...
template <class T>
__global__ void __launch_bounds__(T::WK * 32, T::MIN_BLOCKS)
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C,
           typename T::index_t M_arg, typename T::Epilogue ep, Quant<T> quant, float alpha, float beta) {
  using index_t = typename T::index_t;
  using E = typename T::A_t;
  using P = pair_t<E>;
  static_assert(!T::has_batch, "the family takes no batch of weight matrices");
  (void)T::c_along_m;  // stores go element by element from the fragments, whatever C's contiguous role
  static_assert(T::K_CHUNKS >= 1 && (T::GROUP_K % 16 == 0 || T::GROUP_K >= T::K), "a scale covers whole 16-k tiles");
  const index_t M = T::rows_at_run_time ? M_arg : T::M;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int g = lane / 4, t = lane % 4;
  const index_t strip0 = index_t(blockIdx.x) * T::NS;

  float acc[T::NS][T::MT][4];
#pragma unroll
  for (int s = 0; s < T::NS; ++s)
#pragma unroll
    for (int i = 0; i < T::MT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[s][i][j] = 0.0f;

  // This warp's chunks of strip s: c = warp + WK i. DG_WORDS: the lane's 16 bytes of chunk c at word (strip
  // K_CHUNKS + c) 128 + 4 lane; a strip past the last (the grid's last block) reads its first strip again and stores
  // nothing. K_WORDS: the words of k = 64 c + 8 j (j = 0..7) of columns g and g + 8 of the strip, zero past K or N.
  // K_BYTES: the bytes of k = 64 c + 16 t .. + 15 of those columns, zero past K or N.
  const typename T::B_t* base[T::NS] = {};  // DG_WORDS only: the lane's words of strip s's chunk 0
  if constexpr (T::LAYOUT == DG_WORDS) {
#pragma unroll
    for (int s = 0; s < T::NS; ++s) {
      const index_t strip = strip0 + s < index_t(T::STRIPS) ? strip0 + s : index_t(0);
      base[s] = B + (strip * index_t(T::K_CHUNKS)) * 128 + 4 * lane;
    }
  }
  constexpr int CHUNKS = T::K_CHUNKS;
  const int mine = warp < CHUNKS ? (CHUNKS - 1 - warp) / T::WK + 1 : 0;  // chunks of this warp a strip

  // A ring of DEPTH chunks a strip in flight: the lane's words and its scales and zero points of the chunk (QPC a
  // chunk: none where one a column covers all of K, loaded once; else one, the lane's k of a chunk being one 16-k
  // tile), at k quant_k(chunk).
  constexpr int QPC = T::QPC;
  static_assert(QPC == 0 || QPC == 1, "scale loads a chunk: none, or one (the lane's 16 k)");
  auto quant_k = [&](index_t chunk) { return chunk * 64 + 16 * t; };
  struct Slot {
    ChunkWords<T::LAYOUT> b[T::NS];
    QuantRaw<T> q[T::NS];
  };
  auto fill = [&](Slot& slot, index_t chunk) {
#pragma unroll
    for (int s = 0; s < T::NS; ++s) {
      if constexpr (T::LAYOUT == DG_WORDS) {
        slot.b[s].w = load_stream(base[s] + chunk * 128);
      } else if constexpr (T::LAYOUT == K_BYTES) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const index_t k = chunk * 64 + 16 * t, n = (strip0 + s) * 16 + g + 8 * h;
          slot.b[s].w[h] = n < T::N ? byte_run<T>(B, k, n) : make_uint4(0u, 0u, 0u, 0u);
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const index_t k = chunk * 64 + 16 * t + 8 * j, n = (strip0 + s) * 16 + g + 8 * h;
            slot.b[s].w[h][j] = k < T::K && n < T::N
                                   ? __ldg(B + (T::Weights::k::offset(k) + T::Weights::n::offset(n))) : 0u;
          }
      }
      if constexpr (QPC == 1) slot.q[s] = load_quant<T>(quant, quant_k(chunk), (strip0 + s) * 16 + g);
    }
  };
  Slot ring[T::DEPTH];
#pragma unroll
  for (int d = 0; d < T::DEPTH; ++d)
    if (d < mine) fill(ring[d], index_t(warp + T::WK * d));

  P s_lo[T::NS], b_lo[T::NS], s_hi[T::NS], b_hi[T::NS];
  if constexpr (QPC == 0) {  // one scale a column: read once
#pragma unroll
    for (int s = 0; s < T::NS; ++s) {
      const index_t n = (strip0 + s) * 16 + g;
      scale_and_offset<T, E>(load_quant<T>(quant, 0, n), 0, n, s_lo[s], b_lo[s], s_hi[s], b_hi[s]);
    }
  }

  for (int i0 = 0; i0 < mine; i0 += T::DEPTH) {
#pragma unroll
    for (int d = 0; d < T::DEPTH; ++d) {
      const int i = i0 + d;
      if (i >= mine) break;
      const index_t chunk = index_t(warp + T::WK * i);
      const Slot cur = ring[d];
      if (i + T::DEPTH < mine) fill(ring[d], chunk + T::WK * T::DEPTH);
      // The activations' fragments (through L1: every warp reads the same rows): the lane's 16 k of the chunk at
      // once for up to two row tiles, else a k tile's 4 at a time (their registers beside the sums).
      constexpr int HOIST = T::MT <= 2 ? 4 : 1;
      uint32_t act[T::MT][HOIST][2];
#pragma unroll
      for (int mt = 0; mt < T::MT; ++mt)
        activation_fragments<T, HOIST>(A, index_t(mt * 8 + g), chunk, 0, M, t, act[mt]);
      if constexpr (QPC == 1) {
#pragma unroll
        for (int s = 0; s < T::NS; ++s)
          scale_and_offset<T, E>(cur.q[s], quant_k(chunk), (strip0 + s) * 16 + g, s_lo[s], b_lo[s], s_hi[s],
                                 b_hi[s]);
      }
#pragma unroll
      for (int kt = 0; kt < 4; ++kt) {
        if constexpr (HOIST == 1) {
          if (kt > 0) {
#pragma unroll
            for (int mt = 0; mt < T::MT; ++mt)
              activation_fragments<T, 1>(A, index_t(mt * 8 + g), chunk, kt, M, t, act[mt]);
          }
        }
#pragma unroll
        for (int s = 0; s < T::NS; ++s) {
          uint32_t a[4];
          if constexpr (T::LAYOUT == DG_WORDS) {
            dequantize<T, E>(word_of(cur.b[s].w, kt), s_lo[s], b_lo[s], s_hi[s], b_hi[s], a);
          } else if constexpr (T::LAYOUT == K_BYTES) {
            const uint32_t words[2] = {word_of(cur.b[s].w[0], kt), word_of(cur.b[s].w[1], kt)};
            dequantize_bytes<T, E>(words, s_lo[s], b_lo[s], s_hi[s], b_hi[s], a);
          } else {
            const auto& w = cur.b[s].w;
            const uint32_t words[2] = {w[0][kt / 2], w[1][kt / 2]};
            dequantize_words<T, E>(words, 2 * (kt % 2), s_lo[s], b_lo[s], s_hi[s], b_hi[s], a);
          }
#pragma unroll
          for (int mt = 0; mt < T::MT; ++mt)
            mma_m16n8k16<E>(acc[s][mt], a, act[mt][HOIST == 4 ? kt : 0][0], act[mt][HOIST == 4 ? kt : 0][1]);
        }
      }
    }
  }

  // Warps 1 .. WK-1 park their sums; warp 0 adds them in warp order and stores.
  constexpr int SUMS = T::NS * T::MT * 4;
  __shared__ float parked[T::WK > 1 ? T::WK - 1 : 1][SUMS][32];
  if (warp > 0) {
#pragma unroll
    for (int s = 0; s < T::NS; ++s)
#pragma unroll
      for (int mt = 0; mt < T::MT; ++mt)
#pragma unroll
        for (int j = 0; j < 4; ++j) parked[warp - 1][(s * T::MT + mt) * 4 + j][lane] = acc[s][mt][j];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int s = 0; s < T::NS; ++s) {
#pragma unroll
    for (int mt = 0; mt < T::MT; ++mt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v = acc[s][mt][j];
        for (int w = 1; w < T::WK; ++w) v += parked[w - 1][(s * T::MT + mt) * 4 + j][lane];
        // C^T tile: row n = g (+ 8 for j >= 2), column m = 2 t (+ 1 for odd j).
        const index_t n = (strip0 + s) * 16 + g + 8 * (j / 2), m = index_t(mt * 8 + 2 * t + (j % 2));
        T::store(C, m, n, v, alpha, beta, M, ep);
      }
    }
  }
}

// One grid of BLOCKS blocks of WK warps.
template <class T>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C,
                   typename T::index_t M,
                   typename T::Epilogue ep, Quant<T> quant, float alpha, float beta, cudaStream_t stream) {
  const LaunchShape shape{unsigned(T::BLOCKS), unsigned(T::WK * 32), 0u, false, 1};
  return dg::launch(kernel<T>, shape, stream, A, B, C, M, ep, quant, alpha, beta);
}

}  // namespace wqtc
}  // namespace dg
