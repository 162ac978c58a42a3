"""The verify/bench harness for a spec with a run-time size (issue 7): the generated harness source, its
compile against a hand-written kernel with the run-time entry point, the harness's size helpers, and on a
GPU the harness's self-test cases for run-time sizes (planted bugs included) and a generated kernel.

The harness context is built by hand (`k.dyn` with bucket edges chosen here), so these tests do not depend
on how the planner cuts the range into buckets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.render import HARNESS, base_context, environment, template_dir
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, gpu_present

# selftest_harness.cu's case 4 as a spec: f16, m in 2..40 at run time, A and C padded and offset.
STUB_SPEC = {"name": "dynstub", "dtype": "f16", "gemm": {"m": {"min": 2, "max": 40}, "n": 24, "k": 33},
             "operands": {"A": {"strides": [40, 1], "offset": 5}, "C": {"strides": [32, 1], "offset": 3}},
             "alpha": 1.5, "beta": 0.5}
EDGES = [2, 4, 5, 16, 17, 40]

# The kernel under test: naive and correct, with dynstub's C API (the header is rendered from the spec).
STUB_KERNEL = r"""
#include "dynstub.h"

__global__ void dynstub_kernel(const __half* A, const __half* B, __half* C, long long m, float alpha, float beta) {
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= m * 24) return;
  const long long i = o / 24, j = o % 24;
  float acc = 0.0f;
  for (int k = 0; k < 33; ++k) acc += __half2float(A[5 + i * 40 + k]) * __half2float(B[k * 24 + j]);
  float out = alpha * acc;
  if (beta != 0.0f) out += beta * __half2float(C[3 + i * 32 + j]);
  C[3 + i * 32 + j] = __float2half_rn(out);
}

extern "C" cudaError_t dynstub(const __half* A, const __half* B, __half* C, int64_t m, float alpha, float beta,
                               cudaStream_t stream) {
  if (!A || !B || !C || m < 2 || m > 40) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) | reinterpret_cast<uintptr_t>(C)) % 2)
    return cudaErrorInvalidValue;
  dynstub_kernel<<<static_cast<unsigned>((m * 24 + 127) / 128), 128, 0, stream>>>(A, B, C, m, alpha, beta);
  return cudaGetLastError();
}
"""


def _context(spec_doc: dict, edges: list[int] | None) -> dict:
    """The shared render context, with the run-time size's edges set here."""
    spec = parse_spec(spec_doc)
    views = analyse(spec)
    # No kernels: the header and harness are rendered for a hand-written stub, so there are no routes to describe.
    k = {**base_context(spec, views, plan_baseline(views), get_arch("sm_90a")), "routes": []}
    if spec.dynamic:
        (letter, (lo, hi)), = spec.dynamic.items()
        k["dyn"] = {**(k.get("dyn") or {}), "letter": letter, "lo": lo, "hi": hi, "edges": edges}
    return k


def _harness_source(spec_doc: dict, edges: list[int] | None = EDGES) -> str:
    return environment().get_template("harness.cu.j2").render(k=_context(spec_doc, edges))


def test_the_harness_describes_the_run_time_size_and_passes_m():
    text = _harness_source(STUB_SPEC)
    assert "static const long long kRunTimeEdges[] = { 2LL, 4LL, 5LL, 16LL, 17LL, 40LL };" in text
    assert "'m', 2LL, 6, kRunTimeEdges," in text
    assert "{'m', DG_M, 40LL, { 40LL, 0LL, 32LL } }," in text  # the dims hold the largest size
    assert "(1u << 0) }," in text and "DG_SCALE_N}," in text   # A's and C's rows, and the call's n, scale
    assert "long long m, float alpha, float beta" in text and "static_cast<__half*>(C), m, alpha, beta, stream)" in text
    # Without edges (one bucket), no array.
    assert "kRunTimeEdges" not in _harness_source(STUB_SPEC, [])
    assert "'m', 2LL, 0, nullptr," in _harness_source(STUB_SPEC, [])


def test_a_fixed_size_harness_has_none_of_it():
    fixed = dict(STUB_SPEC, gemm={"m": 40, "n": 24, "k": 33})
    text = _harness_source(fixed)
    for word in ("kRunTimeEdges", "DG_SCALE", "long long m", "(1u <<"):
        assert word not in text


