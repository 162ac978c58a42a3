// fp8_with_harness.cu -- compile-only: dg_cublaslt_fp8.cuh in one translation unit with dg_harness.cuh (no name
// clashes; its copies of the harness's slots and roles agree), and its alternative instantiated over DgAltBaseline
// and DgProblem as a generated harness constructs it (baseline.fp8_alternative renders the arguments).
#include "dg_harness.cuh"
#include "dg_cublaslt_fp8.cuh"

static_assert(DG_LT_FP8_SLOT_A == +DG_A && DG_LT_FP8_SLOT_B == +DG_B && DG_LT_FP8_SLOT_C == +DG_C &&
                  DG_LT_FP8_SLOT_D == +DG_D,
              "slots");
#ifdef DG_A_SCALES
static_assert(DG_LT_FP8_SLOT_A_SCALES == +DG_A_SCALES && DG_LT_FP8_SLOT_B_SCALES == +DG_B_SCALES, "scale slots");
#endif

// DeepGEMM's format on a row-major A [m, k], B [n, k], C [m, n]: A_scales [m, k/128] m-contiguous, B_scales
// [n/128, k/128] row-major.
DgAltBaseline* dg_lt_fp8_alternative_smoke() {
  static DgCublasLtFp8Alternative<DgAltBaseline, DgProblem> alternative(
      {{'m', 1LL, 0LL, 1LL, 0LL}, {'n', 0LL, 128LL, 0LL, 128LL}, {'k', 128LL, 128LL, 4096LL, 1LL}},
      {{DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128, "A scales VEC128_32F (1x128), B scales BLK128x128_32F (128x128)"},
       {DG_LT_FP8_OUTER_VEC, DG_LT_FP8_OUTER_VEC, "OUTER_VEC_32F x OUTER_VEC_32F (nearest)"}},
      DgLtFp8Scales{0LL, 0LL});
  return &alternative;
}
