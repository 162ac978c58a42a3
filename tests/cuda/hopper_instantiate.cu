// Instantiates dg/hopper_persistent.cuh, dg/hopper_split.cuh and dg/hopper_multicast.cuh with hand-written traits, as
// a generated folder does: a persistent bf16 GEMM with a batch loop and the packed store, a K split over a cluster
// with rows at run time, A multicast over a 2-block cluster with C m-contiguous, and flat rows (an NCHW 1x1
// convolution) with one warpgroup of two m64 blocks and one accumulator chain; tests/test_device_headers.py
// compiles it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dg/activations.cuh"
#include "dg/hopper_multicast.cuh"
#include "dg/hopper_persistent.cuh"
#include "dg/hopper_split.cuh"
#include "hopper_plain_store.cuh"

namespace {

struct NoViews {};  // the epilogue argument of kernels without epilogue views

// C[b][m][n] = A[b][m][k] B[b][n][k]: 4 products of 1024 x 1024 x 512, bf16, 128 x 256 tiles, a batch loop.
struct Persistent : PlainStore<__nv_bfloat16, 8, 1024> {
  using A_t = __nv_bfloat16;
  using B_t = __nv_bfloat16;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using Out_t = C_t;
  using Epilogue = NoViews;
  static constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, CONSUMERS = 2, WG_M = 64, CTAS_PER_SM = 1;
  static constexpr int RASTER = 8, PRODUCER_REGS = 40, CONSUMER_REGS = 232, ACC_CHAINS = 1;
  static constexpr bool rows_at_run_time = false;
  static constexpr int M_UNIT = 1, M_INNER = 1024, TILES_M = 8, N_INNER = 1024, TILES_N = 4;
  static constexpr int TILE_GROUPS = 4, TILES = 128;
  static constexpr bool FLAT_ROWS = false;
  static constexpr int K_INNER_TILES = 8, K_ITERS = 8;
  static constexpr int TILE_LOOPS = 1;
  static constexpr dg::hopper::Loop LOOPS[TILE_LOOPS] = {{4, false, 1048576}};
  static constexpr int K_LOOPS = 0;
  static constexpr int K_LOOP_SIZE[1] = {1};
  static constexpr CUtensorMapDataType TMA_DTYPE = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr CUtensorMapL2promotion L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  struct A_map {
    static constexpr bool IS_A = true, K_MAJOR = true;
    static constexpr int RANK = 3, BOXES = 1, BOX_BYTES = 16384;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{512, 0, 64, dg::hopper::AT_K, 0},
                                                   {1024, 1024, 128, dg::hopper::AT_MN, 0},
                                                   {4, 1048576, 1, dg::hopper::AT_LOOP, 0}};
  };
  struct B_map {
    static constexpr bool IS_A = false, K_MAJOR = true;
    static constexpr int RANK = 3, BOXES = 1, BOX_BYTES = 32768;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{512, 0, 64, dg::hopper::AT_K, 0},
                                                   {1024, 1024, 256, dg::hopper::AT_MN, 0},
                                                   {4, 1048576, 1, dg::hopper::AT_LOOP, 0}};
  };
  static constexpr bool A_ROWS_FOLLOW_M = true;
  static constexpr int A_BOX_ROWS = 128;
  static constexpr bool B_FIRST = false, B_EVICT_FIRST = false, A_EVICT_FIRST = false;
  static constexpr int A_PARTS = 1;
  static constexpr bool C_ALONG_M = false;
  static constexpr int C_VEC = 8;
  static constexpr long long C_SM = 1024, C_SN = 1;
  static constexpr int EPI_COLS = 32, EPI_PITCH = 40, EPI_FLOATS = 2560;
  static constexpr bool PACKED = true;
  static constexpr int PACK_COLS = 64, PACK_PITCH = 72;
  static constexpr int SPLITS = 1, KT_PER_SPLIT = 8, RED_PITCH = 0;
  static constexpr int SMEM_BYTES = 4 * (16384 + 32768) + 2 * 2560 * 4 + 2 * 4 * 8 + 1024;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
  __device__ static float pointwise(float t) { return dg::relu(t); }
};

