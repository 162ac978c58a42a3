// dg/cpu_gemm.hpp — the CPU engine: a BLIS-style GEMM over strided views (TBLIS-style scatter tables).
//
// Every operand is packed, whatever its strides, into contiguous f32 micro-panels (kMR rows of A, kNR columns of B);
// a register-blocked micro-kernel multiplies them; cache blocks KC, MC, NC come from the host's cache sizes.
// Each output goes once, with its whole sum over k, through Traits::finish_run: a run of consecutive outputs, or
// one output alone.
#pragma once

#include "cpu_types.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>
#include <utility>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dg::cpu {

// ---------------------------------------------------------------------------------------------------------------
// The contract with the generated code.

constexpr int kMaxSegs = 8;
// The per-operand slots, in the C API's order.
enum Slot : int { kA = 0, kB = 1, kC = 2, kD = 3, kBias = 4, kScale = 5, kResidual = 6, kSlots = 7 };
// A run of letters of one role that address memory as one (size, stride) pair; stride[s] is the element stride
// of one step in slot s (0 in a slot that lacks the role or is broadcast over it). Strides are >= 0.
struct Seg {
  int64_t size;
  int64_t stride[kSlots];
};
// A role's segments, outer -> inner. nseg == 0: the role is absent (size 1, every offset 0).
struct Role {
  int nseg;
  Seg seg[kMaxSegs];
};
// The problem: roles batch (in A, B, C), m (A and C), n (B and C), k (summed: A and B); each slot's element offset.
struct Shape {
  Role batch, m, n, k;
  int64_t offset[kSlots];
};
// What one call passes: each slot's BASE pointer (nullptr where absent; the engine adds Shape::offset), the
// run-time extent of the m role, the scalars and the thread count (<= 0: OpenMP's default).
struct Args {
  const void* ptr[kSlots];
  int64_t m_extent;
  float alpha;
  float beta;
  int threads;
};
// The longest run Traits::finish_run is handed: count <= kRun consecutive outputs, output q at start[s] + q in
// each out slot s, their sums sums[0..count).
constexpr int64_t kRun = 64;

// ---------------------------------------------------------------------------------------------------------------
// The vector layer: Vec holds kW floats; the micro-kernel's tile is kMR x kNR (kNR a multiple of kW).

