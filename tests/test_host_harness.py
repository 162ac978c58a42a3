"""The CPU backend's harness (dgemm_cli/host_harness.py) on naive C kernels written here from the spec, correct and
deliberately broken: verify passes the correct ones, fails each broken one with the right first failure, and every
report it prints is one records.harness_report reads."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dgemm_cli import host_harness as hh
from dgemm_cli.records import BenchReport, VerifyReport, harness_report
from dgemm_cli.spec import Spec, parse_spec

from .conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the naive kernels")

DENSE_F32 = {"name": "dense_f32", "dtype": "f32", "gemm": {"m": 33, "n": 20, "k": 17}, "beta": 0.5,
             "operands": {"A": {"layout": "row"}, "B": {"layout": "row"}, "C": {"layout": "row"}}}
CONV_BF16_GELU = {"name": "conv_bf16_gelu", "dtype": "bf16", "contraction": "nchw,kc->nkhw",
                  "sizes": {"n": 2, "c": 8, "h": 3, "w": 5, "k": 6},
                  "operands": {"A": {"strides": [160, 15, 5, 1], "offset": 7}, "B": {"strides": [9, 1]}, "C": {}},
                  "epilogue": [{"bias": {"letters": "k"}}, {"activation": "gelu_tanh"}]}
RUN_TIME_F16 = {"name": "run_time_f16", "dtype": "f16", "gemm": {"m": {"min": 2, "max": 24}, "n": 16, "k": 8},
                "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}
WITH_D = {"name": "with_d", "dtype": "f16", "gemm": {"m": 13, "n": 11, "k": 9}, "alpha": 0.75, "beta": 0.5,
          "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}, "D": {"layout": "col"}},
          "epilogue": [{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}},
                       {"activation": "silu"}, {"residual": {"strides": [12, 1]}}, {"clamp": [-4.0, 4.0]}]}

C_PRELUDE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
static float ld_f32(const void* p, int64_t i) { return ((const float*)p)[i]; }
static float ld_f16(const void* p, int64_t i) { return (float)((const _Float16*)p)[i]; }
static float ld_bf16(const void* p, int64_t i) {
  uint32_t u = (uint32_t)((const uint16_t*)p)[i] << 16; float f; memcpy(&f, &u, 4); return f;
}
static void st_f32(void* p, int64_t i, float v) { ((float*)p)[i] = v; }
static void st_f16(void* p, int64_t i, float v) { ((_Float16*)p)[i] = (_Float16)v; }
static void st_bf16(void* p, int64_t i, float v) {
  uint32_t u; memcpy(&u, &v, 4);
  ((uint16_t*)p)[i] = isnan(v) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
"""

ACTIVATION_C = {
    "relu": "t = t < 0.0f ? 0.0f : t;",
    "gelu_tanh": "t = 0.5f * t * (1.0f + tanhf(0.7978845608f * (t + 0.044715f * t * t * t)));",
    "gelu_erf": "t = 0.5f * t * (1.0f + erff(t * 0.7071067812f));",
    "silu": "t = t / (1.0f + expf(-t));",
    "sigmoid": "t = 1.0f / (1.0f + expf(-t));",
    "tanh": "t = tanhf(t);",
}
# The broken variants: each a kernel bug verify must catch.
BUGS = ("tail", "outside", "skip", "epilogue", "nondeterministic", "accept_m", "reads_c")