// C[m][n] (f16) = A[m][k] B[n][k], m = 1..64 at run time, 64 x 64 tiles, K split over 2 blocks, A's box cut to the rows.
struct Split : PlainStore<__half, 8, 4096> {
  using A_t = __half;
  using B_t = __half;
  using C_t = __half;
  using C_param = C_t;
  using Out_t = C_t;
  using Epilogue = NoViews;
  static constexpr int BM = 64, BN = 64, BK = 64, STAGES = 8, CONSUMERS = 1, WG_M = 64, CTAS_PER_SM = 1;
  static constexpr int RASTER = 8, PRODUCER_REGS = 40, CONSUMER_REGS = 232, ACC_CHAINS = 2;
  static constexpr bool rows_at_run_time = true;
  static constexpr int M_UNIT = 1, M_INNER = 64, TILES_M = 1, N_INNER = 4096, TILES_N = 64;
  static constexpr int TILE_GROUPS = 1, TILES = 64;
  static constexpr bool FLAT_ROWS = false;
  static constexpr int K_INNER_TILES = 64, K_ITERS = 64;
  static constexpr int TILE_LOOPS = 0;
  static constexpr dg::hopper::Loop LOOPS[1] = {{1, false, 0}};
  static constexpr int K_LOOPS = 0;
  static constexpr int K_LOOP_SIZE[1] = {1};
  static constexpr CUtensorMapDataType TMA_DTYPE = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  static constexpr CUtensorMapL2promotion L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  struct A_map {
    static constexpr bool IS_A = true, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = 8192;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{4096, 0, 64, dg::hopper::AT_K, 0}, {0, 8192, 0, dg::hopper::AT_MN, 0}};
  };
  struct B_map {
    static constexpr bool IS_A = false, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = 8192;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{4096, 0, 64, dg::hopper::AT_K, 0},
                                                   {4096, 8192, 64, dg::hopper::AT_MN, 0}};
  };
  static constexpr bool A_ROWS_FOLLOW_M = true;
  static constexpr int A_BOX_ROWS = 0;
  static constexpr bool B_FIRST = true, B_EVICT_FIRST = true, A_EVICT_FIRST = false;
  static constexpr int A_PARTS = 1;
  static constexpr bool C_ALONG_M = false;
  static constexpr int C_VEC = 8;
  static constexpr long long C_SM = 4096, C_SN = 1;
  static constexpr int EPI_COLS = 0, EPI_PITCH = 0, EPI_FLOATS = 0;
  static constexpr bool PACKED = false;
  static constexpr int PACK_COLS = 0, PACK_PITCH = 0;
  static constexpr int SPLITS = 2, KT_PER_SPLIT = 32, RED_PITCH = 68;
  static constexpr int SMEM_BYTES = 8 * (8192 + 8192) + 2 * 8 * 8 + 1024;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
};

// C[m][n] m-contiguous (bf16) = A[m][k] B[n][k]: 2000 x 40 x 1000, 64 x 32 tiles, A's box in 2 parts over a cluster.
struct Multicast : PlainStore<__nv_bfloat16, 8, 0, true> {
  using A_t = __nv_bfloat16;
  using B_t = __nv_bfloat16;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using Out_t = C_t;
  struct Epilogue {};
  static constexpr int BM = 64, BN = 32, BK = 64, STAGES = 10, CONSUMERS = 1, WG_M = 64, CTAS_PER_SM = 1;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232, ACC_CHAINS = 1;
  static constexpr bool rows_at_run_time = false;
  static constexpr int M_UNIT = 1, M_INNER = 2000, TILES_M = 32, N_INNER = 40, TILES_N = 2;
  static constexpr int TILE_GROUPS = 1, TILES = 64;
  static constexpr bool FLAT_ROWS = false;
  static constexpr int K_INNER_TILES = 16, K_ITERS = 16;
  static constexpr int TILE_LOOPS = 0;
  static constexpr dg::hopper::Loop LOOPS[1] = {{1, false, 0}};
  static constexpr int K_LOOPS = 0;
  static constexpr int K_LOOP_SIZE[1] = {1};
  static constexpr CUtensorMapDataType TMA_DTYPE = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr CUtensorMapL2promotion L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  struct A_map {
    static constexpr bool IS_A = true, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = 8192;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{1000, 0, 64, dg::hopper::AT_K, 0},
                                                   {2000, 2000, 32, dg::hopper::AT_MN, 0}};
  };
  struct B_map {
    static constexpr bool IS_A = false, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = 4096;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{1000, 0, 64, dg::hopper::AT_K, 0}, {40, 2000, 32, dg::hopper::AT_MN, 0}};
  };
  static constexpr bool A_ROWS_FOLLOW_M = true;
  static constexpr int A_BOX_ROWS = 64;
  static constexpr bool B_FIRST = false, B_EVICT_FIRST = false, A_EVICT_FIRST = true;
  static constexpr int A_PARTS = 2;
  static constexpr bool C_ALONG_M = true;
  static constexpr int C_VEC = 8;
  static constexpr long long C_SM = 1, C_SN = 2000;
  static constexpr int EPI_COLS = 32, EPI_PITCH = 68, EPI_FLOATS = 2176;
  static constexpr bool PACKED = true;
  static constexpr int PACK_COLS = 32, PACK_PITCH = 72;
  static constexpr int SPLITS = 1, KT_PER_SPLIT = 16, RED_PITCH = 0;
  static constexpr int SMEM_BYTES = 10 * (8192 + 4096) + 2176 * 4 + 2 * 10 * 8 + 1024;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
  __device__ static float pointwise(float t) { return t; }
};

