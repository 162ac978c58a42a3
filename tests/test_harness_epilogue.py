"""The verify/bench harness for a spec with an epilogue and an output view D (issue 8): the generated tables
(one entry a slot: A, B, C, D, bias, scale, residual) and launch wrapper, the baseline planned on the output
view, the harness's host-side epilogue helpers, its compile against a hand-written kernel with the epilogue
entry point, and on a GPU the harness's self-test cases for epilogues (planted bugs included).

The harness context is built through render.base_context, not `gen`: these tests do not depend on a kernel
family rendering epilogues."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import gemm_spec, needs_elementwise, plan_baseline
from dgemm_cli.errors import SpecError
from dgemm_cli.render import HARNESS, _baseline_ctx, _harness_ctx, base_context, environment, template_dir
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, gpu_present
from .test_harness_dynamic import _compile, _nvcc, _run  # nvcc with -Wall, one JSON line back

# selftest_harness.cu's case 6 with m sized at run time: f16, A and C padded and offset, D column-major with
# an offset, bias over n (offset), scale over m (f32, stride 2), relu, a dense residual, a clamp.
STUB_SPEC = {
    "name": "epistub", "dtype": "f16", "gemm": {"m": {"min": 2, "max": 40}, "n": 24, "k": 33},
    "operands": {"A": {"strides": [40, 1], "offset": 5}, "C": {"strides": [32, 1], "offset": 3},
                 "D": {"strides": [1, 40], "offset": 7}},
    "alpha": 1.5, "beta": 0.5,
    "epilogue": [{"bias": {"letters": "n", "offset": 1}}, {"scale": {"letters": "m", "dtype": "f32", "strides": [2]}},
                 {"activation": "relu"}, {"residual": {}}, {"clamp": [-2.5, 2.5]}],
}
EDGES = [2, 9, 10, 40]

# The kernel under test: naive and correct, with epistub's C API (the header is rendered from the spec).
STUB_KERNEL = r"""
#include "epistub.h"

__global__ void epistub_kernel(const __half* A, const __half* B, const __half* C, __half* D, const __half* bias,
                               const float* scale, const __half* residual, long long m, float alpha, float beta) {
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= m * 24) return;
  const long long i = o / 24, j = o % 24;
  float acc = 0.0f;
  for (int k = 0; k < 33; ++k) acc += __half2float(A[5 + i * 40 + k]) * __half2float(B[k * 24 + j]);
  float t = alpha * acc;
  if (beta != 0.0f) t += beta * __half2float(C[3 + i * 32 + j]);
  t += __half2float(bias[1 + j]);
  t *= scale[2 * i];
  t = t < 0.0f ? 0.0f : t;
  t += __half2float(residual[i * 24 + j]);
  t = t < -2.5f ? -2.5f : (t > 2.5f ? 2.5f : t);
  D[7 + i + j * 40] = __float2half_rn(t);
}

static bool misaligned(const void* p, unsigned align) { return reinterpret_cast<uintptr_t>(p) % align != 0; }

extern "C" cudaError_t epistub(const __half* A, const __half* B, const __half* C, __half* D, const __half* bias,
                               const float* scale, const __half* residual, int64_t m, float alpha, float beta,
                               cudaStream_t stream) {
  if (!A || !B || (!C && beta != 0.0f) || !D || !bias || !scale || !residual || m < 2 || m > 40)
    return cudaErrorInvalidValue;
  if (misaligned(A, 2) || misaligned(B, 2) || misaligned(C, 2) || misaligned(D, 2) || misaligned(bias, 2) ||
      misaligned(scale, 4) || misaligned(residual, 2))
    return cudaErrorInvalidValue;
  epistub_kernel<<<static_cast<unsigned>((m * 24 + 127) / 128), 128, 0, stream>>>(A, B, C, D, bias, scale, residual,
                                                                                 m, alpha, beta);
  return cudaGetLastError();
}
"""


def _context(spec_doc: dict, edges: list[int] | None = EDGES) -> dict:
    """The shared render context, with the run-time size's edges set here."""
    spec = parse_spec(spec_doc)
    views = analyse(spec)
    # No kernels: the header and harness are rendered for a hand-written stub, so there are no routes to describe.
    k = {**base_context(spec, views, plan_baseline(views), get_arch("sm_90a")), "routes": []}
    if spec.dynamic:
        (letter, (lo, hi)), = spec.dynamic.items()
        k["dyn"] = {**(k.get("dyn") or {}), "letter": letter, "lo": lo, "hi": hi, "edges": edges}
    return k