#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
constexpr int kW = 16;
constexpr int kMR = 14;  // 28 zmm accumulators, 2 for B; A is broadcast from memory inside the FMA
constexpr int kNR = 32;
struct Vec {
  __m512 v;
};
inline Vec vzero() { return {_mm512_setzero_ps()}; }
inline Vec vbroadcast(float x) { return {_mm512_set1_ps(x)}; }
inline Vec vload(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void vstore(float* p, Vec a) { _mm512_storeu_ps(p, a.v); }
inline Vec vfma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline float vsum(Vec a) {  // through memory: GCC 12 warns on the shuffle intrinsics' undefined pass-through operand
  alignas(64) float lanes[kW];
  _mm512_store_ps(lanes, a.v);
  const __m256 oct = _mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8));
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(oct), _mm256_extractf128_ps(oct, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}
inline Vec vload_f32(const float* p) { return vload(p); }
// The maskz forms with a full mask: the plain forms pass GCC 12 an undefined operand that -Wmaybe-uninitialized
// reports.
constexpr __mmask16 kAllLanes = 0xffff;
inline Vec vload_f32(const f16* p) {
  return {_mm512_maskz_cvtph_ps(kAllLanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
inline Vec vload_f32(const bf16* p) {
  const __m512i wide =
      _mm512_maskz_cvtepu16_epi32(kAllLanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAllLanes, wide, 16))};
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2";
constexpr int kW = 8;
constexpr int kMR = 6;  // 12 ymm accumulators, 2 for B, 1 broadcast of A
constexpr int kNR = 16;
struct Vec {
  __m256 v;
};
inline Vec vzero() { return {_mm256_setzero_ps()}; }
inline Vec vbroadcast(float x) { return {_mm256_set1_ps(x)}; }
inline Vec vload(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void vstore(float* p, Vec a) { _mm256_storeu_ps(p, a.v); }
inline Vec vfma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline float vsum(Vec a) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}
inline Vec vload_f32(const float* p) { return vload(p); }
inline Vec vload_f32(const f16* p) {
#if defined(__F16C__)
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
#else
  alignas(32) float x[kW];
  for (int i = 0; i < kW; ++i) x[i] = to_float(p[i]);
  return vload(x);
#endif
}
inline Vec vload_f32(const bf16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))};
}
#else
constexpr const char* kIsa = "portable";
constexpr int kW = 8;
constexpr int kMR = 4;
constexpr int kNR = 8;
// Plain arrays with fixed trip counts: the compiler maps them onto whatever vector registers the target has.
struct Vec {
  float v[kW];
};
inline Vec vzero() { return Vec{}; }
inline Vec vbroadcast(float x) {
  Vec r;
  for (int i = 0; i < kW; ++i) r.v[i] = x;
  return r;
}
inline Vec vload(const float* p) {
  Vec r;
  for (int i = 0; i < kW; ++i) r.v[i] = p[i];
  return r;
}
inline void vstore(float* p, const Vec& a) {
  for (int i = 0; i < kW; ++i) p[i] = a.v[i];
}
inline Vec vfma(const Vec& a, const Vec& b, const Vec& c) {
  Vec r;
  for (int i = 0; i < kW; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
  return r;
}
inline float vsum(const Vec& a) {
  float s = 0.0f;
  for (int i = 0; i < kW; ++i) s += a.v[i];
  return s;
}
template <class T>
inline Vec vload_f32(const T* p) {
  Vec r;
  for (int i = 0; i < kW; ++i) r.v[i] = to_float(p[i]);
  return r;
}
#endif

static_assert(kNR % kW == 0, "a B micro-panel row is whole vectors");

// ---------------------------------------------------------------------------------------------------------------
// Cache blocking (Low et al. 2016, "Analytical modeling is enough for high-performance BLIS").

struct CacheSizes {
  int64_t l1d, l2, l3;  // bytes
};

// The host's data cache sizes, read once; 32 KiB / 1 MiB / 8 MiB where the system does not say.
inline const CacheSizes& host_caches() {
  static const CacheSizes sizes = [] {
    const auto read = [](int name, int64_t fallback) {
      const long v = sysconf(name);
      return v > 0 ? int64_t(v) : fallback;
    };
    return CacheSizes{read(_SC_LEVEL1_DCACHE_SIZE, int64_t(32) << 10), read(_SC_LEVEL2_CACHE_SIZE, int64_t(1) << 20),
                      read(_SC_LEVEL3_CACHE_SIZE, int64_t(8) << 20)};
  }();
  return sizes;
}

struct Blocking {
  int64_t kc, mc, nc;  // mc a multiple of kMR, nc a multiple of kNR
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The cache blocks for an m x n x k problem. From the caches: the B micro-panel KC x kNR fills half of L1, the A
// block MC x KC half of L2, the B panel KC x NC half of L3 (one panel, shared by all threads). A nonzero pin
// replaces the model's value. Then each block is balanced over its extent (equal blocks, no sliver at the end).
inline Blocking blocking_for(int64_t m, int64_t n, int64_t k, int64_t kc_pin = 0, int64_t mc_pin = 0,
                             int64_t nc_pin = 0) {
  const CacheSizes& cache = host_caches();
  const int64_t f = int64_t(sizeof(float));
  int64_t kc = kc_pin > 0 ? kc_pin : std::max<int64_t>(16, (cache.l1d / 2) / (kNR * f) / 8 * 8);
  int64_t mc = mc_pin > 0 ? round_up(mc_pin, kMR) : std::max<int64_t>(kMR, (cache.l2 / 2) / (kc * f) / kMR * kMR);
  int64_t nc = nc_pin > 0 ? round_up(nc_pin, kNR) : std::max<int64_t>(kNR, (cache.l3 / 2) / (kc * f) / kNR * kNR);
  k = std::max<int64_t>(k, 1);
  kc = ceil_div(k, ceil_div(k, kc));
  mc = std::min(mc, round_up(std::max<int64_t>(m, 1), kMR));
  nc = round_up(ceil_div(std::max<int64_t>(n, 1), ceil_div(std::max<int64_t>(n, 1), nc)), kNR);
  return {kc, mc, nc};
}

// ---------------------------------------------------------------------------------------------------------------
// Scatter tables: the element offset of each index of a role, in one slot.

inline int64_t role_size(const Role& role) {
  int64_t size = 1;
  for (int s = 0; s < role.nseg; ++s) size *= role.seg[s].size;
  return size;
}

// out[i] for i < extent: i in mixed radix over the role's segments (innermost fastest), each digit times its
// segment's stride in `slot`. The outermost digit is not bounded by its segment's size.
inline void role_offsets(const Role& role, int slot, int64_t extent, int64_t* out) {
  if (role.nseg == 0) {
    std::fill(out, out + extent, int64_t(0));
    return;
  }
  int64_t digit[kMaxSegs] = {};
  int64_t offset = 0;
  for (int64_t i = 0; i < extent; ++i) {
    out[i] = offset;
    int s = role.nseg - 1;
    offset += role.seg[s].stride[slot];
    ++digit[s];
    while (s > 0 && digit[s] == role.seg[s].size) {
      offset -= digit[s] * role.seg[s].stride[slot];
      digit[s] = 0;
      --s;
      offset += role.seg[s].stride[slot];
      ++digit[s];
    }
  }
}

// Whether t[0..n) steps by one element: the n elements are contiguous in memory.
inline bool is_contiguous(const int64_t* t, int64_t n) {
  for (int64_t i = 1; i < n; ++i)
    if (t[i] != t[0] + i) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Scratch memory and threads.

// A 64-byte aligned buffer owned by the calling thread and kept between calls (repeated calls reuse its pages).
inline float* scratch(size_t floats) {
  struct Buffer {
    float* data = nullptr;
    size_t capacity = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (floats > buffer.capacity) {
    std::free(buffer.data);
    buffer.data = static_cast<float*>(std::aligned_alloc(64, size_t(round_up(int64_t(floats * sizeof(float)), 64))));
    if (buffer.data == nullptr) {
      buffer.capacity = 0;
      throw std::bad_alloc();
    }
    buffer.capacity = floats;
  }
  return buffer.data;
}

inline int resolve_threads(int threads) {
#if defined(_OPENMP)
  return threads > 0 ? threads : omp_get_max_threads();
#else
  (void)threads;
  return 1;
#endif
}

// Runs body(thread id, team size) on `threads` threads (the team OpenMP grants may be smaller).
template <class Body>
void run_team(int threads, const Body& body) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    body(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  (void)threads;
  body(0, 1);
}

// A barrier of the enclosing run_team when the team has more than one thread.
inline void team_barrier(int team) {
#if defined(_OPENMP)
  if (team > 1) {
#pragma omp barrier
  }
#else
  (void)team;
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Packing: any strides in, contiguous f32 micro-panels out.

template <class T>
inline void convert_span(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) vstore(dst + i, vload_f32(src + i));
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}
inline void convert_span(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, size_t(n) * sizeof(float)); }

// One micro-panel of `width` (kMR or kNR) lines over kc steps of k: dst[k * width + l] = src[line[l] + step[k]] for
// l < lines, 0 for lines <= l < width. line / step are the scatter tables of the panel's lines and of k.
template <int width, class T>
void pack_panel(float* dst, const T* src, const int64_t* line, int lines, const int64_t* step, int64_t kc) {
  if (lines == width && is_contiguous(line, width)) {  // the lines are contiguous: one vector copy per k
    for (int64_t k = 0; k < kc; ++k) convert_span(src + line[0] + step[k], dst + k * width, width);
    return;
  }
  if (lines < width)
    for (int64_t k = 0; k < kc; ++k) std::fill(dst + k * width + lines, dst + (k + 1) * width, 0.0f);
  if (is_contiguous(step, kc)) {  // each line is contiguous along k: read it sequentially
    for (int l = 0; l < lines; ++l) {
      const T* s = src + line[l] + step[0];
      for (int64_t k = 0; k < kc; ++k) dst[k * width + l] = to_float(s[k]);
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int l = 0; l < lines; ++l) dst[k * width + l] = to_float(src[line[l] + step[k]]);
}

// ---------------------------------------------------------------------------------------------------------------
// The micro-kernel: tile[r * kNR + c] (+)= sum_k a[k * kMR + r] * b[k * kNR + c] over kc steps; with `accumulate`
// the tile's previous contents are added.

inline void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b, float* __restrict tile,
                         bool accumulate) {
  constexpr int nv = kNR / kW;
  Vec acc[kMR][nv];
#pragma GCC unroll 16
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) acc[r][v] = accumulate ? vload(tile + r * kNR + v * kW) : vzero();
  for (int64_t k = 0; k < kc; ++k) {
    Vec bv[nv];
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) bv[v] = vload(b + v * kW);
#pragma GCC unroll 16
    for (int r = 0; r < kMR; ++r) {
      const Vec ar = vbroadcast(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) acc[r][v] = vfma(ar, bv[v], acc[r][v]);
    }
    a += kMR;
    b += kNR;
  }
#pragma GCC unroll 16
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) vstore(tile + r * kNR + v * kW, acc[r][v]);
}

