// with_harness.cu -- compile-only: dg_cublaslt.cuh in one translation unit with dg_harness.cuh (no name
// clashes; its copies of the harness's dtype ids, scale bits, slots and roles agree), and its DgCublasLtAlternative
// and DgCublasLtDenseWeights instantiated over DgAltBaseline and DgProblem as a generated harness constructs them.
#include "dg_harness.cuh"
#include "dg_cublaslt.cuh"

static_assert(DG_LT_F32 == +DG_F32 && DG_LT_F16 == +DG_F16 && DG_LT_BF16 == +DG_BF16, "dtype ids");
static_assert(DG_LT_SCALE_M == +DG_SCALE_M && DG_LT_SCALE_N == +DG_SCALE_N && DG_LT_SCALE_K == +DG_SCALE_K &&
                  DG_LT_SCALE_BATCH == +DG_SCALE_BATCH,
              "scale bits");
static_assert(DG_LT_SLOT_A == +DG_A && DG_LT_SLOT_B == +DG_B && DG_LT_SLOT_C == +DG_C && DG_LT_SLOT_D == +DG_D &&
                  DG_LT_SLOT_BIAS == +DG_BIAS,
              "slots");
static_assert(DG_LT_ROLE_BATCH == +DG_BATCH && DG_LT_ROLE_M == +DG_M && DG_LT_ROLE_N == +DG_N && DG_LT_ROLE_K == +DG_K,
              "roles");

// What baseline.lt_alternative renders for an nn.Linear layer with bias and GELU (tanh).
DgAltBaseline* dg_lt_alternative_smoke() {
  static DgCublasLtAlternative<DgAltBaseline, DgProblem> alternative(
      {{"C^T=B^TA m=n[14336] n=m[4096] k=k[4096]", 1, 1, 0, 14336LL, 4096LL, 4096LL, 4096LL, 4096LL, 14336LL,
        14336LL, 0LL, 0LL, 0LL, 0LL, 1LL, 2, 2, 2, DG_LT_EPILOGUE_GELU_BIAS, 0LL, 1, 0u}},
      0LL);
  return &alternative;
}

// What baseline.dense_weights_alternative renders for integer weights.
DgAltBaseline* dg_lt_dense_weights_smoke() {
  static DgCublasLtDenseWeights<DgAltBaseline, DgProblem> alternative;
  return &alternative;
}

std::string dg_lt_smoke(const DgLtCall& call, long long m) {
  DgLtApi lt;
  void* handle = nullptr;
  std::string why = dg_lt_open(&lt, &handle);
  if (!why.empty()) return why;
  DgLtPlan plan;
  const DgLtPointers p{nullptr, nullptr, nullptr, nullptr, nullptr};
  why = dg_lt_prepare(lt, handle, dg_lt_at_size(call, m, call.m), p, 32u << 20, &plan);
  if (why.empty()) why = dg_lt_run(lt, handle, &plan, p, 1.0f, 0.0f, nullptr, 0, nullptr);
  dg_lt_destroy(lt, &plan);
  dg_lt_close(lt, handle);
  return why;
}