def _harness_source(spec_doc: dict) -> str:
    return environment().get_template("harness.cu.j2").render(k=_context(spec_doc))


# ------------------------------------------------------------------------------------------------
# the generated tables and launch wrapper


def test_the_tables_give_every_slot_its_strides_offset_span_dtype_and_align():
    h = _harness_ctx(parse_spec(STUB_SPEC))
    # Every slot but A_scales and B_scales (an e4m3 input's).
    assert h["output"] == "D" and h["nslots"] == 7 and h["present"] == [1] * 7 + [0, 0, 0]
    (m, n, k) = h["dims"]
    # per slot: A, B, C | D, bias, scale, residual; 0 where a slot lacks the letter (bias lacks m, scale n).
    assert (m["strides"], m["extra_strides"]) == ([40, 0, 32], [1, 0, 2, 24])
    assert (n["strides"], n["extra_strides"]) == ([0, 1, 1], [40, 1, 0, 1])
    assert (k["strides"], k["extra_strides"]) == ([1, 24, 0], [0, 0, 0, 0])
    assert h["offsets"] == [5, 0, 3, 7, 1, 0, 0, 0, 0, 0]
    assert h["spans"] == [5 + 39 * 40 + 33, 33 * 24, 3 + 39 * 32 + 24, 7 + 39 + 23 * 40 + 1, 25, 79, 40 * 24, 0, 0, 0]
    assert h["dtypes"] == ["DG_F16"] * 5 + ["DG_F32", "DG_F16", "0", "0", "0"]
    assert h["aligns"] == [2, 2, 2, 2, 2, 4, 2, 0, 0, 0]
    assert [(s["text"], s["kind"], s["activation"]) for s in h["steps"]] == [
        ("bias[n]", "DG_STEP_BIAS", "0"), ("scale[m]", "DG_STEP_SCALE", "0"),
        ("relu", "DG_STEP_ACTIVATION", "DG_RELU"), ("residual[mn]", "DG_STEP_RESIDUAL", "0"),
        ("clamp[-2.5, 2.5]", "DG_STEP_CLAMP", "0")]
    assert (h["steps"][4]["lo"], h["steps"][4]["hi"]) == ("-2.5f", "2.5f")


def test_the_launch_wrapper_passes_every_pointer_in_the_c_apis_order():
    text = _harness_source(STUB_SPEC)
    assert ("void *const A = bufs[DG_A], *const B = bufs[DG_B], *const C = bufs[DG_C], *const D = bufs[DG_D], "
            "*const bias = bufs[DG_BIAS], *const scale = bufs[DG_SCALE], *const residual = bufs[DG_RESIDUAL];") in text
    # C is only read when there is D; m comes after the pointers.
    assert ("epistub(static_cast<const __half*>(A), static_cast<const __half*>(B), static_cast<const __half*>(C), "
            "static_cast<__half*>(D), static_cast<const __half*>(bias), static_cast<const float*>(scale), "
            "static_cast<const __half*>(residual), m, alpha, beta, stream);") in text
    assert "{'m', DG_M, 40LL, { 40LL, 0LL, 32LL, 1LL, 0LL, 2LL, 24LL } }," in text
    assert "    { 1, 1, 1, 1, 1, 1, 1 },\n" in text and "    { 5LL, 0LL, 3LL, 7LL, 1LL, 0LL, 0LL },\n" in text
    assert '        {"clamp[-2.5, 2.5]", DG_STEP_CLAMP, 0, -2.5f, 2.5f},\n' in text
    assert "    5,\n" in text and "'m', 2LL, 4, kRunTimeEdges," in text
    assert '    "elementwise",' in text  # kBaseline's epilogue