def naive_kernel_source(spec: Spec, bug: str | None = None) -> str:
    """A naive C implementation of the CPU backend's entry point for `spec`: one loop a letter, a float sum, the
    epilogue in float. `bug` plants one of BUGS."""
    a_letters, b_letters, out = hh.subscripts(spec)
    summed = [x for x in spec.sizes if x not in out]
    views = hh.slot_views(spec)
    rt = spec.run_time_letter
    out_name = hh.output_name(spec)

    def address(name: str, letters: str) -> str:
        v = views[name]
        return " + ".join([str(v.offset)] + [f"i_{x} * {v.stride_of(x)}LL" for x in letters if x in v.letters])

    def size(x: str) -> str:
        return "m" if rt is not None and x == rt[0] else str(spec.sizes[x])

    params = []
    for name in views:
        const = "" if name == out_name else "const "
        params.append(f"{const}void* {name}")
    params += (["int64_t m"] if rt else []) + ["float alpha", "float beta", "int threads"]
    lines = [C_PRELUDE, f"int {spec.name}({', '.join(params)}) {{", "  (void)threads;",
             f"  if (!A || !B || !{out_name} || (beta != 0.0f && !C)) return 22;"]
    if bug == "nondeterministic":
        lines.insert(1, "static int calls;")
    if rt and bug != "accept_m":
        lines.append(f"  if (m < {rt[1]} || m > {rt[2]}) return 22;")
    for x in out:
        lines.append(f"  for (int64_t i_{x} = 0; i_{x} < {size(x)}; ++i_{x}) {{")
    lines.append("  float acc = 0.0f;")
    for j, x in enumerate(summed):
        limit = size(x)
        if bug == "tail" and j == len(summed) - 1:  # the last element along the innermost output letter drops a term
            limit = f"(i_{out[-1]} == {size(out[-1])} - 1 ? {limit} - 1 : {limit})"
        lines.append(f"  for (int64_t i_{x} = 0; i_{x} < {limit}; ++i_{x})")
    lines.append(f"    acc += ld_{spec.A.dtype}(A, {address('A', a_letters)}) * "
                 f"ld_{spec.B.dtype}(B, {address('B', b_letters)});")
    lines.append("  float t = alpha * acc;")
    c_read = f"beta * ld_{spec.C.dtype}(C, {address('C', out)})"
    lines.append(f"  t += {c_read};" if bug == "reads_c" else f"  if (beta != 0.0f) t += {c_read};")
    for step in spec.epilogue:
        if step.view is not None:
            op = "*" if step.kind == "scale" else "+"
            lines.append(f"  t = t {op} ld_{step.view.dtype}({step.kind}, {address(step.kind, out)});")
        elif step.kind == "activation":
            code = ACTIVATION_C[step.activation]
            lines.append("  " + (code.replace("0.5f * ", "", 1) if bug == "epilogue" else code))
        else:
            lo, hi = step.clamp
            lines.append(f"  t = t < {lo}f ? {lo}f : (t > {hi}f ? {hi}f : t);")
    store = f"st_{views[out_name].dtype}({out_name}, {address(out_name, out)}, t);"
    if bug == "skip":
        last = " && ".join(f"i_{x} == {size(x)} - 1" for x in out)
        store = f"if (!({last})) {store}"
    lines.append("  " + store)
    if bug == "nondeterministic":  # flips the lowest bit of the first element on every other call
        first = " && ".join(f"i_{x} == 0" for x in out)
        es = views[out_name].elem_bytes
        lines.append(f"  if (({first}) && (calls & 1)) ((unsigned char*){out_name})[({address(out_name, out)}) * {es}]"
                     " ^= 1;")
    lines.append("  " + "}" * len(out))
    if bug == "nondeterministic":
        lines.append("  ++calls;")
    if bug == "outside":  # one element past the view's span, as a loop that runs one too far would write
        span = hh.span_at(views[out_name], hh.sizes_at(spec, None))
        lines.append(f"  st_{views[out_name].dtype}({out_name}, {span}, 0.0f);")
    lines.append("  return 0;\n}\n")
    return "\n".join(lines)


def make_folder(tmp_path: Path, spec_dict: dict, bug: str | None = None) -> tuple[Path, Path, Spec]:
    """A folder with plan.json's `spec` and the naive kernel built as a shared library (a fresh path each: ctypes
    keeps a loaded library for the process)."""
    spec = parse_spec(spec_dict, "<test>")
    folder = tmp_path / f"{spec.name}_{bug or 'ok'}"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps({"spec": spec.to_dict()}))
    source = folder / "kernel.c"
    source.write_text(naive_kernel_source(spec, bug))
    library = folder / f"lib{spec.name}.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source), "-lm"], check=True)
    return folder, library, spec


