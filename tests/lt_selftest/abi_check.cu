// abi_check.cu -- compile-only: the values and types dg_cublaslt.cuh and dg_cublaslt_fp8.cuh declare for themselves, against a real
// cublasLt.h (nvcc -std=c++17 -c tests/lt_selftest/abi_check.cu -I templates -I <cuBLAS include dir>).
// Nothing needs it to build; it keeps the copies honest (tests/test_baseline_lt.py runs it where the
// nvidia-cublas wheel's headers are installed).
#include <cublasLt.h>

#include <cstddef>
#include <type_traits>

#include "dg_cublaslt.cuh"
#include "dg_cublaslt_fp8.cuh"

namespace abi = dg_lt_abi;

#define DG_SAME(ours, theirs) static_assert(static_cast<long>(ours) == static_cast<long>(theirs), #theirs)
DG_SAME(abi::R_32F, CUDA_R_32F);
DG_SAME(abi::R_16F, CUDA_R_16F);
DG_SAME(abi::R_16BF, CUDA_R_16BF);
DG_SAME(abi::COMPUTE_32F, CUBLAS_COMPUTE_32F);
DG_SAME(abi::OP_N, CUBLAS_OP_N);
DG_SAME(abi::OP_T, CUBLAS_OP_T);
DG_SAME(abi::DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
DG_SAME(abi::DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
DG_SAME(abi::DESC_EPILOGUE, CUBLASLT_MATMUL_DESC_EPILOGUE);
DG_SAME(abi::DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
DG_SAME(abi::DESC_BIAS_BATCH_STRIDE, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE);
DG_SAME(abi::DESC_BIAS_DATA_TYPE, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
DG_SAME(abi::LAYOUT_BATCH_COUNT, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
DG_SAME(abi::LAYOUT_STRIDED_BATCH_OFFSET, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
DG_SAME(abi::PREF_MAX_WORKSPACE_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
DG_SAME(abi::PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
DG_SAME(abi::PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
DG_SAME(abi::PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
DG_SAME(abi::PREF_MIN_ALIGNMENT_D_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
DG_SAME(DG_LT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_DEFAULT);
DG_SAME(DG_LT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU);
DG_SAME(DG_LT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BIAS);
DG_SAME(DG_LT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS);
DG_SAME(DG_LT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU);
DG_SAME(DG_LT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS);
// dg_cublaslt_fp8.cuh: the scale modes, which cublasLt.h has from cuBLAS 12.9 on.
#if CUBLAS_VERSION >= 120900
DG_SAME(dg_lt_fp8_abi::R_8F_E4M3, CUDA_R_8F_E4M3);
DG_SAME(dg_lt_fp8_abi::DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER);
DG_SAME(dg_lt_fp8_abi::DESC_B_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER);
DG_SAME(dg_lt_fp8_abi::DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_A_SCALE_MODE);
DG_SAME(dg_lt_fp8_abi::DESC_B_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE);
DG_SAME(DG_LT_FP8_SCALAR, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
DG_SAME(DG_LT_FP8_OUTER_VEC, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
DG_SAME(DG_LT_FP8_VEC128, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
DG_SAME(DG_LT_FP8_BLK128x128, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
static_assert(sizeof(cublasLtMatmulMatrixScale_t) == sizeof(int32_t), "the scale modes are set as int32_t");
#endif

static_assert(sizeof(abi::Algo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
static_assert(sizeof(abi::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t) &&
                  offsetof(abi::HeuristicResult, workspaceSize) ==
                      offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                  offsetof(abi::HeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state) &&
                  sizeof(cublasStatus_t) == sizeof(int),
              "cublasLtMatmulHeuristicResult_t");
// The entry points are called through pointer types with handles and descriptors as void* and enums as int.
static_assert(sizeof(cublasLtHandle_t) == sizeof(void*) && sizeof(cublasLtMatmulDesc_t) == sizeof(void*) &&
                  sizeof(cublasLtMatrixLayout_t) == sizeof(void*) &&
                  sizeof(cublasLtMatmulPreference_t) == sizeof(void*),
              "handles");
static_assert(sizeof(cublasLtMatmulDescAttributes_t) == sizeof(int) && sizeof(cudaDataType_t) == sizeof(int) &&
                  sizeof(cublasComputeType_t) == sizeof(int) && sizeof(cublasLtMatrixLayoutAttribute_t) == sizeof(int) &&
                  sizeof(cublasLtMatmulPreferenceAttributes_t) == sizeof(int),
              "enums");
static_assert(std::is_same<decltype(&cublasLtMatrixLayoutCreate),
                           cublasStatus_t (*)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t)>::value,
              "cublasLtMatrixLayoutCreate");
static_assert(std::is_same<decltype(&cublasLtMatmulDescCreate),
                           cublasStatus_t (*)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t)>::value,
              "cublasLtMatmulDescCreate");
static_assert(std::is_same<decltype(&cublasLtMatmulDescSetAttribute),
                           cublasStatus_t (*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                                              size_t)>::value,
              "cublasLtMatmulDescSetAttribute");
static_assert(std::is_same<decltype(&cublasLtMatmulAlgoGetHeuristic),
                           cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t*,
                                              int*)>::value,
              "cublasLtMatmulAlgoGetHeuristic");
static_assert(std::is_same<decltype(&cublasLtMatmul),
                           cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                              cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                                              const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t)>::value,
              "cublasLtMatmul");
