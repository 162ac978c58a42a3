// Instantiates dg/tcgemv.cuh with hand-written traits, as a generated folder does: the register-stream kernel over a
// batch with N and K not whole (a bias epilogue), with 16 tokens at run time and a column-major C, and
// the staged-activation kernel; tests/test_device_headers.py compiles it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dg/convert.cuh"  // the hand-written stores convert through dg
#include "dg/tcgemv.cuh"

namespace {

// C[b][m][n] (f16) = A[b][m][k] . B[b][n][k] + bias[n]: 4 products of 5 x 1000 x 1000; N is not whole 16-column
// blocks and K not whole 64-k segments (the plan deepgemm makes of it: 8 warps along K).
struct StreamBatch {
  using index_t = int;
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t, dg::Seg<4, 5000>>, dg::Role<index_t, dg::Seg<5, 1000>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1000, 1>>>;
  using B_view = dg::View<dg::Role<index_t, dg::Seg<4, 1000000>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<1000, 1000>>, dg::Role<index_t, dg::Seg<1000, 1>>>;
  using C_view = dg::View<dg::Role<index_t, dg::Seg<4, 5000>>, dg::Role<index_t, dg::Seg<5, 1000>>,
                          dg::Role<index_t, dg::Seg<1000, 1>>, dg::Role<index_t>>;
  using bias_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<1000, 1>>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = false;
  static constexpr index_t M = 5, N = 1000, K = 1000;
  static constexpr bool has_batch = true;
  static constexpr bool c_along_m = false;
  struct Epilogue {
    const __half* bias;
  };
  __device__ static void move_to_batch(Epilogue& ep, index_t batch) { ep.bias += bias_view::batch::offset(batch); }
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue& ep) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    float t = alpha * v;
    if (beta != 0.0f) t = fmaf(beta, dg::to_float(*p), t);
    t += dg::to_float(ep.bias[bias_view::n::offset(gn)]);
    *p = dg::from_float<C_t>(t);
  }
  static constexpr int TOKENS = 8, OCTETS = 2, K_WARPS = 8, UNROLL = 2;
  static constexpr int ROW_GROUPS = 1, THREADS = 256, BN = 16, K_SLICE = 128;
  static constexpr int TILES_N = 63, BLOCKS = 4 * 63;
  static constexpr int RED_PITCH = 20;
  static constexpr int MIN_BLOCKS = 2;
  static constexpr bool WHOLE_SEGMENTS = false;
  static constexpr bool WHOLE_BLOCKS = false;
  static constexpr bool A_STAGED = false;
  static constexpr int PREFETCH_ROUNDS = 0;  // a warp's one round: no prefetch
};

// C (bf16, column-major) = A[m][k] . B[n][k]: 9..16 rows at run time, 16 tokens, 1 octet x 4 warps, 64-bit indices.
struct Stream16 {
  using index_t = long long;
  using A_t = __nv_bfloat16;
  using B_t = __nv_bfloat16;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 4096>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<4096, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<4096, 4096>>,
                          dg::Role<index_t, dg::Seg<4096, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 1>>, dg::Role<index_t, dg::Seg<4096, 16>>,
                          dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M = 16, N = 4096, K = 4096;
  static constexpr bool has_batch = false;
  static constexpr bool c_along_m = true;
  struct Epilogue {};
  __device__ static void store(C_param* C, index_t gm, index_t gn, float v, float alpha, float beta, index_t M,
                               const Epilogue&) {
    if (gm >= M || gn >= N) return;
    C_t* p = C + (C_view::m::offset(gm) + C_view::n::offset(gn));
    float out = alpha * v;
    if (beta != 0.0f) out = fmaf(beta, dg::to_float(*p), out);
    *p = dg::from_float<C_t>(out);
  }
  static constexpr int TOKENS = 16, OCTETS = 1, K_WARPS = 4, UNROLL = 2;
  static constexpr int ROW_GROUPS = 1, THREADS = 128, BN = 8, K_SLICE = 1024;
  static constexpr int TILES_N = 512, BLOCKS = 512;
  static constexpr int RED_PITCH = 12;
  static constexpr int MIN_BLOCKS = 4;
  static constexpr bool WHOLE_SEGMENTS = true;
  static constexpr bool WHOLE_BLOCKS = true;
  static constexpr bool A_STAGED = false;
  static constexpr int PREFETCH_ROUNDS = 0;
};

// C[m][n] (f16) = A[m][k] . B[n][k] at 9..16 rows, A staged by TMA: 7 row groups of 2 warps, one block an SM.
struct Staged {
  using index_t = int;
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using A_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 4096>>, dg::Role<index_t>,
                          dg::Role<index_t, dg::Seg<4096, 1>>>;
  using B_view = dg::View<dg::Role<index_t>, dg::Role<index_t>, dg::Role<index_t, dg::Seg<14336, 4096>>,
                          dg::Role<index_t, dg::Seg<4096, 1>>>;
  using C_view = dg::View<dg::Role<index_t>, dg::Role<index_t, dg::Seg<16, 14336>>,
                          dg::Role<index_t, dg::Seg<14336, 1>>, dg::Role<index_t>>;
  static constexpr bool rows_at_run_time = true;
  static constexpr index_t M = 16, N = 14336, K = 4096;
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
  static constexpr int TOKENS = 16, OCTETS = 2, K_WARPS = 2, UNROLL = 2;
  static constexpr int ROW_GROUPS = 7, THREADS = 448, BN = 112, K_SLICE = 2048;
  static constexpr int TILES_N = 128, BLOCKS = 128;
  static constexpr int RED_PITCH = 116;
  static constexpr int MIN_BLOCKS = 1;
  static constexpr bool WHOLE_SEGMENTS = true;
  static constexpr bool WHOLE_BLOCKS = true;
  static constexpr bool A_STAGED = true;
  static constexpr int ACT_BYTES = 16 * 64 * 128, GROUP_SEGMENTS = 2, BARRIERS = 32;
  static constexpr int SMEM_ALIGN = 1024, SMEM_BYTES = 1024 + 16 * 64 * 128 + 8 * 32 + 2 * 16 * 116 * 4;
};

}  // namespace

cudaError_t tcgemv_stream_batch(const __half* A, const __half* B, __half* C, const __half* bias, cudaStream_t s) {
  return dg::tcgemv::launch<StreamBatch>(A, B, C, StreamBatch::M, StreamBatch::Epilogue{bias}, 1.0f, 0.0f, s);
}

cudaError_t tcgemv_stream16(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t m,
                            cudaStream_t s) {
  return dg::tcgemv::launch<Stream16>(A, B, C, m, {}, 1.0f, 0.5f, s);
}

cudaError_t tcgemv_staged(const __half* A, const __half* B, __half* C, int64_t m, cudaStream_t s) {
  return dg::tcgemv::launch<Staged>(A, B, C, int(m), {}, 1.0f, 0.0f, s);
}
