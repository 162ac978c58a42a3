// dg/cpu_types.hpp — the CPU engine's element types: f16 and bf16 storage, conversion to f32 and back (round to
// nearest even), and element loads / stores at an element offset from a base pointer.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__F16C__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace dg::cpu {

// IEEE binary16, stored as its bits.
struct f16 {
  uint16_t bits;
};
// bfloat16 (the upper half of an IEEE binary32), stored as its bits.
struct bf16 {
  uint16_t bits;
};

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline float to_float(float x) { return x; }

inline float to_float(f16 h) {
#if defined(__F16C__)
  return _cvtsh_ss(h.bits);
#else
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = float(mantissa) * float_of(0x33800000u);  // 2^-24
    return float_of(bits_of(magnitude) | sign);
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));  // inf, or NaN with its payload
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

inline float to_float(bf16 h) { return float_of(uint32_t(h.bits) << 16); }

template <class T>
T from_float(float x);

template <>
inline float from_float<float>(float x) {
  return x;
}

template <>
inline f16 from_float<f16>(float x) {
#if defined(__F16C__)
  return f16{static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT))};
#else
  uint32_t u = bits_of(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  uint32_t h;
  if (u >= 0x47800000u) {  // |x| >= 65536, inf or NaN: inf, or a quiet NaN
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {  // |x| < 2^-14: the f16 is subnormal or zero; adding 0.5 rounds at 2^-24 (RNE)
    h = bits_of(float_of(u) + 0.5f) - bits_of(0.5f);
  } else {  // normal: rebias, round the 13 dropped bits to nearest even; a carry into the exponent is correct
    const uint32_t mantissa_odd = (u >> 13) & 1u;
    u += 0xc8000fffu + mantissa_odd;  // (15 - 127) << 23, plus 0xfff
    h = u >> 13;
  }
  return f16{static_cast<uint16_t>(h | sign)};
#endif
}

template <>
inline bf16 from_float<bf16>(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};  // NaN stays NaN
  return bf16{static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

// The element at element offset `at` from `base`, in f32.
template <class T>
inline float load(const void* base, int64_t at) {
  return to_float(static_cast<const T*>(base)[at]);
}

// Stores v, rounded to T, at element offset `at` from `base`.
template <class T>
inline void store(void* base, int64_t at, float v) {
  static_cast<T*>(base)[at] = from_float<T>(v);
}

// Stores v[0..count) rounded to T at element offsets at, at + 1, ...: the store of a run of consecutive outputs.
// `stream`: the output is too large for the caches to keep, so f32 runs go to memory with non-temporal stores (no
// read-for-ownership of lines the run overwrites whole); the caller orders them with fence_streamed_stores().
template <class T>
inline void store_run(void* base, int64_t at, const float* v, int64_t count, bool stream) {
  T* dst = static_cast<T*>(base) + at;
  int64_t q = 0;
  (void)stream;
#if defined(__AVX512F__) || defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    if (stream) {
#if defined(__AVX512F__)
      constexpr int64_t kLanes = 16;
#else
      constexpr int64_t kLanes = 8;
#endif
      for (; q < count && (reinterpret_cast<uintptr_t>(dst + q) % (kLanes * 4)) != 0; ++q) dst[q] = v[q];
      for (; q + kLanes <= count; q += kLanes) {
#if defined(__AVX512F__)
        _mm512_stream_ps(dst + q, _mm512_loadu_ps(v + q));
#else
        _mm256_stream_ps(dst + q, _mm256_loadu_ps(v + q));
#endif
      }
    }
  }
#endif
  for (; q < count; ++q) dst[q] = from_float<T>(v[q]);
}

// Orders this thread's non-temporal stores before what follows (the end of the call).
inline void fence_streamed_stores() {
#if defined(__AVX512F__) || defined(__AVX__)
  _mm_sfence();
#endif
}

}  // namespace dg::cpu