def parsed(command: str, report: dict):
    """The report as the CLI prints it, read back by records: the schema must not change."""
    return harness_report(command, json.loads(json.dumps(hh.jsonable(report))), "test")


# ------------------------------------------------------------------------------------------------ pure parts

def test_bf16_rounds_to_nearest_even():
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-8 + 2**-20, -2.5, np.inf, np.nan], np.float32)
    bits = hh.bf16_bits(values)
    back = hh.bits_to_float32(bits, "bf16")
    assert back[:5].tolist() == [1.0, 1.0, 1.0 + 4 * 2**-8, 1.0 + 2 * 2**-8, -2.5]
    assert back[5] == np.inf and np.isnan(back[6])


def test_the_baselines_erf_is_within_float32_rounding():
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert np.max(np.abs(hh.erf_f32(x) - want)) < 5e-7  # 1.5e-7 exact, plus float32 evaluation
    assert hh.erf_f32(np.array([np.nan], np.float32))[0] != hh.erf_f32(np.array([np.nan], np.float32))[0]


def test_compare_fails_nan_and_names_the_first_bad_element():
    want = np.arange(1.0, 7.0).reshape(2, 3)
    got = want.copy()
    assert hh.compare(got, want, np.abs(want), 1e-5, 4).accurate(1e-5)
    got[1, 1] = np.nan
    cmp = hh.compare(got, want, np.abs(want), 1e-5, 4)
    assert not cmp.accurate(1e-5) and cmp.nan_elements == 1 and cmp.first_fail == 4 and math.isnan(cmp.max_abs_err)
    lost = hh.compare(want, np.where(want == 2.0, np.nan, want), np.abs(want), 1e-5, 4)
    assert lost.nan_lost == 1 and lost.first_fail == 1


def test_reference_is_the_einsum_of_the_strided_views():
    spec = parse_spec(CONV_BF16_GELU, "<test>")
    rng = np.random.default_rng(0)
    bits = {x: hh.random_bits(rng, hh.span_at(v, spec.sizes), v.dtype) for x, v in hh.slot_views(spec).items()}
    f64 = {x: hh.bits_to_float64(b, spec.operand(x).dtype if x in "ABC" else "bf16") for x, b in bits.items()}
    product, magnitude = hh.contraction_f64(spec, bits["A"], bits["B"], spec.sizes)
    n, k, h, w = 1, 4, 2, 3
    want = sum(f64["A"][7 + n * 160 + c * 15 + h * 5 + w] * f64["B"][k * 9 + c] for c in range(8))
    assert product[n, k, h, w] == pytest.approx(want, rel=1e-12)
    t, _ = hh.finish_reference(spec, product, magnitude, f64, spec.sizes, 1.0, 0.0)
    x = want + f64["bias"][k]
    assert t[n, k, h, w] == pytest.approx(0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))))
    # A slice of one output letter at a time gives the same numbers.
    sliced = hh.contraction_f64(spec, bits["A"], bits["B"], spec.sizes, chunk_bytes=1000)
    assert np.array_equal(sliced[0], product) and np.array_equal(sliced[1], magnitude)


# ------------------------------------------------------------------------------------------------ verify

