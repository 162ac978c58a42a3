// dg/cpu_activations.hpp — the epilogue's activations on the host, in f32 (docs/design/epilogue.md gives the
// formulas). Comparisons keep NaN: t < 0 is false for NaN.
#pragma once
#include <cmath>

namespace dg {
namespace cpu {
// relu(t) = max(t, 0); NaN stays NaN (std::fmax would drop it).
inline float relu(float t) { return t < 0.0f ? 0.0f : t; }
inline float tanh(float t) { return std::tanh(t); }
// gelu_tanh(t) = 0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))), the tanh approximation of GeLU.
inline float gelu_tanh(float t) {
  const float u = 0.7978845608028654f * std::fma(0.044715f * t, t * t, t);
  return 0.5f * t * (1.0f + std::tanh(u));
}
// gelu_erf(t) = 0.5 t (1 + erf(t / sqrt(2))), the exact GeLU.
inline float gelu_erf(float t) { return 0.5f * t * (1.0f + std::erf(t * 0.7071067811865476f)); }
// silu(t) = t / (1 + exp(-t)) = t * sigmoid(t).
inline float silu(float t) { return t / (1.0f + std::exp(-t)); }
// sigmoid(t) = 1 / (1 + exp(-t)).
inline float sigmoid(float t) { return 1.0f / (1.0f + std::exp(-t)); }
// clamp(t, lo, hi); NaN stays NaN.
inline float clamp(float t, float lo, float hi) { return t < lo ? lo : (t > hi ? hi : t); }
}  // namespace cpu
}  // namespace dg
