// epilogue_helpers.cu -- dg_harness.cuh's epilogue helpers on the host alone (no GPU needed): the float64
// reference's steps, the elementwise baseline pass's plan, and dg_check_problem's refusals of an inconsistent
// epilogue. tests/test_harness_epilogue.py builds and runs it:
//   epilogue_helpers               prints one JSON object with what the helpers computed
//   epilogue_helpers BROKEN_FIELD  dg_check_problem on kProblem / kBaseline with that field broken: exits 4
#include <string>

#include "dg_harness.cuh"

#define CASE6_NAME "epilogue_helpers"
#include "case6_problem.inc"  // selftest_harness.cu's case 6

// A dense row-major out[b=2, m=3, n=1000] (f32, in place) with bias[b, n]: m cannot merge with n (bias's
// stride 0 on m), b and m cannot either (bias moves on b); size-1 letters drop.
static DgProblem bias_over_bn() {
  DgProblem p = {};
  p.name = "bias_over_bn";
  p.ndims = 5;
  p.nc = 4;
  p.dims[0] = {'b', DG_BATCH, 2, {0, 0, 3000, 0, 1000}};
  p.dims[1] = {'u', DG_BATCH, 1, {0, 0, 7, 0, 0}};
  p.dims[2] = {'m', DG_M, 3, {1, 0, 1000, 0, 0}};
  p.dims[3] = {'n', DG_N, 1000, {0, 1, 1, 0, 1}};
  p.dims[4] = {'k', DG_K, 1, {0, 0}};
  for (const int x : {DG_A, DG_B, DG_C, DG_BIAS}) p.present[x] = 1, p.dtype[x] = DG_F32, p.align[x] = 4;
  p.span[DG_A] = 3, p.span[DG_B] = 1000, p.span[DG_C] = 6000, p.span[DG_BIAS] = 2000;
  p.alpha = 1.0f;
  p.beta = 1.0f;
  p.nsteps = 1;
  p.steps[0] = {"bias[bn]", DG_STEP_BIAS, 0, 0.0f, 0.0f};
  return p;
}

static void json_plan(DgJson& j, const char* key, const DgElementwise& e) {
  j.begin(key);
  j.begin_array("size");
  for (int d = 0; d < e.ndims; ++d) j.integer(nullptr, e.size[d]);
  j.end_array();
  const char* names[DG_EW_BUFFERS] = {"out", "c", "bias", "scale", "residual"};
  j.begin("stride");
  for (int x = 0; x < DG_EW_BUFFERS; ++x) {
    j.begin_array(names[x]);
    for (int d = 0; d < e.ndims; ++d) j.integer(nullptr, e.stride[d][x]);
    j.end_array();
  }
  j.end();
  j.begin_array("slot");
  for (int x = 0; x < DG_EW_BUFFERS; ++x) j.integer(nullptr, e.slot[x]);
  j.end_array();
  j.integer("tiles", e.tiles);
  j.boolean("narrow", e.narrow);
  j.end();
}

int main(int argc, char** argv) {
  g_dg_command = "epilogue_helpers";
  if (argc > 1) {
    DgProblem p = kProblem;
    DgBaseline bl = kBaseline;
    const std::string broken = argv[1];
    if (broken == "kind") p.steps[1].kind = 9;
    else if (broken == "activation") p.steps[2].activation = 0;
    else if (broken == "clamp") p.steps[4].lo = 3.0f;
    else if (broken == "unread") p.steps[0].kind = DG_STEP_ACTIVATION, p.steps[0].activation = DG_TANH;   // bias read by no step
    else if (broken == "absent") {   // a scale step, but no scale buffer
      p.present[DG_SCALE] = 0;
      p.span[DG_SCALE] = p.dims[0].stride[DG_SCALE] = 0;
    }
    else if (broken == "summed") p.dims[2].stride[DG_D] = 1;   // D strides a summed letter
    else if (broken == "span") p.span[DG_RESIDUAL] = 887;
    else if (broken == "elementwise") bl.epilogue = nullptr;
    else if (broken == "steps") p.nsteps = DG_MAX_STEPS + 1;
    else return 2;
    dg_check_problem(p, bl);
    return 0;
  }
  dg_check_problem(kProblem, kBaseline);
  DgJson j;
  j.begin();
  j.str("output", kDgSlotNames[dg_out_slot(kProblem)]);
  j.boolean("needs_elementwise", dg_needs_elementwise(kProblem));
  json_plan(j, "case6", dg_elementwise_plan(kProblem));
  json_plan(j, "bias_over_bn", dg_elementwise_plan(bias_over_bn()));
  // The reference's steps on t = 1.25 at one element: bias 0.5, scale -2, relu, residual 0.75, clamp.
  std::vector<unsigned char> bias(25 * 2), scale(73 * 4), residual(888 * 2);
  dg_store(bias.data(), DG_F16, 1, 0.5f);
  dg_store(scale.data(), DG_F32, 0, -2.0f);
  dg_store(residual.data(), DG_F16, 0, 0.75f);
  const void* bufs[DG_SLOTS] = {nullptr, nullptr, nullptr, nullptr, bias.data(), scale.data(), residual.data()};
  const long long at[DG_SLOTS] = {0, 0, 0, 0, 1, 0, 0};
  double mag = 2.0;
  j.num("steps_t", dg_reference_epilogue(kProblem, bufs, at, 1.25, &mag));   // relu(-3.5) + 0.75
  j.num("steps_mag", mag);                                                   // ((2 + 0.5) * 2 * 1 + 0.75) * 1
  mag = 1.0;
  j.num("steps_nan", dg_reference_epilogue(kProblem, bufs, at, NAN, &mag));  // NaN through relu and clamp
  j.begin_array("activations_at_1");
  for (int a = DG_RELU; a <= DG_TANH; ++a) j.num(nullptr, dg_activation(a, 1.0));
  j.end_array();
  j.end();
  dg_print_json(j.text());
  return 0;
}