// ---------------------------------------------------------------------------------------------------------------
// One call's problem: the extents and the scatter tables of each role in each slot that uses it.

struct Tables {
  int64_t batch, m, n, k;  // extents
  const int64_t* batch_at[kSlots] = {};
  const int64_t* m_at[kSlots] = {};
  const int64_t* n_at[kSlots] = {};
  const int64_t* k_at[kSlots] = {};
};

// The same products with the roles of m and n exchanged: C^T = B^T A^T. Slot kA then holds B's tables (the rows
// of the product), slot kB A's; an out slot's offsets are the same sums, so `finish_run` sees the same addresses.
inline Tables transposed(const Tables& t) {
  Tables r = t;
  std::swap(r.m, r.n);
  for (int s = 0; s < kSlots; ++s) std::swap(r.m_at[s], r.n_at[s]);
  r.m_at[kA] = t.n_at[kB];
  r.n_at[kB] = t.m_at[kA];
  r.m_at[kB] = r.n_at[kA] = nullptr;
  std::swap(r.k_at[kA], r.k_at[kB]);
  std::swap(r.batch_at[kA], r.batch_at[kB]);
  return r;
}

struct Problem : Tables {
  int64_t* storage = nullptr;  // owns the tables

  Problem(const Shape& shape, int64_t m_extent, unsigned out_slots)
      : Tables{role_size(shape.batch), m_extent, role_size(shape.n), role_size(shape.k)} {
    const unsigned operand_slots = (1u << kA) | (1u << kB);
    const unsigned batch_slots = operand_slots | out_slots, m_slots = (1u << kA) | out_slots;
    const unsigned n_slots = (1u << kB) | out_slots, k_slots = operand_slots;
    int64_t total = 0;
    for (int s = 0; s < kSlots; ++s)
      total += ((batch_slots >> s) & 1) * batch + ((m_slots >> s) & 1) * m + ((n_slots >> s) & 1) * n +
               ((k_slots >> s) & 1) * k;
    storage = new int64_t[size_t(std::max<int64_t>(total, 1))];
    int64_t* next = storage;
    const auto build = [&](const Role& role, unsigned slots, int64_t extent, const int64_t** at) {
      for (int s = 0; s < kSlots; ++s) {
        if (!((slots >> s) & 1)) continue;
        role_offsets(role, s, extent, next);
        at[s] = next;
        next += extent;
      }
    };
    build(shape.batch, batch_slots, batch, batch_at);
    build(shape.m, m_slots, m, m_at);
    build(shape.n, n_slots, n, n_at);
    build(shape.k, k_slots, k, k_at);
  }
  ~Problem() { delete[] storage; }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
};

