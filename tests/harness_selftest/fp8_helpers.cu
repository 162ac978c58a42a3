// fp8_helpers.cu -- dg_harness.cuh's e4m3 and scale helpers on the host alone (no GPU needed): both references'
// dequantization on a small problem with blocks (fp8_problem.inc, hand-filled data that the test computes again
// from the definition), the random fills, calc_diff, bench's byte count, and dg_check_problem's refusals.
// tests/test_harness_fp8.py builds and runs it:
//   fp8_helpers               prints one JSON object with what the helpers computed
//   fp8_helpers BROKEN_FIELD  dg_check_problem on kProblem / kBaseline with that field broken: exits 4
#include <string>

#include "dg_harness.cuh"

#define FP8_NAME "fp8_helpers"
#include "fp8_problem.inc"  // selftest_harness.cu's case 9

// The hand-filled data (tests/test_harness_fp8.py has the same formulas): integers in A and B, the largest finite
// e4m3 (448) and the smallest subnormal (2^-9) in A, scales that differ in every block.
static double value_a(int m, int i, int j) {
  if (m == 0 && i == 0 && j == 0) return 448.0;
  if (m == 3 && i == 1 && j == 4) return std::ldexp(1.0, -9);
  return (m + 1) * ((i * 5 + j) % 3 - 1);
}
static double value_b(int i, int j, int n) { return (n + 1) - ((i * 5 + j) % 2) * 3; }
static double value_sa(int bm, int bi, int bj) { return 0.5 + bm + 2 * bi + 0.25 * bj; }
static double value_sb(int bi, int bj) { return 0.25 * (1 + bi + 2 * bj); }

// Every element NaN, then the view's elements at their addresses (written from the table above by hand).
static void fill_hand(DgVerifyState& st) {
  const DgProblem& p = *st.p;
  for (int x = 0; x < DG_SLOTS; ++x) {
    if (!p.present[x]) continue;
    const int es = dg_elem_size(p.dtype[x]);
    st.host[x].resize(static_cast<size_t>(p.span[x] * es));
    for (long long e = 0; e < p.span[x]; ++e) dg_put_bits(st.host[x].data(), es, e, dg_poison_bits(p.dtype[x]));
  }
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j) dg_store(st.host[DG_A].data(), DG_E4M3, m * 10 + i * 5 + j, value_a(m, i, j));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int n = 0; n < 3; ++n) dg_store(st.host[DG_B].data(), DG_E4M3, i * 15 + j * 3 + n, value_b(i, j, n));
  for (int bm = 0; bm < 2; ++bm)
    for (int bi = 0; bi < 2; ++bi)
      for (int bj = 0; bj < 3; ++bj) dg_store(st.host[DG_A_SCALES].data(), DG_F32, 1 + bm + 2 * bi + 5 * bj, value_sa(bm, bi, bj));
  for (int bi = 0; bi < 2; ++bi)
    for (int bj = 0; bj < 2; ++bj) dg_store(st.host[DG_B_SCALES].data(), DG_F32, bi + 2 * bj, value_sb(bi, bj));
}

static void json_list(DgJson& j, const char* key, const std::vector<double>& v) {
  j.begin_array(key);
  for (const double x : v) j.num(nullptr, x);
  j.end_array();
}

