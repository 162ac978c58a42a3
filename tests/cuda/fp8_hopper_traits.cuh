// Hand-written traits of dg/fp8_hopper.cuh's kernel, as a generated folder writes them, for the instantiation tests
// (fp8_hopper_instantiate.cu, fp8_hopper_no_promotion.cu): DeepGEMM's format (A's scales one a row and 128 k, B's one
// a 128 x 128 block, shared by a 128-wide tile) with the packed bf16 store, and per-channel scales (constant along k,
// one a row and one a column: each thread loads its own) with the f32 staging store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "dg/fp8_hopper.cuh"
#include "hopper_plain_store.cuh"

namespace {

struct NoViews {};

// The traits both share: e4m3 K-major A [m][k] and B [n][k], no loops, one 128-byte row of k a stage.
template <int M, int N, int K, int BM_, int BN_, int CONSUMERS_, int STAGES_>
struct Fp8Gemm {
  using A_t = __nv_fp8_e4m3;
  using B_t = __nv_fp8_e4m3;
  using Epilogue = NoViews;
  static constexpr int BM = BM_, BN = BN_, BK = 128, STAGES = STAGES_, CONSUMERS = CONSUMERS_, WG_M = BM / CONSUMERS;
  static constexpr int CTAS_PER_SM = 1, RASTER = 8, PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 240;
  static constexpr int ACC_CHAINS = 1;
  static constexpr bool rows_at_run_time = false;
  static constexpr int M_UNIT = 1, M_INNER = M, TILES_M = (M + BM - 1) / BM, N_INNER = N, TILES_N = (N + BN - 1) / BN;
  static constexpr int TILE_GROUPS = 1, TILES = TILES_M * TILES_N;
  static constexpr bool FLAT_ROWS = false;
  static constexpr int K_INNER_TILES = (K + 127) / 128, K_ITERS = K_INNER_TILES;
  static constexpr int TILE_LOOPS = 0;
  static constexpr dg::hopper::Loop LOOPS[1] = {{1, false, 0}};
  static constexpr int K_LOOPS = 0;
  static constexpr int K_LOOP_SIZE[1] = {1};
  static constexpr CUtensorMapDataType TMA_DTYPE = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  static constexpr CUtensorMapL2promotion L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  struct A_map {
    static constexpr bool IS_A = true, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = BM * 128;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{K, 0, 128, dg::hopper::AT_K, 0}, {M, K, BM, dg::hopper::AT_MN, 0}};
  };
  struct B_map {
    static constexpr bool IS_A = false, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = BN * 128;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{K, 0, 128, dg::hopper::AT_K, 0}, {N, K, BN, dg::hopper::AT_MN, 0}};
  };
  static constexpr bool A_ROWS_FOLLOW_M = true;
  static constexpr int A_BOX_ROWS = BM;
  static constexpr bool B_FIRST = false, B_EVICT_FIRST = false, A_EVICT_FIRST = false;
  static constexpr int A_PARTS = 1;
  static constexpr bool C_ALONG_M = false;
  static constexpr long long C_SM = N, C_SN = 1;
  static constexpr int SPLITS = 1, KT_PER_SPLIT = K_ITERS, RED_PITCH = 0;
};

// 4096 x 7168 x 16384, bf16 out, 128 x 128 tiles over two consumers, the packed store.
struct DeepGemmFormat : Fp8Gemm<4096, 7168, 16384, 128, 128, 2, 6>, PlainStore<__nv_bfloat16, 8, 7168> {
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using Out_t = C_t;
  static constexpr int C_VEC = 8;
  static constexpr int EPI_COLS = 32, EPI_PITCH = 40, EPI_FLOATS = 2560;
  static constexpr bool PACKED = true;
  static constexpr int PACK_COLS = 64, PACK_PITCH = 72;
  static constexpr int SMEM_BYTES = 6 * (128 + 128) * 128 + 2 * 2560 * 4 + 2 * 6 * 8 + 1024;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
  __device__ static float pointwise(float t) { return t; }
  struct A_scales {  // [m][k / 128], m-contiguous
    static constexpr int MN_BLOCK = 1, MN_LAST = 4095, K_ITERS_PER = 1;
    static constexpr long long MN_STRIDE = 1, K_STRIDE = 4096;
  };
  struct B_scales {  // [n / 128][k / 128]
    static constexpr int MN_BLOCK = 128, MN_LAST = 7167, K_ITERS_PER = 1;
    static constexpr long long MN_STRIDE = 128, K_STRIDE = 1;
  };
};

// 256 x 384 x 7168, f32 out, 64 x 64 tiles on one consumer, per-channel scales, the staged store.
struct PerChannel : Fp8Gemm<256, 384, 7168, 64, 64, 1, 8>, PlainStore<float, 4, 384> {
  using C_t = float;
  using C_param = C_t;
  using Out_t = C_t;
  static constexpr int C_VEC = 4;
  static constexpr int EPI_COLS = 32, EPI_PITCH = 40, EPI_FLOATS = 2560;
  static constexpr bool PACKED = false;
  static constexpr int PACK_COLS = 0, PACK_PITCH = 0;
  static constexpr int SMEM_BYTES = 8 * (64 + 64) * 128 + 2560 * 4 + 2 * 8 * 8 + 1024;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
  struct A_scales {
    static constexpr int MN_BLOCK = 1, MN_LAST = 255, K_ITERS_PER = 0;
    static constexpr long long MN_STRIDE = 1, K_STRIDE = 0;
  };
  struct B_scales {
    static constexpr int MN_BLOCK = 1, MN_LAST = 383, K_ITERS_PER = 0;
    static constexpr long long MN_STRIDE = 1, K_STRIDE = 0;
  };
};

}  // namespace