// The slot whose layout decides the order in which outputs are finished and whether the product is transposed: the
// traits' kLeadSlot, the output (D where there is one: C is an out slot too, read for beta, but not what is stored).
template <class Traits>
constexpr int first_out_slot() {
  constexpr unsigned out = Traits::kOutSlots;
  static_assert(out != 0 && (out & ((1u << kC) | (1u << kD) | (1u << kBias) | (1u << kScale) | (1u << kResidual))) == out,
                "kOutSlots names out slots, at least one");
  static_assert((out >> Traits::kLeadSlot) & 1u, "kLeadSlot is one of kOutSlots");
  return Traits::kLeadSlot;
}

// Finishes the rows x cols block of outputs at (m index i0, n index j0) of batch index b, whose sums are
// sums[r * ld + c]. The block is walked in lines along m when the lead slot steps by one element along m and
// not along n, else along n, so that consecutive stores are adjacent. Where every out slot steps by one element
// along the line, runs of a line go to Traits::finish_run (vector code; `stream`: non-temporal f32 stores), the
// other outputs to it one at a time (a run of one at their own offsets).
template <class Traits>
void finish_block(const Args& args, const Shape& shape, const Tables& p, int64_t b, int64_t i0, int64_t rows,
                  int64_t j0, int64_t cols, const float* sums, int64_t ld, bool stream = false) {
  constexpr unsigned out = Traits::kOutSlots;
  constexpr int first = first_out_slot<Traits>();
  const bool along_m = rows > 1 && is_contiguous(p.m_at[first] + i0, rows) && !is_contiguous(p.n_at[first] + j0, cols);
  const int64_t* const* line_at = along_m ? p.n_at : p.m_at;  // which line
  const int64_t* const* step_at = along_m ? p.m_at : p.n_at;  // where along it
  const int64_t line0 = along_m ? j0 : i0, step0 = along_m ? i0 : j0;
  const int64_t lines = along_m ? cols : rows, steps = along_m ? rows : cols;
  const int64_t line_stride = along_m ? 1 : ld, step_stride = along_m ? ld : 1;
  int64_t base[kSlots] = {};
  bool unit_steps = true;
  for (int s = kC; s < kSlots; ++s)
    if ((out >> s) & 1) {
      base[s] = shape.offset[s] + p.batch_at[s][b];
      unit_steps = unit_steps && is_contiguous(step_at[s] + step0, steps);
    }
  int64_t at[kSlots] = {};
  int64_t start[kSlots] = {};
  for (int64_t l = 0; l < lines; ++l) {
    const float* line_sums = sums + l * line_stride;
    if (unit_steps) {
      for (int64_t q0 = 0; q0 < steps; q0 += kRun) {
        const int64_t run = std::min(kRun, steps - q0);
        float run_sums[kRun];
        for (int64_t q = 0; q < run; ++q) run_sums[q] = line_sums[(q0 + q) * step_stride];
        for (int s = kC; s < kSlots; ++s)
          if ((out >> s) & 1) start[s] = base[s] + line_at[s][line0 + l] + step_at[s][step0 + q0];
        Traits::finish_run(args, run_sums, run, start, stream);
      }
      continue;
    }
    for (int s = kC; s < kSlots; ++s)
      if ((out >> s) & 1) start[s] = base[s] + line_at[s][line0 + l];
    for (int64_t q = 0; q < steps; ++q) {
      for (int s = kC; s < kSlots; ++s)
        if ((out >> s) & 1) at[s] = start[s] + step_at[s][step0 + q];
      Traits::finish_run(args, &line_sums[q * step_stride], 1, at, false);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The blocked GEMM of one batch index, run by a team of `team` threads (this one is `tid`).
//
// Loops jc (NC) -> pc (KC) -> ic (MC) -> jr (kNR) -> ir (kMR). The team packs each KC x NC panel of B together
// (one copy, shared after a barrier); then either the team splits the rows of A (each thread packs and runs its
// own MC blocks) or, where A has too few micro-panels for that, each thread packs all of A and takes a share of
// the panel's columns. With several KC blocks the partial sums wait in `acc`, one tile per (ir, jr) micro-tile of
// the panel, until the last KC block hands them to finish.

struct Buffers {
  float* b_panel;  // kc x nc, shared by the team
  float* a_block;  // mc x kc, this thread's
  float* acc;      // m_tiles x (nc / kNR) tiles of kMR x kNR, shared by the team; used when k > kc
};

// lhs / rhs: the operands in slots kA / kB of `p` (A and B, or B and A for the transposed product), each at its
// base plus its offset.
template <class Traits, class Lhs, class Rhs>
void gemm_one_batch(const Args& args, const Shape& shape, const Tables& p, const Blocking& bl, int64_t b,
                    const Lhs* lhs, const Rhs* rhs, const Buffers& buf, int tid, int team, bool stream) {
  const Lhs* a = lhs + p.batch_at[kA][b];
  const Rhs* bp = rhs + p.batch_at[kB][b];
  const int64_t m_tiles = ceil_div(p.m, kMR);
  const bool split_rows = m_tiles >= 2 * int64_t(team);
  const int64_t tile_lo = split_rows ? m_tiles * tid / team : 0;
  const int64_t tile_hi = split_rows ? m_tiles * (tid + 1) / team : m_tiles;
  // This thread's MC blocks: equal numbers of micro-panels, at most bl.mc rows each.
  const int64_t mc_tiles = std::max<int64_t>(1, bl.mc / kMR);
  const int64_t my_tiles = tile_hi - tile_lo;
  const int64_t block_tiles = my_tiles > 0 ? ceil_div(my_tiles, ceil_div(my_tiles, mc_tiles)) : 1;
  alignas(64) float tile[kMR * kNR];

  for (int64_t jc = 0; jc < p.n; jc += bl.nc) {
    const int64_t nc = std::min(bl.nc, p.n - jc);
    const int64_t n_tiles = ceil_div(nc, kNR);
    for (int64_t pc = 0; pc < p.k; pc += bl.kc) {
      const int64_t kc = std::min(bl.kc, p.k - pc);
      const bool first = pc == 0, last = pc + kc >= p.k;
      for (int64_t jt = n_tiles * tid / team; jt < n_tiles * (tid + 1) / team; ++jt) {
        const int64_t j = jc + jt * kNR;
        pack_panel<kNR>(buf.b_panel + jt * kc * kNR, bp, p.n_at[kB] + j, int(std::min<int64_t>(kNR, p.n - j)),
                        p.k_at[kB] + pc, kc);
      }
      team_barrier(team);
      const int64_t jt_lo = split_rows ? 0 : n_tiles * tid / team;
      const int64_t jt_hi = split_rows ? n_tiles : n_tiles * (tid + 1) / team;
      for (int64_t it0 = tile_lo; it0 < tile_hi; it0 += block_tiles) {
        const int64_t it1 = std::min(tile_hi, it0 + block_tiles);
        for (int64_t it = it0; it < it1; ++it) {
          const int64_t i = it * kMR;
          pack_panel<kMR>(buf.a_block + (it - it0) * kc * kMR, a, p.m_at[kA] + i,
                          int(std::min<int64_t>(kMR, p.m - i)), p.k_at[kA] + pc, kc);
        }
        const auto tile_step = [&](int64_t it, int64_t jt) {
          const int64_t j = jc + jt * kNR;
          float* sums = first && last ? tile : buf.acc + (it * n_tiles + jt) * (kMR * kNR);
          micro_kernel(kc, buf.a_block + (it - it0) * kc * kMR, buf.b_panel + jt * kc * kNR, sums, !first);
          if (last)
            finish_block<Traits>(args, shape, p, b, it * kMR, std::min<int64_t>(kMR, p.m - it * kMR), j,
                                 std::min<int64_t>(kNR, p.n - j), sums, kNR, stream);
        };
        // B micro-panel in L1, A micro-panels from L2 (BLIS order).
        for (int64_t jt = jt_lo; jt < jt_hi; ++jt)
          for (int64_t it = it0; it < it1; ++it) tile_step(it, jt);
      }
      team_barrier(team);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The small-M path (decode): B is read once, in its memory order, by all threads, each over its own columns.
// Used when m <= kSmallM and B is contiguous along n (rows of B are streamed: y += a_k * B[k, :]) or along k
// (each column of B is a contiguous dot product with the rows of A).

constexpr int64_t kSmallM = 4;

// sums[r * ld + c] = sum_kk a[r * lda + kk] * B(kk, c) for kk < k, c < cols, B(kk, c) = b[k_at[kk] + c].
template <int M, class T>
void small_m_rows(const float* a, int64_t lda, int64_t k, const T* b, const int64_t* k_at, int64_t cols, float* sums,
                  int64_t ld) {
  for (int r = 0; r < M; ++r) std::fill(sums + r * ld, sums + r * ld + cols, 0.0f);
  const int64_t vec_cols = cols / kW * kW;
  int64_t kk = 0;
  for (; kk + 4 <= k; kk += 4) {
    const T* row0 = b + k_at[kk];
    const T* row1 = b + k_at[kk + 1];
    const T* row2 = b + k_at[kk + 2];
    const T* row3 = b + k_at[kk + 3];
    Vec coef[M][4];
    for (int r = 0; r < M; ++r)
      for (int u = 0; u < 4; ++u) coef[r][u] = vbroadcast(a[r * lda + kk + u]);
    for (int64_t c = 0; c < vec_cols; c += kW) {
      const Vec b0 = vload_f32(row0 + c), b1 = vload_f32(row1 + c), b2 = vload_f32(row2 + c),
                b3 = vload_f32(row3 + c);
      for (int r = 0; r < M; ++r) {
        Vec y = vload(sums + r * ld + c);
        y = vfma(coef[r][0], b0, y);
        y = vfma(coef[r][1], b1, y);
        y = vfma(coef[r][2], b2, y);
        y = vfma(coef[r][3], b3, y);
        vstore(sums + r * ld + c, y);
      }
    }
    for (int64_t c = vec_cols; c < cols; ++c)
      for (int r = 0; r < M; ++r)
        sums[r * ld + c] += a[r * lda + kk] * to_float(row0[c]) + a[r * lda + kk + 1] * to_float(row1[c]) +
                            a[r * lda + kk + 2] * to_float(row2[c]) + a[r * lda + kk + 3] * to_float(row3[c]);
  }
  for (; kk < k; ++kk) {
    const T* row = b + k_at[kk];
    for (int r = 0; r < M; ++r) {
      const float coef = a[r * lda + kk];
      for (int64_t c = 0; c < cols; ++c) sums[r * ld + c] += coef * to_float(row[c]);
    }
  }
}

// sums[r * ld + c] = sum_k a[r * k + kk] * B(kk, c) for c < cols, B(kk, c) = b[n_at[c] + kk].
template <int M, class T>
void small_m_dots(const float* a, int64_t k, const T* b, const int64_t* n_at, int64_t cols, float* sums,
                  int64_t ld) {
  constexpr int group = 4;
  const int64_t vec_k = k / kW * kW;
  int64_t c = 0;
  for (; c + group <= cols; c += group) {
    const T* col[group];
    for (int u = 0; u < group; ++u) col[u] = b + n_at[c + u];
    Vec acc[M][group];
    for (int r = 0; r < M; ++r)
      for (int u = 0; u < group; ++u) acc[r][u] = vzero();
    for (int64_t kk = 0; kk < vec_k; kk += kW) {
      Vec bv[group];
      for (int u = 0; u < group; ++u) bv[u] = vload_f32(col[u] + kk);
      for (int r = 0; r < M; ++r) {
        const Vec av = vload(a + r * k + kk);
        for (int u = 0; u < group; ++u) acc[r][u] = vfma(av, bv[u], acc[r][u]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int u = 0; u < group; ++u) {
        float s = vsum(acc[r][u]);
        for (int64_t kk = vec_k; kk < k; ++kk) s += a[r * k + kk] * to_float(col[u][kk]);
        sums[r * ld + c + u] = s;
      }
  }
  for (; c < cols; ++c) {
    const T* column = b + n_at[c];
    for (int r = 0; r < M; ++r) {
      Vec acc = vzero();
      for (int64_t kk = 0; kk < vec_k; kk += kW) acc = vfma(vload(a + r * k + kk), vload_f32(column + kk), acc);
      float s = vsum(acc);
      for (int64_t kk = vec_k; kk < k; ++kk) s += a[r * k + kk] * to_float(column[kk]);
      sums[r * ld + c] = s;
    }
  }
}

template <int M, class Traits>
void small_m_gemm(const Args& args, const Shape& shape, const Tables& p, int threads) {
  using A_t = typename Traits::A_t;
  using B_t = typename Traits::B_t;
  constexpr int64_t unit = 16;  // floats in a 64-byte line
  const int64_t n_pad = round_up(p.n, unit);
  // The rows of A, gathered into f32 (M x k); each thread gathers the k range it reads.
  float* a_rows = scratch(size_t(round_up(M * p.k, unit) + int64_t(threads) * M * n_pad));
  float* partials = a_rows + round_up(M * p.k, unit);
  if (is_contiguous(p.n_at[kB], p.n)) {
    // Rows of B are contiguous: each thread streams a contiguous run of whole rows (its share of k) into partial
    // sums over all columns; then each thread adds up the partials of its share of the columns and finishes them.
    constexpr int64_t chunk = 4096;  // columns whose partial sums stay in L2 while the k range streams past
    run_team(threads, [&](int tid, int team) {
      const int64_t k_lo = p.k * tid / team, k_hi = p.k * (tid + 1) / team;
      float* mine = partials + int64_t(tid) * M * n_pad;
      const int64_t share = round_up(ceil_div(p.n, team), unit);
      const int64_t j_lo = std::min(p.n, share * tid), j_hi = std::min(p.n, j_lo + share);
      for (int64_t b = 0; b < p.batch; ++b) {
        const A_t* a = static_cast<const A_t*>(args.ptr[kA]) + shape.offset[kA] + p.batch_at[kA][b];
        const B_t* bb = static_cast<const B_t*>(args.ptr[kB]) + shape.offset[kB] + p.batch_at[kB][b];
        for (int r = 0; r < M; ++r)
          for (int64_t kk = k_lo; kk < k_hi; ++kk) a_rows[r * p.k + kk] = to_float(a[p.m_at[kA][r] + p.k_at[kA][kk]]);
        for (int64_t j0 = 0; j0 < p.n; j0 += chunk)
          small_m_rows<M>(a_rows + k_lo, p.k, k_hi - k_lo, bb + p.n_at[kB][j0], p.k_at[kB] + k_lo,
                          std::min(chunk, p.n - j0), mine + j0, n_pad);
        team_barrier(team);
        for (int t = 1; t < team; ++t)
          for (int r = 0; r < M; ++r)
            for (int64_t j = j_lo; j < j_hi; ++j) partials[r * n_pad + j] += partials[(t * M + r) * n_pad + j];
        if (j_hi > j_lo) finish_block<Traits>(args, shape, p, b, 0, M, j_lo, j_hi - j_lo, partials + j_lo, n_pad);
        team_barrier(team);
      }
    });
    return;
  }
  // Columns of B are contiguous along k: each thread takes a share of the columns, whole dot products.
  run_team(threads, [&](int tid, int team) {
    const int64_t share = round_up(ceil_div(p.n, team), unit);
    const int64_t j_lo = std::min(p.n, share * tid), j_hi = std::min(p.n, j_lo + share);
    for (int64_t b = 0; b < p.batch; ++b) {
      const A_t* a = static_cast<const A_t*>(args.ptr[kA]) + shape.offset[kA] + p.batch_at[kA][b];
      const B_t* bb = static_cast<const B_t*>(args.ptr[kB]) + shape.offset[kB] + p.batch_at[kB][b];
      const int64_t k_lo = p.k * tid / team, k_hi = p.k * (tid + 1) / team;
      for (int r = 0; r < M; ++r)
        for (int64_t kk = k_lo; kk < k_hi; ++kk) a_rows[r * p.k + kk] = to_float(a[p.m_at[kA][r] + p.k_at[kA][kk]]);
      team_barrier(team);
      if (j_hi > j_lo) {
        small_m_dots<M>(a_rows, p.k, bb + p.k_at[kB][0], p.n_at[kB] + j_lo, j_hi - j_lo, partials + j_lo, n_pad);
        finish_block<Traits>(args, shape, p, b, 0, M, j_lo, j_hi - j_lo, partials + j_lo, n_pad);
      }
      team_barrier(team);
    }
  });
}

// The blocked path: the batch indices either go to threads whole (when there are enough of them to share evenly)
// or are run one after the other by the whole team.
template <class Traits, class Lhs, class Rhs>
void blocked_gemm(const Args& args, const Shape& shape, const Tables& p, int threads, const Lhs* lhs, const Rhs* rhs) {
  const Blocking bl = blocking_for(p.m, p.n, p.k, Traits::kKC, Traits::kMC, Traits::kNC);
  const int64_t m_tiles = ceil_div(p.m, kMR);
  const int64_t panel_floats = bl.kc * bl.nc;
  const int64_t block_floats = bl.mc * bl.kc;
  const int64_t acc_floats = p.k > bl.kc ? m_tiles * (bl.nc / kNR) * kMR * kNR : 0;
  const bool batch_per_thread = threads > 1 && p.batch >= threads && (p.batch % threads == 0 || p.batch >= 4 * threads);
  // An output larger than the last-level cache is not read again soon: its runs go out with non-temporal stores.
  const bool stream = p.batch * p.m * p.n * int64_t(sizeof(float)) > host_caches().l3;
  if (batch_per_thread) {
    const int64_t per_thread = panel_floats + block_floats + acc_floats;
    float* pool = scratch(size_t(per_thread * threads));
    run_team(threads, [&](int tid, int team) {
      float* mine = pool + tid * per_thread;
      const Buffers buf{mine, mine + panel_floats, mine + panel_floats + block_floats};
      for (int64_t b = tid; b < p.batch; b += team)
        gemm_one_batch<Traits>(args, shape, p, bl, b, lhs, rhs, buf, 0, 1, stream);
      fence_streamed_stores();
    });
    return;
  }
  float* pool = scratch(size_t(panel_floats + acc_floats + block_floats * threads));
  run_team(threads, [&](int tid, int team) {
    const Buffers buf{pool, pool + panel_floats + acc_floats + tid * block_floats, pool + panel_floats};
    for (int64_t b = 0; b < p.batch; ++b)
      gemm_one_batch<Traits>(args, shape, p, bl, b, lhs, rhs, buf, tid, team, stream);
    fence_streamed_stores();
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The entry point. Traits: A_t and B_t (float, f16, bf16); kShape; kOutSlots and kLeadSlot; kKC, kMC, kNC (0: from
// the host's caches); kSmallRows (bit m - 1: the small-M path is instantiated for m rows) and kBlocked (bit 0: the
// blocked path as A B, bit 1: as C^T = B^T A^T); finish_run.

template <class Traits>
void gemm(const Args& args) {
  const Shape& shape = Traits::kShape;
  const Problem p(shape, args.m_extent, Traits::kOutSlots);
  if (p.batch <= 0 || p.m <= 0 || p.n <= 0) return;
  const int threads = resolve_threads(args.threads);

  if (p.k == 0) {  // an empty sum: every output is finished with 0
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          const float zero = 0.0f;
          finish_block<Traits>(args, shape, p, b, i, 1, j, 1, &zero, 1);
        }
    return;
  }

  // Only the paths the traits name are instantiated (Traits::kSmallRows, Traits::kBlocked: those the plan finds the
  // checks below take at the rows the spec allows). A row count outside kSmallRows takes the blocked path, and
  // where kBlocked names one orientation the blocked path runs in it without the check: either orientation computes
  // every output; the check only picks the one whose micro-tile rows are runs of outputs.
  static_assert((Traits::kSmallRows & ~((1u << kSmallM) - 1)) == 0, "kSmallRows' bits are row counts 1..kSmallM");
  static_assert(Traits::kBlocked >= 1 && Traits::kBlocked <= 3, "kBlocked names A B, C^T = B^T A^T, or both");
  if constexpr (Traits::kSmallRows != 0) {
    if (p.m <= kSmallM && (is_contiguous(p.n_at[kB], p.n) || is_contiguous(p.k_at[kB], p.k))) {
      switch (p.m) {
        case 1:
          if constexpr ((Traits::kSmallRows & 1u) != 0) return small_m_gemm<1, Traits>(args, shape, p, threads);
          break;
        case 2:
          if constexpr ((Traits::kSmallRows & 2u) != 0) return small_m_gemm<2, Traits>(args, shape, p, threads);
          break;
        case 3:
          if constexpr ((Traits::kSmallRows & 4u) != 0) return small_m_gemm<3, Traits>(args, shape, p, threads);
          break;
        default:
          if constexpr ((Traits::kSmallRows & 8u) != 0) return small_m_gemm<4, Traits>(args, shape, p, threads);
          break;
      }
    }
  }

  // An output that steps by one element along m and not along n (NCHW-like) is computed as C^T = B^T A^T, so that
  // a micro-tile's rows are runs of consecutive outputs.
  using A_t = typename Traits::A_t;
  using B_t = typename Traits::B_t;
  const A_t* a = static_cast<const A_t*>(args.ptr[kA]) + shape.offset[kA];
  const B_t* b = static_cast<const B_t*>(args.ptr[kB]) + shape.offset[kB];
  if constexpr (Traits::kBlocked == 1u) {
    blocked_gemm<Traits>(args, shape, p, threads, a, b);
  } else if constexpr (Traits::kBlocked == 2u) {
    blocked_gemm<Traits>(args, shape, transposed(p), threads, b, a);
  } else {
    constexpr int first = first_out_slot<Traits>();
    const bool m_unit = p.m >= 2 && p.m_at[first][1] == p.m_at[first][0] + 1;
    const bool n_unit = p.n >= 2 && p.n_at[first][1] == p.n_at[first][0] + 1;
    if (m_unit && !n_unit)
      blocked_gemm<Traits>(args, shape, transposed(p), threads, b, a);
    else
      blocked_gemm<Traits>(args, shape, p, threads, a, b);
  }
}

}  // namespace dg::cpu