@pytest.mark.parametrize("spec_dict", [DENSE_F32, CONV_BF16_GELU, RUN_TIME_F16, WITH_D], ids=lambda d: d["name"])
def test_verify_passes_a_correct_kernel(tmp_path, spec_dict):
    folder, library, spec = make_folder(tmp_path, spec_dict)
    report = hh.verify(folder, library, seeds=(1, 2), repeat=2)
    assert report["passed"], report["first_fail"]
    assert report["api_null_rejected"] and report["repeat_differed"] == 0
    record = parsed("verify", report)
    assert isinstance(record, VerifyReport) and record.passed and record.output == hh.output_name(spec)
    assert all(r["inputs_written"] == 0 and r["holes_written"] == 0 for r in report["runs"])
    if spec.run_time_letter:
        assert report["api_m_rejected"] and [p["m"] for p in report["api_m_probes"]] == [1, 25]
        assert {c.m for c in record.m_cases} >= {2, 24} and record.dynamic.lo == 2
    if spec.epilogue:
        assert any(r["nan_input"] and r["passed"] for r in report["runs"])
    if spec.D is not None:
        assert report["api_null_c_accepted"] and all(r["c_written"] == 0 for r in report["runs"])


def _failed(tmp_path, spec_dict, bug, **options):
    folder, library, spec = make_folder(tmp_path, spec_dict, bug)
    report = hh.verify(folder, library, seeds=(1,), **options)
    assert not report["passed"]
    assert not parsed("verify", report).passed
    return report, spec


def test_verify_fails_an_off_by_one_tail(tmp_path):
    report, _ = _failed(tmp_path, DENSE_F32, "tail")
    assert report["first_fail"]["index"] == {"m": 0, "n": 19}


def test_verify_fails_a_write_outside_the_view(tmp_path):
    report, spec = _failed(tmp_path, DENSE_F32, "outside")
    assert report["first_fail"] is None
    assert report["runs"][0]["holes_written"] == 1
    assert report["runs"][0]["first_hole"] == hh.span_at(spec.C, spec.sizes)


def test_verify_fails_a_skipped_element(tmp_path):
    report, _ = _failed(tmp_path, CONV_BF16_GELU, "skip")
    fail = report["first_fail"]
    assert fail["index"] == {"n": 1, "k": 5, "h": 2, "w": 4} and math.isnan(float(fail["got"]))


def test_verify_fails_a_wrong_epilogue(tmp_path):
    report, _ = _failed(tmp_path, CONV_BF16_GELU, "epilogue")
    assert report["first_fail"] is not None and report["rel_err"] > 0.1


def test_verify_fails_a_non_deterministic_kernel(tmp_path):
    report, _ = _failed(tmp_path, DENSE_F32, "nondeterministic", repeat=3)
    assert report["repeat_differed"] >= 1 and all(r["passed"] for r in report["runs"])


def test_verify_fails_a_kernel_that_accepts_m_out_of_range(tmp_path):
    report, _ = _failed(tmp_path, RUN_TIME_F16, "accept_m", sizes=[2, 24])
    assert not report["api_m_rejected"] and all(c["passed"] for c in report["m_cases"])


def test_verify_fails_a_kernel_that_reads_c_with_beta_zero(tmp_path):
    report, _ = _failed(tmp_path, WITH_D, "reads_c")
    beta0 = [r for r in report["runs"] if r["beta"] == 0.0]
    assert beta0 and not beta0[0]["passed"] and beta0[0]["nan_elements"] > 0


def test_verify_fails_an_off_by_one_tail_at_a_run_time_size(tmp_path):
    report, _ = _failed(tmp_path, RUN_TIME_F16, "tail", sizes=[5, 24])
    # f16's element bound lets a dropped term pass on some rows: the first failure is in the last column
    assert report["first_fail"]["m"] == 5 and report["first_fail"]["index"]["n"] == 15
    assert [c["passed"] for c in report["m_cases"]] == [False, False]


# ------------------------------------------------------------------------------------------------ errors, CLI

def test_a_missing_symbol_is_exit_4(tmp_path):
    folder, library, _ = make_folder(tmp_path, DENSE_F32)
    other = dict(DENSE_F32, name="other_name")
    (folder / "plan.json").write_text(json.dumps({"spec": parse_spec(other, "<test>").to_dict()}))
    report, code = hh.run_command(["verify", "--dir", str(folder), "--lib", str(library)])
    assert code == hh.EXIT_LIBRARY and "other_name" in report["error"] and report["name"] == "other_name"
    assert parsed("verify", report).error


