// run_time_helpers.cu -- dg_harness.cuh's run-time-size helpers on the host alone (no GPU needed): the sizes
// verify and bench run, the problem and the cuBLAS baseline at one size, and dg_check_problem's refusals.
// tests/test_harness_dynamic.py builds and runs it:
//   run_time_helpers              prints one JSON object with what the helpers computed
//   run_time_helpers BROKEN_FIELD  dg_check_problem on kProblem / kBaseline with that field broken: exits 4
#include <string>

#include "dg_harness.cuh"

// selftest_harness.cu's case 5: C[m, n=24] = A[m, k=33] B[k, n], m in 2..40, the baseline through dense temps.
static const long long kEdges[] = {2, 4, 5, 16, 17, 40};
static const DgProblem kProblem = {
    "run_time_helpers", "sm_90a", 3,
    {{'m', DG_M, 40, {40, 0, 32}}, {'n', DG_N, 24, {0, 1, 1}}, {'k', DG_K, 33, {1, 24, 0}}},
    2, {1, 1, 1}, {5, 0, 3}, {1598, 792, 1275}, {DG_F16, DG_F16, DG_F16}, {2, 2, 2}, 1.5f, 0.5f, 1e-2, 0, {},
    'm', 2, 6, kEdges};
static const DgBaseline kBaseline = {
    1, "copy+cublas", {1, 0, 1},
    {{2, {40, 33}, {40, 1}, 1u << 0}, {}, {2, {40, 24}, {32, 1}, 1u << 0}},
    1, {{"C^T=BA", 1, 0, 0, 24, 40, 33, 24, 33, 24, 0, 0, 0, 1, DG_SCALE_N}}};

static void json_sizes(DgJson& j, const char* key, const std::vector<long long>& sizes) {
  j.begin_array(key);
  for (const long long m : sizes) j.integer(nullptr, m);
  j.end_array();
}

int main(int argc, char** argv) {
  g_dg_command = "run_time_helpers";
  if (argc > 1) {
    DgProblem p = kProblem;
    DgBaseline bl = kBaseline;
    const std::string broken = argv[1];
    static const long long unordered[] = {2, 17, 16, 40};
    if (broken == "edges") p.edges = unordered, p.nedges = 4;
    else if (broken == "lo") p.run_time_lo = 41;
    else if (broken == "letter") p.run_time_letter = 'k';
    else if (broken == "view") bl.view[DG_A].size[0] = 20;   // not a multiple of the largest size
    else if (broken == "call") bl.calls[0].scaled |= DG_SCALE_K;
    else if (broken == "fixed") p.run_time_letter = '\0';
    else return 2;
    dg_check_problem(p, bl);
    return 0;
  }
  dg_check_problem(kProblem, kBaseline);
  DgOptions opt;
  DgJson j;
  j.begin();
  json_sizes(j, "verify_sizes_seed1", dg_verify_sizes(kProblem, 1));
  json_sizes(j, "verify_sizes_seed2", dg_verify_sizes(kProblem, 2));
  json_sizes(j, "bench_sizes", dg_bench_sizes(kProblem));
  opt.sizes = {40, 3, 3};
  json_sizes(j, "asked_sizes", dg_sizes(kProblem, opt, true));
  json_sizes(j, "fixed_sizes", dg_sizes(dg_problem_at(DgProblem{}, 0), opt, true));
  const DgProblem at = dg_problem_at(kProblem, 3);
  j.integer("m_at_3", at.dims[0].size);
  j.integer("c_count_at_3", dg_c_count(at));
  const DgBaseline bl = dg_baseline_at(kBaseline, 3, 40);
  j.integer("view_a_rows_at_3", bl.view[DG_A].size[0]);
  j.integer("view_c_rows_at_3", bl.view[DG_C].size[0]);
  j.integer("view_c_cols_at_3", bl.view[DG_C].size[1]);
  j.integer("call_m_at_3", bl.calls[0].m);
  j.integer("call_n_at_3", bl.calls[0].n);
  j.integer("call_ldy_at_3", bl.calls[0].ldy);
  j.end();
  dg_print_json(j.text());
  return 0;
}