def test_slots_past_the_last_present_one_are_left_out():
    """An in-place bias + activation: C is written (not const), slots up to bias listed, D absent (zeros)."""
    doc = {"name": "lin", "dtype": "bf16", "gemm": {"m": 64, "n": 96, "k": 80}, "operands": {"B": {"layout": "col"}},
           "epilogue": [{"bias": {"letters": "n"}}, {"activation": "gelu_tanh"}]}
    h = _harness_ctx(parse_spec(doc))
    assert h["output"] == "C" and h["nslots"] == 5 and h["present"] == [1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    assert h["dtypes"][3] == "0" and h["spans"][3] == 0 and h["aligns"][3] == 0
    text = _harness_source(doc)
    assert "{'n', DG_N, 96LL, { 0LL, 80LL, 1LL, 0LL, 1LL } }," in text and "    { 1, 1, 1, 0, 1 },\n" in text
    assert ("lin(static_cast<const __nv_bfloat16*>(A), static_cast<const __nv_bfloat16*>(B), "
            "static_cast<__nv_bfloat16*>(C), static_cast<const __nv_bfloat16*>(bias), alpha, beta, stream);") in text


def test_a_plain_spec_keeps_three_slots_and_no_epilogue():
    doc = {"name": "plain", "dtype": "f16", "gemm": {"m": 40, "n": 24, "k": 33}}
    h = _harness_ctx(parse_spec(doc))
    assert h["nslots"] == 3 and h["steps"] == [] and h["output"] == "C"
    text = _harness_source(doc)
    assert "{'m', DG_M, 40LL, { 33LL, 0LL, 24LL } }," in text and "    { 1, 1, 1 },\n" in text
    for word in ("DG_STEP", "elementwise", "bufs[DG_D]", "0, {}"):
        assert word not in text
    bl = _baseline_ctx(plan_baseline(analyse(parse_spec(doc))))
    assert "epilogue" not in bl and "alternative" not in bl  # plan.json's baseline as before


def test_more_steps_than_the_harness_holds_is_a_spec_error():
    doc = {"name": "many", "gemm": {"m": 8, "n": 8, "k": 8}, "epilogue": [{"clamp": [-1, 1]}] * 17}
    with pytest.raises(SpecError, match="epilogue: 17 steps"):
        _harness_ctx(parse_spec(doc))


# ------------------------------------------------------------------------------------------------
# the baseline: the product into the output view, then the elementwise pass


def test_the_baseline_gemm_writes_d_and_the_elementwise_pass_follows():
    spec = parse_spec(STUB_SPEC)
    bl = plan_baseline(analyse(spec))
    assert bl.available and bl.kind == "cublas" and bl.epilogue == "elementwise"
    # D column-major (ld 40), C row-major (ld 32): the GEMM's output is D's view.
    assert all(c.desc.startswith("D") and c.ldc == 40 for c in bl.calls)
    assert bl.views[2].stride == (1, 40)
    assert gemm_spec(spec).C.strides == (1, 40) and gemm_spec(spec).D is None


@pytest.mark.parametrize("beta, epilogue, want", [
    (0.0, None, None),                         # D alone, C not read: cuBLAS writes D, nothing follows
    (1.0, None, "elementwise"),                # D with beta: the pass adds beta * C
    (0.0, [{"activation": "silu"}], "elementwise"),
])
def test_when_the_elementwise_pass_is_needed(beta, epilogue, want):
    doc = {"name": "d", "gemm": {"m": 16, "n": 32, "k": 8}, "operands": {"D": {"layout": "col"}}, "beta": beta,
           **({"epilogue": epilogue} if epilogue else {})}
    spec = parse_spec(doc)
    assert plan_baseline(analyse(spec)).epilogue == want
    assert needs_elementwise(spec) == (want is not None)


def test_a_plain_spec_plans_exactly_as_before():
    spec = parse_spec({"name": "p", "gemm": {"m": 16, "n": 32, "k": 8}})
    assert gemm_spec(spec) is spec and plan_baseline(analyse(spec)).epilogue is None


# ------------------------------------------------------------------------------------------------
# the tables describe the semantics: walked as the reference walks them, they give numpy's answer


def _walk_tables(h: dict, buffers: dict[str, np.ndarray], alpha: float, beta: float) -> np.ndarray:
    """dg_harness.cuh's reference, from the tables alone: t = alpha * sum + beta * C at the addresses
    offset + sum idx * stride, then the steps (bias and residual added, scale multiplied, relu)."""
    slots = ("A", "B", "C", "D", "bias", "scale", "residual")
    dims, nc = h["dims"], h["nc"]

    def addr(x: str, idx) -> int:
        s = slots.index(x)
        return h["offsets"][s] + sum(i * (d["strides"] + d["extra_strides"])[s] for i, d in zip(idx, dims))

    out = np.zeros([d["size"] for d in dims[:nc]])
    for cidx in itertools.product(*(range(d["size"]) for d in dims[:nc])):
        acc = sum(buffers["A"][addr("A", cidx + kidx)] * buffers["B"][addr("B", cidx + kidx)]
                  for kidx in itertools.product(*(range(d["size"]) for d in dims[nc:])))
        t = alpha * acc + beta * buffers["C"][addr("C", cidx)]
        for st in h["steps"]:
            name = st["text"].split("[")[0]
            if name in ("bias", "residual"):
                t += buffers[name][addr(name, cidx)]
            elif name == "scale":
                t *= buffers[name][addr(name, cidx)]
            elif name == "relu":
                t = max(t, 0.0)
        out[cidx] = t
    return out


def _strided(buf: np.ndarray, view) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(buf[view.offset:], view.sizes, [s * buf.itemsize for s in view.strides])


def test_the_tables_walked_give_numpys_answer_with_broadcast_epilogue_views():
    """bias over (b, n) and scale over m, broadcast over the letters they lack; D with its own layout."""
    doc = {"name": "bc", "contraction": "bmk,kn->bmn", "sizes": {"b": 2, "m": 3, "n": 4, "k": 5},
           "operands": {"C": {"strides": [20, 5, 1]}, "D": {"strides": [1, 2, 6], "offset": 3}},
           "alpha": 0.5, "beta": 2.0,
           "epilogue": [{"bias": {"letters": "nb"}}, {"scale": {"letters": "m", "strides": [3], "offset": 1}},
                        {"activation": "relu"}, {"residual": {"letters": "nmb"}}]}
    spec = parse_spec(doc)
    h = _harness_ctx(spec)
    rng = np.random.default_rng(7)
    views = {op.name: op for op in (*spec.operands, *spec.extra_operands)}
    buffers = {x: rng.uniform(-1, 1, v.span) for x, v in views.items()}
    got = _walk_tables(h, buffers, spec.alpha, spec.beta)
    a, b, c = (_strided(buffers[x], views[x]) for x in "ABC")
    t = spec.alpha * np.einsum("bmk,kn->bmn", a, b) + spec.beta * c
    bias = _strided(buffers["bias"], views["bias"])        # [n, b]
    scale = _strided(buffers["scale"], views["scale"])     # [m]
    residual = _strided(buffers["residual"], views["residual"])  # [n, m, b]
    t = np.maximum((t + bias.T[:, None, :]) * scale[None, :, None], 0.0) + residual.transpose(2, 1, 0)
    np.testing.assert_allclose(got, t, rtol=1e-12, atol=1e-12)
    assert h["output"] == "D" and views["D"].strides == (1, 2, 6)


# ------------------------------------------------------------------------------------------------
# compiled: the harness's host helpers, the rendered harness against a stub kernel, the GPU self-test


@pytest.mark.slow
def test_the_epilogue_helpers(tmp_path):
    """The reference's steps, the elementwise pass's plan (merged dims, innermost by the output's stride) and
    dg_check_problem's refusals of an inconsistent epilogue (host code only: no GPU needed)."""
    exe = tmp_path / "epilogue_helpers"
    _compile(_nvcc(), [REPO / "tests" / "harness_selftest" / "epilogue_helpers.cu"], exe, template_dir())
    rc, got = _run(exe)
    assert rc == 0, got
    assert got["output"] == "D" and got["needs_elementwise"]
    # D column-major: m innermost (stride 1); bias moves along n only, scale along m only, C row-major.
    case6 = got["case6"]
    assert case6["size"] == [24, 37] and case6["slot"] == [3, 2, 4, 5, 6]
    assert case6["stride"] == {"out": [40, 1], "c": [1, 32], "bias": [1, 0], "scale": [0, 2], "residual": [37, 1]}
    # b, m and n stay apart (bias moves on b and n, not m); the size-1 letter drops; no C, scale, residual.
    bn = got["bias_over_bn"]
    assert bn["size"] == [2, 3, 1000] and bn["slot"] == [2, -1, 4, -1, -1]
    assert bn["stride"]["out"] == [3000, 1000, 1] and bn["stride"]["bias"] == [1000, 0, 1]
    assert bn["tiles"] == 6 and bn["narrow"]
    assert (got["steps_t"], got["steps_mag"], got["steps_nan"]) == (0.75, 5.75, "nan")
    want = [1.0, 0.8411919906082768, 0.841344746068543, 0.7310585786300049, 0.7310585786300049, 0.7615941559557649]
    np.testing.assert_allclose(got["activations_at_1"], want, rtol=1e-14)
    for broken, words in (("kind", "step 1 has kind 9"), ("activation", "step 2 has activation 0"),
                          ("clamp", "clamps to [3, 2.5]"), ("unread", "slot bias is present but 0 steps read it"),
                          ("absent", "slot scale is not present but 1 steps read it"),
                          ("summed", "summed letter 'k' has a stride in D"),
                          ("span", "residual reaches elements [0, 887] but span is 887"),
                          ("elementwise", "a problem that needs the elementwise pass"), ("steps", "17 epilogue steps")):
        rc, report = _run(exe, broken)
        assert rc == 4 and words in report["error"], (broken, report)


def _build_stub(tmp_path: Path) -> Path:
    nvcc = _nvcc()
    env = environment()
    k = _context(STUB_SPEC)
    (tmp_path / "epistub.h").write_text(env.get_template("header.h.j2").render(k=k))
    (tmp_path / "epistub_harness.cu").write_text(env.get_template("harness.cu.j2").render(k=k))
    (tmp_path / HARNESS).write_text((template_dir() / HARNESS).read_text())
    (tmp_path / "epistub.cu").write_text(STUB_KERNEL)
    exe = tmp_path / "epistub_harness"
    _compile(nvcc, [tmp_path / "epistub_harness.cu", tmp_path / "epistub.cu"], exe, tmp_path)
    return exe


@pytest.mark.slow
def test_the_harness_compiles_with_an_epilogue_entry_point(tmp_path):
    """The rendered harness and header against a hand-written kernel with every extra pointer and m: -Wall
    clean, usage errors before any GPU is touched, and on a GPU verify passes and bench names the epilogue."""
    exe = _build_stub(tmp_path)
    rc, report = _run(exe, "verify", "--m", "1")
    assert rc == 2 and "--m: 1 is outside the run-time range 2..40 of 'm'" in report["error"]
    if not gpu_present():
        rc, report = _run(exe, "verify")
        assert rc == 3 and "no CUDA GPU" in report["error"]
        return
    rc, report = _run(exe, "verify", "--repeat", "2")
    assert rc == 0 and report["passed"], report
    assert report["output"] == "D" and report["epilogue"] == ["bias[n]", "scale[m]", "relu", "residual[mn]",
                                                               "clamp[-2.5, 2.5]"]
    assert report["api_null_rejected"] and report["api_misaligned_rejected"] and report["api_null_c_accepted"]
    assert len(report["api_probes"]) == 14  # 7 pointers, null and misaligned
    assert any(r["nan_input"] for r in report["runs"]) and all(r["c_written"] == 0 for r in report["runs"])
    rc, report = _run(exe, "bench", "--reps", "5", "--m", "2,40")
    assert rc == 0 and report["baseline_epilogue"] == "elementwise", report
    assert report["baseline_formulation"].startswith("D") and [r["m"] for r in report["m_rows"]] == [2, 40]


SELFTEST = REPO / "tests" / "harness_selftest" / "selftest_harness.cu"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("variant, args, want_rc, check", [
    ("6", ["verify", "--repeat", "2"], 0, lambda r: r["passed"] and r["output"] == "D"),
    ("6", ["bench", "--reps", "5"], 0, lambda r: r["baseline_epilogue"] == "elementwise" and r["baseline_us"]),
    ("7", ["verify", "--m", "2,9,40"], 0, lambda r: [c["m"] for c in r["m_cases"]] == [2, 9, 40]),
    ("7", ["bench", "--reps", "5", "--m", "2,40"], 0, lambda r: all(x["baseline_epilogue"] for x in r["m_rows"])),
    ("8", ["verify"], 0, lambda r: r["passed"] and r["output"] == "C"),
    ("8", ["bench", "--reps", "5"], 0, lambda r: r["baseline_epilogue"] == "elementwise"),
    # Forgets the bias: every output is off.
    ("6 -DSELFTEST_BROKEN=6", ["verify", "--seeds", "1"], 1, lambda r: all(x["bad_elements"] for x in r["runs"])),
    ("7 -DSELFTEST_BROKEN=6", ["verify", "--seeds", "1", "--m", "2,40"], 1, lambda r: not r["passed"]),
    ("8 -DSELFTEST_BROKEN=6", ["verify", "--seeds", "1"], 1, lambda r: not r["passed"]),
    # relu and clamp as fmaxf / fminf: right on numbers, wrong on NaN -- only the NaN input case fails.
    ("6 -DSELFTEST_BROKEN=7", ["verify", "--seeds", "1"], 1,
     lambda r: [x["nan_input"] for x in r["runs"] if not x["passed"]] == [True] and r["first_fail"]["want"] == "nan"),
    # Writes C, which is read only with D.
    ("6 -DSELFTEST_BROKEN=8", ["verify", "--seeds", "1"], 1, lambda r: all(x["c_written"] for x in r["runs"])),
    # Rows past m of D are holes.
    ("7 -DSELFTEST_BROKEN=4", ["verify", "--seeds", "1", "--m", "2,40"], 1,
     lambda r: [c["passed"] for c in r["m_cases"]] == [False, True]),
    # Reads C when beta == 0: with D the C = nullptr probe faults.
    ("6 -DSELFTEST_BROKEN=2", ["verify", "--seeds", "1"], 4, lambda r: "C = nullptr and beta = 0" in r["error"]),
    # No check of the epilogue's pointers: the bias = nullptr probe faults.
    ("6 -DSELFTEST_BROKEN=9", ["verify", "--seeds", "1"], 4, lambda r: "bias = nullptr" in r["error"]),
])
def test_the_harness_catches_epilogue_bugs_on_a_gpu(tmp_path, variant, args, want_rc, check):
    case, *defines = variant.split()
    exe = tmp_path / "selftest"
    _compile(_nvcc(), [SELFTEST], exe, template_dir(), (f"-DSELFTEST_CASE={case}", *defines))
    rc, report = _run(exe, *args)
    assert rc == want_rc and check(report), report
