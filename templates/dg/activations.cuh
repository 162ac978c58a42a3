// dg/activations.cuh — the epilogue's activations, in f32 (docs/design/epilogue.md gives the formulas).
// Comparisons keep NaN: t < 0 is false for NaN. `Fast` (a 16-bit output): tanh and exp through the special function
// unit (tanh.approx, ex2.approx), whose relative error (about 2^-11 and 2^-22) is at or below the output's rounding.
#pragma once

namespace dg {

// relu(t) = max(t, 0); NaN stays NaN (fmaxf would drop it).
__device__ __forceinline__ float relu(float t) { return t < 0.0f ? 0.0f : t; }

// tanh.approx's result lies in [-1, 1] as ptxas sees it, so a clamp after it would fold: NaN is passed on explicitly.
template <bool Fast>
__device__ __forceinline__ float tanh(float t) {
  if constexpr (Fast) {
    float th;
    asm("tanh.approx.f32 %0, %1;" : "=f"(th) : "f"(t));
    return t != t ? t : th;
  } else {
    return tanhf(t);
  }
}

// gelu_tanh(t) = 0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))), the tanh approximation of GeLU.
template <bool Fast>
__device__ __forceinline__ float gelu_tanh(float t) {
  const float u = 0.7978845608028654f * fmaf(0.044715f * t, t * t, t);
  if constexpr (Fast) {
    float th;
    asm("tanh.approx.f32 %0, %1;" : "=f"(th) : "f"(u));
    return 0.5f * t * (1.0f + th);
  } else {
    return 0.5f * t * (1.0f + tanhf(u));
  }
}

// gelu_erf(t) = 0.5 t (1 + erf(t / sqrt(2))), the exact GeLU.
template <bool Fast>
__device__ __forceinline__ float gelu_erf(float t) { return 0.5f * t * (1.0f + erff(t * 0.7071067811865476f)); }

// silu(t) = t / (1 + exp(-t)) = t * sigmoid(t).
template <bool Fast>
__device__ __forceinline__ float silu(float t) { return t / (1.0f + (Fast ? __expf(-t) : expf(-t))); }

// sigmoid(t) = 1 / (1 + exp(-t)).
template <bool Fast>
__device__ __forceinline__ float sigmoid(float t) { return 1.0f / (1.0f + (Fast ? __expf(-t) : expf(-t))); }

// clamp(t, lo, hi); NaN stays NaN.
__device__ __forceinline__ float clamp(float t, float lo, float hi) { return t < lo ? lo : (t > hi ? hi : t); }

}  // namespace dg
