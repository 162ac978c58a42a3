// Instantiates dg/wqtc.cuh with hand-written traits, as a generated folder does: signed int4 in the dg layout with
// f16 scales in groups of 128 and k-contiguous activations (a lane's 16 k in 16-byte loads), rows at run time; uint4
// in the dg layout with packed uint4 zero points and bf16 scales in groups of 32, bf16 activations with an odd row
// stride (element loads), and tails in K and N; and GPTQ's words (K_WORDS) of uint4 with f16 zero points.
// tests/test_device_headers.py compiles it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dg/wqtc.cuh"

namespace {

// C[m][n] = A[m][k] . w[k][n], N = 300, K = 1000 (tails in both); A's rows `a_stride` apart.
template <class E, long long a_stride, long long m>
struct Problem {
  using index_t = int;
  using A_t = E;
  using C_t = E;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<m, a_stride>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1000, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<m, 300>>, dg::Role<index_t, dg::Seg<300, 1>>,
                          dg::Role<index_t>>;
  static constexpr index_t M = m, N = 300, K = 1000;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = false;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    float out = alpha * v;
    if (beta != 0.0f) out = fmaf(beta, dg::to_float(*p), out);
    *p = dg::from_float<C_t>(out);
  }
  using B_t = uint32_t;
  static constexpr int K_CHUNKS = 16;  // ceil(1000 / 64)
  static constexpr long long STRIPS = 19;  // ceil(300 / 16)
};

// int4, f16 scales [k/128][n], rows 1..16 at run time, A k-contiguous with 16-byte aligned rows.
struct Int4 : Problem<__half, 1000, 16> {
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M_UNIT = 1;
  static constexpr bool SIGNED = true, A_PAIRS = true, A_VEC16 = true;
  static constexpr int LAYOUT = dg::wqtc::DG_WORDS;
  static constexpr int WK = 4, NS = 2, MT = 2, DEPTH = 4;
  static constexpr int MIN_BLOCKS = 16 / WK;
  static constexpr long long BLOCKS = 10;
  using S_t = __half;
  static constexpr long long GROUP_K = 128;
  static constexpr int QPC = 1;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 128, 300>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1>>;
  };
  using Z_t = S_t;
  struct Zeros {
    static constexpr bool HAS = false;
  };
};

// uint4 with GPTQ-style packed zero points [k/32][n/8], bf16 scales [k/32][n], 11 rows, A's rows 1003 apart.
struct Uint4 : Problem<__nv_bfloat16, 1003, 11> {
  static constexpr bool rows_at_run_time = false;
  static constexpr bool SIGNED = false, A_PAIRS = false, A_VEC16 = false;
  static constexpr int LAYOUT = dg::wqtc::DG_WORDS;
  static constexpr int WK = 8, NS = 1, MT = 2, DEPTH = 2;
  static constexpr int MIN_BLOCKS = 16 / WK;
  static constexpr long long BLOCKS = 19;
  using S_t = __nv_bfloat16;
  static constexpr long long GROUP_K = 32;
  static constexpr int QPC = 1;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 32, 300>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1>>;
  };
  using Z_t = uint32_t;
  struct Zeros {
    static constexpr bool HAS = true;
    static constexpr int BITS = 4, ORDER = dg::wq::LINEAR, FORM = dg::wq::SUBTRACT;
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 32, 38>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1, true>>;
  };
};

// GPTQ's qweight[k/8][n] uint4 read as it lies, f16 scales and prescaled f16 zero points [k/128][n], 16 rows.
struct Gptq : Problem<__half, 1000, 16> {
  static constexpr bool rows_at_run_time = false;
  static constexpr bool SIGNED = false, A_PAIRS = true, A_VEC16 = true;
  static constexpr int LAYOUT = dg::wqtc::K_WORDS;
  struct Weights {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 1, 300, true>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1>>;
  };
  static constexpr int WK = 4, NS = 1, MT = 2, DEPTH = 1;
  static constexpr int MIN_BLOCKS = 16 / WK;
  static constexpr long long BLOCKS = 19;
  using S_t = __half;
  static constexpr long long GROUP_K = 128;
  static constexpr int QPC = 1;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 128, 300>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1>>;
  };
  using Z_t = __half;
  struct Zeros {
    static constexpr bool HAS = true;
    static constexpr int BITS = 0, FORM = dg::wq::PRESCALED;
    using k = dg::wq::Role<index_t, dg::wq::Seg<1000, 128, 300>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<300, 1, 1>>;
  };
};

}  // namespace

cudaError_t wqtc_gptq(const __half* A, const uint32_t* B, __half* C, const __half* s, const __half* z,
                      cudaStream_t stream) {
  return dg::wqtc::launch<Gptq>(A, B, C, Gptq::M, {}, {s, z}, 1.0f, 0.0f, stream);
}

cudaError_t wqtc_int4(const __half* A, const uint32_t* B, __half* C, const __half* s, int m, cudaStream_t stream) {
  return dg::wqtc::launch<Int4>(A, B, C, m * Int4::M_UNIT, {}, {s, nullptr}, 1.0f, 0.0f, stream);
}

cudaError_t wqtc_uint4(const __nv_bfloat16* A, const uint32_t* B, __nv_bfloat16* C, const __nv_bfloat16* s,
                       const uint32_t* z, cudaStream_t stream) {
  return dg::wqtc::launch<Uint4>(A, B, C, Uint4::M, {}, {s, z}, 1.0f, 0.5f, stream);
}