// C[n][k][hw] = A[n][c][hw] B[k][c]: a 1x1 convolution over NCHW, n[32] and hw[3136] walked as one run of rows,
// A MN-major; one consumer warpgroup of 128 rows (two m64 blocks) and one accumulator chain.
struct FlatRows : PlainStore<__nv_bfloat16, 8, 0, true> {
  using A_t = __nv_bfloat16;
  using B_t = __nv_bfloat16;
  using C_t = __nv_bfloat16;
  using C_param = C_t;
  using Out_t = C_t;
  using Epilogue = NoViews;
  static constexpr int BM = 128, BN = 64, BK = 64, STAGES = 4, CONSUMERS = 1, WG_M = 128, CTAS_PER_SM = 2;
  static constexpr int RASTER = 8, PRODUCER_REGS = 40, CONSUMER_REGS = 216, ACC_CHAINS = 1;
  static constexpr bool rows_at_run_time = false;
  static constexpr int M_UNIT = 1, M_INNER = 3136, TILES_M = 784, N_INNER = 64, TILES_N = 1;
  static constexpr int TILE_GROUPS = 1, TILES = 784;
  static constexpr bool FLAT_ROWS = true;
  static constexpr int M_ROWS = 100352;
  static constexpr int K_INNER_TILES = 1, K_ITERS = 1;
  static constexpr int TILE_LOOPS = 1;
  static constexpr dg::hopper::Loop LOOPS[TILE_LOOPS] = {{32, true, 200704}};
  static constexpr int K_LOOPS = 0;
  static constexpr int K_LOOP_SIZE[1] = {1};
  static constexpr CUtensorMapDataType TMA_DTYPE = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr CUtensorMapL2promotion L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  struct A_map {
    static constexpr bool IS_A = true, K_MAJOR = false;
    static constexpr int RANK = 3, BOXES = 2, BOX_BYTES = 8192;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{3136, 0, 64, dg::hopper::AT_MN, 0},
                                                   {64, 6272, 64, dg::hopper::AT_K, 0},
                                                   {32, 401408, 1, dg::hopper::AT_LOOP, 0}};
  };
  struct B_map {
    static constexpr bool IS_A = false, K_MAJOR = true;
    static constexpr int RANK = 2, BOXES = 1, BOX_BYTES = 8192;
    static constexpr dg::hopper::Dim DIMS[RANK] = {{64, 0, 64, dg::hopper::AT_K, 0},
                                                   {64, 128, 64, dg::hopper::AT_MN, 0}};
  };
  static constexpr bool A_ROWS_FOLLOW_M = false;
  static constexpr int A_BOX_ROWS = 0;
  static constexpr bool B_FIRST = false, B_EVICT_FIRST = false, A_EVICT_FIRST = false;
  static constexpr int A_PARTS = 1;
  static constexpr bool C_ALONG_M = true;
  static constexpr int C_VEC = 8;
  static constexpr long long C_SM = 1, C_SN = 3136;
  static constexpr int EPI_COLS = 32, EPI_PITCH = 68, EPI_FLOATS = 2304;
  static constexpr bool PACKED = true;
  static constexpr int PACK_COLS = 64, PACK_PITCH = 72;
  static constexpr int SPLITS = 1, KT_PER_SPLIT = 1, RED_PITCH = 0;
  static constexpr int SMEM_BYTES = 108608;
  __device__ static Out_t* out(C_param* C, const Epilogue&) { return C; }
  __device__ static float pointwise(float t) { return t; }
};

}  // namespace

cudaError_t persistent(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float alpha, float beta,
                       cudaStream_t stream) {
  return dg::hopper::launch_persistent<Persistent>(A, B, C, 0, NoViews{}, alpha, beta, stream);
}

cudaError_t split(const __half* A, const __half* B, __half* C, int64_t m, float alpha, float beta, cudaStream_t stream) {
  return dg::hopper::launch_split<Split>(A, B, C, m, NoViews{}, alpha, beta, stream);
}

cudaError_t multicast(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float alpha, float beta,
                      cudaStream_t stream) {
  return dg::hopper::launch_multicast<Multicast>(A, B, C, 0, Multicast::Epilogue{}, alpha, beta, stream);
}

cudaError_t flat_rows(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float alpha, float beta,
                      cudaStream_t stream) {
  return dg::hopper::launch_persistent<FlatRows>(A, B, C, 0, NoViews{}, alpha, beta, stream);
}
