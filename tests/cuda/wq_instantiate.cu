// Instantiates dg/wq.cuh with hand-written traits, as a generated folder does: GPTQ's uint4 words with uint4 zero
// points, deepgemm's dg layout of signed int4 without zero points, and int8 bytes with prescaled f16 zero points and
// run-time rows; tests/test_device_headers.py compiles it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dg/wq.cuh"

namespace {

// The problem every instantiation shares: C[m][n] (f16) = A[m][k] (f16) . w[k][n], M = 16, N = 512, K = 1024.
struct Problem {
  using index_t = int;
  using A_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 1024>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1024, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 512>>, dg::Role<index_t, dg::Seg<512, 1>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 16, N = 512, K = 1024;
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
  static constexpr int THREADS = 128, COLS = 32, MT = 8, KSPLIT = 4, TILES_N = 16;
};

// GPTQ: qweight[k/8][n] uint4, scales[k/128][n] f16, qzeros[k/128][n/8] uint4.
struct Gptq : Problem {
  using B_t = uint32_t;
  using W_t = B_t;
  struct Weights {
    static constexpr int BITS = 4;
    static constexpr bool SIGNED = false, DG = false;
    static constexpr int ORDER = dg::wq::LINEAR;
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 1, 512, true>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1>>;
  };
  using S_t = __half;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 128, 512>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1>>;
  };
  using Z_t = uint32_t;
  struct Zeros {
    static constexpr bool HAS = true, DG = false, SIGNED = false;
    static constexpr int BITS = 4, ORDER = dg::wq::LINEAR, FORM = dg::wq::SUBTRACT;
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 128, 64>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1, true>>;
  };
};

// deepgemm's dg layout, signed int4, one bf16 scale a column.
struct Dg : Problem {
  using B_t = uint32_t;
  using W_t = B_t;
  struct Weights {
    static constexpr int BITS = 4;
    static constexpr bool SIGNED = true, DG = true;
    static constexpr long long K_CHUNKS = 16;
  };
  using S_t = __nv_bfloat16;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 1024, 0>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1>>;
  };
  using Z_t = S_t;
  struct Zeros {
    static constexpr bool HAS = false;
  };
};

// int8 bytes as nn.Linear keeps them ([n][k]), f32 scales per column, prescaled f16 zero points, rows at run time.
struct Int8 : Problem {
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M_UNIT = 1;
  using B_t = int8_t;
  using W_t = B_t;
  struct Weights {
    static constexpr int BITS = 8;  // int8_t: signed by its type
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 1, 1>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1024>>;
  };
  using S_t = float;
  struct Scales {
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 1024, 0>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1>>;
  };
  using Z_t = __half;
  struct Zeros {
    static constexpr bool HAS = true;
    static constexpr int BITS = 0, FORM = dg::wq::PRESCALED;
    using k = dg::wq::Role<index_t, dg::wq::Seg<1024, 1024, 0>>;
    using n = dg::wq::Role<index_t, dg::wq::Seg<512, 1, 1>>;
  };
};

}  // namespace

cudaError_t wq_gptq(const __half* A, const uint32_t* B, __half* C, const __half* s, const uint32_t* z,
                    cudaStream_t stream) {
  return dg::wq::launch<Gptq>(A, B, C, Gptq::M, {}, {s, z}, 1.0f, 0.0f, stream);
}

cudaError_t wq_dg(const __half* A, const uint32_t* B, __half* C, const __nv_bfloat16* s, cudaStream_t stream) {
  return dg::wq::launch<Dg>(A, B, C, Dg::M, {}, {s, nullptr}, 1.0f, 0.5f, stream);
}

cudaError_t wq_int8(const __half* A, const int8_t* B, __half* C, const float* s, const __half* z, int m,
                    cudaStream_t stream) {
  return dg::wq::launch<Int8>(A, B, C, m * Int8::M_UNIT, {}, {s, z}, 1.0f, 0.0f, stream);
}