def _nvcc():
    from dgemm_cli.errors import ToolchainError
    from dgemm_cli.toolchain import find_nvcc

    try:
        return find_nvcc()
    except ToolchainError as err:  # CI installs the wheels, so this only skips on a bare machine
        pytest.skip(str(err))


def _compile(nvcc, sources: list[Path], exe: Path, include: Path, defines: tuple[str, ...] = ()) -> None:
    cmd = [*nvcc.compile_prefix(), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall",
           "-I", str(include), *defines, *map(str, sources), "-o", str(exe), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=nvcc.run_env(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


def _run(exe: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, check=False, timeout=600)
    (line,) = proc.stdout.splitlines()  # exactly one JSON object on stdout
    return proc.returncode, json.loads(line)


@pytest.mark.slow
def test_the_harness_compiles_with_a_run_time_entry_point_and_checks_its_sizes(tmp_path):
    """The rendered harness and header against a hand-written kernel: -Wall clean; --m outside the range
    is a usage error before any GPU is touched; on a GPU the whole verify passes and bench runs each size."""
    nvcc = _nvcc()
    env = environment()
    k = _context(STUB_SPEC, EDGES)
    (tmp_path / "dynstub.h").write_text(env.get_template("header.h.j2").render(k=k))
    (tmp_path / "dynstub_harness.cu").write_text(env.get_template("harness.cu.j2").render(k=k))
    (tmp_path / HARNESS).write_text((template_dir() / HARNESS).read_text())
    (tmp_path / "dynstub.cu").write_text(STUB_KERNEL)
    exe = tmp_path / "dynstub_harness"
    _compile(nvcc, [tmp_path / "dynstub_harness.cu", tmp_path / "dynstub.cu"], exe, tmp_path)

    for args, words in ((["verify", "--m", "1,8"], "--m: 1 is outside the run-time range 2..40 of 'm'"),
                        (["bench", "--m", "2,41"], "--m: 41 is outside the run-time range 2..40 of 'm'"),
                        (["verify", "--m", "2,x"], "bad value '2,x' for --m")):
        rc, report = _run(exe, *args)
        assert rc == 2 and words in report["error"], report
    if not gpu_present():
        rc, report = _run(exe, "verify")
        assert rc == 3 and "no CUDA GPU" in report["error"]
        return
    rc, report = _run(exe, "verify", "--repeat", "2")
    assert rc == 0 and report["passed"], report
    assert report["dynamic"] == {"letter": "m", "lo": 2, "hi": 40} and report["api_m_rejected"]
    assert [p["m"] for p in report["api_m_probes"]] == [-1, 0, 1, 41]
    sizes = [c["m"] for c in report["m_cases"]]
    assert {2, 3, 4, 5, 6, 15, 16, 17, 18, 39, 40} <= set(sizes) and sizes == sorted(set(sizes))
    assert {r["m"] for r in report["runs"]} == set(sizes)
    rc, report = _run(exe, "bench", "--reps", "5", "--m", "2,17,40")
    assert rc == 0 and [r["m"] for r in report["m_rows"]] == [2, 17, 40] and report["m"] == 40
    assert report["us"] == report["m_rows"][-1]["us"]


@pytest.mark.slow
def test_the_size_helpers(tmp_path):
    """The sizes verify and bench run, the problem and baseline at one size, and dg_check_problem's refusals
    of an inconsistent run-time description (host code only: no GPU needed)."""
    nvcc = _nvcc()
    exe = tmp_path / "run_time_helpers"
    _compile(nvcc, [REPO / "tests" / "harness_selftest" / "run_time_helpers.cu"], exe, template_dir())
    rc, got = _run(exe)
    assert rc == 0, got
    # The spread within 2..40, every edge and its neighbours, both ends, 3 drawn from the seed.
    fixed_part = {2, 3, 7, 8, 9, 16, 17, 40} | {4, 5, 6, 15, 18, 39}
    for key in ("verify_sizes_seed1", "verify_sizes_seed2"):
        sizes = got[key]
        assert sizes == sorted(set(sizes)) and fixed_part <= set(sizes) and all(2 <= m <= 40 for m in sizes)
        assert len(sizes) <= len(fixed_part) + 3
    assert got["bench_sizes"] == [2, 8, 16, 40]
    assert got["asked_sizes"] == [3, 40] and got["fixed_sizes"] == [0]
    assert (got["m_at_3"], got["c_count_at_3"]) == (3, 72)
    assert (got["view_a_rows_at_3"], got["view_c_rows_at_3"], got["view_c_cols_at_3"]) == (3, 3, 24)
    assert (got["call_m_at_3"], got["call_n_at_3"], got["call_ldy_at_3"]) == (24, 3, 33)
    for broken, words in (("edges", "bucket edge 16 out of order"), ("lo", "run-time range 41..40"),
                          ("letter", "'k' is not a row letter of C"), ("view", "view size 20 scales"),
                          ("call", "k 33 scales"), ("fixed", "a run-time range without a run-time letter")):
        rc, report = _run(exe, broken)
        assert rc == 4 and words in report["error"], (broken, report)


SELFTEST = REPO / "tests" / "harness_selftest" / "selftest_harness.cu"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("variant, args, want_rc, check", [
    ("4", ["verify", "--repeat", "2"], 0, lambda r: r["passed"] and r["api_m_rejected"]),
    ("5", ["verify", "--m", "2,3,40"], 0, lambda r: [c["m"] for c in r["m_cases"]] == [2, 3, 40]),
    ("5", ["bench", "--reps", "5"], 0,
     lambda r: [x["m"] for x in r["m_rows"]] == [2, 8, 16, 40] and all(x["baseline_us"] for x in r["m_rows"])),
    # Ignores m: the rows past m (holes then) get written at every size but the largest.
    ("4 -DSELFTEST_BROKEN=4", ["verify", "--seeds", "1"], 1,
     lambda r: [c["m"] for c in r["m_cases"] if not c["passed"]] == [c["m"] for c in r["m_cases"]][:-1]
     and any(x["holes_written"] for x in r["runs"])),
    # Takes sizes outside its range.
    ("4 -DSELFTEST_BROKEN=5", ["verify", "--seeds", "1"], 1,
     lambda r: not r["api_m_rejected"] and all(c["passed"] for c in r["m_cases"])),
])
def test_the_harness_catches_run_time_size_bugs_on_a_gpu(tmp_path, variant, args, want_rc, check):
    case, *defines = variant.split()
    exe = tmp_path / "selftest"
    _compile(_nvcc(), [SELFTEST], exe, template_dir(), (f"-DSELFTEST_CASE={case}", *defines))
    rc, report = _run(exe, *args)
    assert rc == want_rc and check(report), report


@pytest.mark.gpu
@pytest.mark.slow
def test_a_generated_run_time_kernel_verifies_and_benches_through_the_cli(tmp_path):
    spec = tmp_path / "decode_rt.yaml"
    spec.write_text("name: decode_rt\ndtype: bf16\ngemm: {m: {min: 1, max: 80}, n: 512, k: 1024}\n"
                    "operands: {B: {layout: col}}\n")

    def dg(*args):
        return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                              cwd=REPO, check=False)

    out = dg("gen", spec, "-o", tmp_path / "gen")
    assert out.returncode == 0, out.stderr
    out = dg("build", tmp_path / "gen" / "decode_rt")
    assert out.returncode == 0, out.stdout + out.stderr
    out = dg("verify", tmp_path / "gen" / "decode_rt", "--repeat", "3", "--json")
    (row,) = json.loads(out.stdout)
    assert out.returncode == 0 and row["passed"] and row["dynamic"]["hi"] == 80, row
    out = dg("bench", tmp_path / "gen" / "decode_rt", "--m", "1,5,80", "--reps", "5", "--json")
    (row,) = json.loads(out.stdout)
    assert out.returncode == 0 and [r["m"] for r in row["m_rows"]] == [1, 5, 80], row
    # Both orders: with cuBLAS timed, each side runs twice at each size and reports the mean of its passes.
    for size in row["m_rows"]:
        passes = 2 if size["ratio"] is not None else 1
        assert len(size["us_passes"]) == passes and size["us"] == pytest.approx(sum(size["us_passes"]) / passes), size
        if size["ratio"] is not None:
            assert len(size["baseline_us_passes"]) == 2, size
            assert size["baseline_us"] == pytest.approx(sum(size["baseline_us_passes"]) / 2), size