def test_a_bad_command_line_is_exit_2_with_a_json_error(tmp_path):
    report, code = hh.run_command(["verify", "--dir", str(tmp_path)])
    assert code == hh.EXIT_USAGE and "--lib" in report["error"]
    assert parsed("verify", report).error
    folder, library, _ = make_folder(tmp_path, DENSE_F32)
    report, code = hh.run_command(["bench", "--dir", str(folder), "--lib", str(library), "--m", "4"])
    assert code == hh.EXIT_USAGE and "no run-time size" in report["error"]


def test_the_cli_prints_one_json_object_and_exits_by_the_result(tmp_path):
    folder, library, _ = make_folder(tmp_path, DENSE_F32, "tail")
    done = subprocess.run([sys.executable, "-m", "dgemm_cli.host_harness", "verify", "--dir", str(folder), "--lib",
                           str(library), "--seeds", "1"], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == hh.EXIT_FAILED, done.stderr
    report = json.loads(done.stdout)
    assert not harness_report("verify", report, "cli").passed


# ------------------------------------------------------------------------------------------------ bench

@pytest.mark.parametrize("spec_dict", [DENSE_F32, CONV_BF16_GELU, RUN_TIME_F16, WITH_D], ids=lambda d: d["name"])
def test_bench_times_ours_and_both_baselines(tmp_path, spec_dict):
    folder, library, spec = make_folder(tmp_path, spec_dict)
    report = hh.bench(folder, library, warmup=1, reps=3)
    record = parsed("bench", report)
    assert isinstance(record, BenchReport) and record.row.us > 0 and record.row.ratio > 0
    assert {c.formulation for c in record.row.baseline_candidates} == {"copy + matmul", "einsum"}
    assert len(record.row.us_passes) == 2 and record.sets >= 1 and record.reps == 3
    if spec.run_time_letter:
        assert [r.m for r in record.m_rows] == [2, 13, 24] and record.row.m == 24


GELU_ERF_F32 = {**DENSE_F32, "name": "gelu_erf_f32", "epilogue": [{"activation": "gelu_erf"}]}


@pytest.mark.parametrize("spec_dict", [DENSE_F32, CONV_BF16_GELU, RUN_TIME_F16, WITH_D, GELU_ERF_F32],
                         ids=lambda d: d["name"])
def test_the_baselines_compute_the_kernels_result(tmp_path, spec_dict):
    """Each baseline formulation, run on verify's kind of inputs, passes verify's comparison."""
    folder, library, spec = make_folder(tmp_path, spec_dict)
    v = hh.Verifier(spec, hh.KernelLibrary(library, spec), threads=1)
    v.load_seed(5)
    m = spec.run_time_letter[2] if spec.run_time_letter else None
    sizes = hh.sizes_at(spec, m)
    out = hh.slot_views(spec)[hh.output_name(spec)]
    for name, make in hh.BASELINES.items():
        v.prepare_output(m, spec.beta)
        make(spec, sizes, v.buffers)()
        want, mag = hh.finish_reference(spec, v.product, v.magnitude, v.inputs, sizes, spec.alpha, spec.beta)
        got = hh.bits_to_float64(hh.view_of(v.buffers[out.name].bits, out, hh.subscripts(spec)[2], sizes), out.dtype)
        assert hh.compare(got, want, mag, v.tol, v.k_terms).accurate(v.tol), name


def test_bench_without_the_baseline_times_ours_once(tmp_path):
    folder, library, _ = make_folder(tmp_path, RUN_TIME_F16)
    report, code = hh.run_command(["bench", "--dir", str(folder), "--lib", str(library), "--baseline", "0",
                                   "--warmup", "0", "--reps", "2", "--m", "3,24"])
    record = parsed("bench", report)
    assert code == 0 and [r.m for r in record.m_rows] == [3, 24]
    assert record.row.baseline == "skipped (--baseline 0)" and record.row.ratio is None
    assert len(record.row.us_passes) == 1 and record.row.baseline_candidates == ()


def test_an_e4m3_spec_is_refused_with_an_error_report(tmp_path):
    from dgemm_cli.spec import load_spec

    spec = load_spec(sorted((REPO / "specs" / "fp8").glob("*.yaml"))[0])
    (tmp_path / "plan.json").write_text(json.dumps({"spec": spec.to_dict()}))
    report, code = hh.run_command(["verify", "--dir", str(tmp_path), "--lib", str(tmp_path / "none.so")])
    assert code == hh.EXIT_USAGE and "e4m3" in report["error"]
    assert parsed("verify", report).error


# A broadcast A: its rows all read one row (stride 0 over m), so one address is read by every m.
BROADCAST_A = {"name": "broadcast_a", "dtype": "f32", "contraction": "mk,kn->mn", "sizes": {"m": 4, "k": 6, "n": 5},
               "operands": {"A": {"strides": [0, 1]}, "B": {"strides": [5, 1]}, "C": {"strides": [5, 1]}}}
# A reduced over a letter B lacks (summed on A's side alone), with a batch letter.
REDUCED_A = {"name": "reduced_a", "dtype": "bf16", "contraction": "bmkr,bkn->bmn",
             "sizes": {"b": 2, "m": 3, "k": 4, "r": 2, "n": 3},
             "operands": {"A": {"strides": [30, 8, 2, 1], "offset": 3}, "B": {"strides": [12, 3, 1]},
                          "C": {"strides": [9, 3, 1]}}}
SCALAR_A = {"name": "scalar_a", "dtype": "f16", "contraction": ",w->w", "sizes": {"w": 5},
            "operands": {"A": {"strides": []}, "B": {"strides": [1]}, "C": {"strides": [1]}}}


@pytest.mark.parametrize("spec_dict", [CONV_BF16_GELU, DENSE_F32, BROADCAST_A, REDUCED_A, SCALAR_A],
                         ids=lambda d: d["name"])
def test_the_outputs_a_nan_in_a_reaches_are_where_the_contraction_makes_nan(spec_dict):
    """The NaN case's reference marks the outputs whose terms read the poisoned element of A (reached_by); the
    float64 contraction of A holding that NaN puts NaN exactly there, at every address of A's view."""
    spec = parse_spec(spec_dict, "<test>")
    sizes = spec.sizes
    bits = {x: hh.random_bits(np.random.default_rng(3), hh.span_at(spec.operand(x), sizes), spec.operand(x).dtype)
            for x in "AB"}
    view = hh.view_of(np.arange(bits["A"].size), spec.A, hh.subscripts(spec)[0], sizes)
    for address in np.unique(view):
        a = bits["A"].copy()
        a[address] = hh.POISON_BITS[spec.A.dtype]
        product, _ = hh.contraction_f64(spec, a, bits["B"], sizes)
        assert np.array_equal(np.isnan(product), hh.reached_by(spec, sizes, int(address))), address


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_reference_of_a_scalar_input_broadcasts_it(dtype):
    """A 0-d operand (a scalar times a vector: `,w->w`) stays 0-d through its float64 image."""
    spec = parse_spec({"name": "s", "dtype": dtype, "contraction": ",w->w", "sizes": {"w": 5},
                       "operands": {"A": {"strides": []}, "B": {"strides": [0]}, "C": {"strides": [1]}}}, "<test>")
    bits = {x: hh.random_bits(np.random.default_rng(1), hh.span_at(spec.operand(x), spec.sizes), dtype)
            for x in "AB"}
    product, _ = hh.contraction_f64(spec, bits["A"], bits["B"], spec.sizes)
    a, b = (float(hh.bits_to_float64(bits[x], dtype)[0]) for x in "AB")
    assert product.shape == (5,) and np.all(product == a * b)