int main(int argc, char** argv) {
  g_dg_command = "fp8_helpers";
  if (argc > 1) {
    DgProblem p = kProblem;
    DgBaseline bl = kBaseline;
    const std::string broken = argv[1];
    if (broken == "span") p.span[DG_A_SCALES] = 14;   // the last k block's scale is element 14
    else if (broken == "negative_block") p.dims[3].block[0] = -1;
    else if (broken == "absent_block") {   // no B_scales, yet a block in it
      p.dtype[DG_B] = DG_F32, p.align[DG_B] = 4;
      p.present[DG_B_SCALES] = 0, p.span[DG_B_SCALES] = 0;
      p.dims[2].stride[DG_B_SCALES] = p.dims[3].stride[DG_B_SCALES] = 0;
    }
    else if (broken == "no_scales") {      // A e4m3 without its scales
      p.present[DG_A_SCALES] = 0, p.span[DG_A_SCALES] = 0, p.offset[DG_A_SCALES] = 0;
      for (int d = 0; d < p.ndims; ++d) p.dims[d].stride[DG_A_SCALES] = p.dims[d].block[0] = 0;
    }
    else if (broken == "c_e4m3") p.dtype[DG_C] = DG_E4M3, p.align[DG_C] = 1;
    else if (broken == "scale_dtype") p.dtype[DG_A_SCALES] = DG_BF16, p.align[DG_A_SCALES] = 2;
    else if (broken == "baseline") bl.available = 1, bl.ncalls = 1;
    else return 2;
    dg_check_problem(p, bl);
    return 0;
  }
  dg_check_problem(kProblem, kBaseline);
  DgVerifyState st;
  st.p = &kProblem;
  fill_hand(st);
  const long long count = dg_c_count(kProblem), k_terms = 10;
  std::vector<double> host_ref, host_mag, run_ref, run_split;
  const void* bufs[DG_SLOTS] = {};
  for (int x = 0; x < DG_SLOTS; ++x) bufs[x] = kProblem.present[x] ? st.host[x].data() : nullptr;
  for (long long o = 0; o < count; ++o) {
    double mag, sum, sum_abs, part, part_abs;
    host_ref.push_back(dg_host_reference(st, o, kProblem.alpha, kProblem.beta, &mag));
    host_mag.push_back(mag);
    dg_reference_run<true>(kProblem, bufs, o, 0, k_terms, &sum, &sum_abs);
    run_ref.push_back(sum);
    // Runs that start inside blocks and inside the outer summed letter, as the GPU's chunks do.
    double split = 0.0;
    for (const auto& run : {std::make_pair(0LL, 3LL), std::make_pair(3LL, 7LL), std::make_pair(7LL, 10LL)}) {
      dg_reference_run<true>(kProblem, bufs, o, run.first, run.second, &part, &part_abs);
      split += part;
    }
    run_split.push_back(split);
  }
  DgJson j;
  j.begin();
  json_list(j, "host_ref", host_ref);
  json_list(j, "host_mag", host_mag);
  json_list(j, "run_ref", run_ref);
  json_list(j, "run_split", run_split);

  // e4m3 element access: saturation, NaN, the bits of 448 and of the smallest subnormal.
  unsigned char e[4];
  dg_store(e, DG_E4M3, 0, 1000.0f);
  dg_store(e, DG_E4M3, 1, -1000.0f);
  dg_store(e, DG_E4M3, 2, NAN);
  dg_store(e, DG_E4M3, 3, 0.0017f);   // rounds to 2^-9 (0.00195)
  j.begin_array("e4m3_bits");
  for (const unsigned char b : e) j.integer(nullptr, b);
  j.end_array();
  j.num("e4m3_load_3", dg_load(e, DG_E4M3, 3));
  j.boolean("e4m3_load_nan", std::isnan(dg_load(e, DG_E4M3, 2)));
  j.integer("e4m3_size", dg_elem_size(DG_E4M3));
  j.integer("poison", dg_poison_bits(DG_E4M3));
  j.integer("sentinel", dg_sentinel_bits(DG_E4M3));

  // The random fills, host side (the device fill calls the same dg_store_random).
  const long long n = 1 << 16;
  std::vector<unsigned char> a(n), s(4 * n);
  dg_host_fill_random(a, DG_FILL_DATA, DG_E4M3, n, 1, DG_RNG_A);
  dg_host_fill_random(s, DG_FILL_SCALE, DG_F32, n, 1, DG_RNG_A_SCALES);
  long long nans = 0, subnormal = 0, near_max = 0, wide = 0;
  double largest = 0.0;
  for (long long i = 0; i < n; ++i) {
    const double v = dg_load(a.data(), DG_E4M3, i);
    nans += std::isnan(v);
    subnormal += v != 0.0 && std::fabs(v) < std::ldexp(1.0, -6);
    near_max += std::fabs(v) >= 256.0;
    wide += std::fabs(v) >= 1.0;
    largest = std::max(largest, std::fabs(v));
  }
  j.begin("e4m3_fill");
  j.integer("n", n);
  j.integer("nan", nans);
  j.integer("subnormal", subnormal);
  j.integer("near_max", near_max);
  j.integer("at_least_1", wide);
  j.num("largest", largest);
  j.end();
  double lo = INFINITY, hi = 0.0;
  int exponents = 0;
  for (long long i = 0; i < n; ++i) {
    const double v = dg_load(s.data(), DG_F32, i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    int ex;
    std::frexp(v, &ex);
    exponents |= 1 << (ex + 8);
  }
  j.begin("scale_fill");
  j.num("min", lo);
  j.num("max", hi);
  j.integer("exponents", __builtin_popcount(exponents));
  j.end();
  j.num("amplitude_k1000", dg_additive_amplitude(kProblem, 1000));

  // calc_diff: identical, one element off, all zero, NaN.
  j.num("calc_diff_same", dg_calc_diff(1.0 * 1.0 + 2.0 * 2.0, 2.0 * (1.0 + 4.0)));
  j.num("calc_diff_off", dg_calc_diff(1.0 * 1.0 + 2.0 * 2.2, 1.0 + 1.0 + 4.0 + 2.2 * 2.2));
  j.num("calc_diff_zero", dg_calc_diff(0.0, 0.0));
  j.num("calc_diff_nan", dg_calc_diff(NAN, NAN));
  j.boolean("fp8_inputs", dg_fp8_inputs(kProblem));

  double flops, bytes;
  dg_work(kProblem, &flops, &bytes);
  j.num("flops", flops);
  j.num("bytes", bytes);
  j.end();
  dg_print_json(j.text());
  return 0;
}
