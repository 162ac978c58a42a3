// The store of VEC outputs with no epilogue view (alpha * acc + beta * C), as families/hopper/render.py renders it,
// for the hand-written traits of the hopper and fp8_hopper instantiation tests: finish_vector into the output's dtype,
// then store_vector. The vector runs along m up to the run-time m_inner (ALONG_M), else along n up to N_INNER.
#pragma once

#include "dg/convert.cuh"

template <class Out_t, int VEC, int N_INNER, bool ALONG_M = false>
struct PlainStore {
  template <class Tile, class C_param, class Epilogue>
  __device__ static void finish_vector(const Out_t* p, const float* src, Out_t* dst, int gm, int gn, const Tile&,
                                       int m_inner, const C_param*, const Epilogue&, float alpha, float beta) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if ((ALONG_M ? gm : gn) + e >= (ALONG_M ? m_inner : N_INNER)) break;
      float t = alpha * src[e];
      if (beta != 0.0f) t = fmaf(beta, dg::to_float(p[e]), t);
      dst[e] = dg::from_float<Out_t>(t);
    }
  }
  __device__ static void store_vector(Out_t* p, const Out_t* dst, int gm, int gn, int m_inner) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if ((ALONG_M ? gm : gn) + e >= (ALONG_M ? m_inner : N_INNER)) break;
      p[e] = dst[e];
    }
  }
};
