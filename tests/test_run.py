"""verify / bench orchestration without a GPU: a fake nvidia-smi and fake harness binaries stand in
for the device, so the parsing, progress lines and exit codes are tested here; the real harness is
tested on the GPU (test_gpu_verify.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.pipeline import generate
from dgemm_cli.spec import parse_spec

from .conftest import REPO

FAKE_SMI = """#!/bin/sh
case "$*" in
  *query-gpu*) echo "0, NVIDIA H200, 9.0, 580.159.04" ;;
  *) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
esac
"""


def _fake_gpu_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _kernel_dir(tmp_path: Path, name: str, harness: str) -> Path:
    g = generate(parse_spec({"name": name, "gemm": {"m": 8, "n": 8, "k": 8}}), get_arch("sm_90a"), tmp_path / "gen")
    exe = g.directory / "build" / "sm_90a" / f"{name}_harness"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n" + harness)
    exe.chmod(0o755)
    return g.directory


def _dg(env, *args):
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, check=False)


PASS = """echo '{"command":"verify","name":"good","arch":"sm_90a","passed":true,"tol":0.01,"max_abs_err":0.002,
"rel_err":0.0003,"first_fail":null,"api_null_rejected":true,"api_misaligned_rejected":true,"runs":[]}' | tr -d '\\n'
echo"""
FAIL = """echo '{"command":"verify","name":"bad","arch":"sm_90a","passed":false,"tol":0.01,"max_abs_err":"nan",
"rel_err":"nan","first_fail":{"seed":1,"index":{"m":3,"n":0},"got":"nan","want":1.5},"runs":[]}' | tr -d '\\n'
echo
exit 1"""
CRASH = """echo 'dg_harness: CUDA error: an illegal memory access was encountered' >&2
exit 4"""
BENCH = """echo '{"command":"bench","name":"good","arch":"sm_90a","device":"NVIDIA H200","us":10.0,"tflops":1.5,
"gbps":100.0,"baseline":"cublas","baseline_us":20.0,"baseline_tflops":0.75,"ratio":2.0}' | tr -d '\\n'
echo"""


def test_verify_reports_each_kernel_and_fails_on_any(tmp_path):
    env = _fake_gpu_env(tmp_path)
    good = _kernel_dir(tmp_path, "good", PASS)
    bad = _kernel_dir(tmp_path, "bad", FAIL)
    crash = _kernel_dir(tmp_path, "crash", CRASH)
    out = _dg(env, "verify", good)
    assert out.returncode == 0, out.stderr
    assert "[1/1] good (sm_90a) PASS" in out.stdout and "rel_err 0.0003" in out.stdout
    out = _dg(env, "verify", good, bad, crash, "--json")
    assert out.returncode == 1
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["good"]["passed"] and not rows["bad"]["passed"] and not rows["crash"]["passed"]
    assert rows["bad"]["first_fail"]["index"] == {"m": 3, "n": 0}
    assert "illegal memory access" in rows["crash"]["error"]
    # The JSON comes at the end; each kernel's line reaches stderr as it finishes (a long run shows progress).
    assert "[1/3] good (sm_90a) PASS" in out.stderr and "[3/3] crash (sm_90a) ERROR" in out.stderr
    text = _dg(env, "verify", good, bad, crash).stdout
    assert "[2/3] bad (sm_90a) FAIL" in text and "first failure" in text and "1/3 passed" in text


def test_bench_table_and_json(tmp_path):
    env = _fake_gpu_env(tmp_path)
    good = _kernel_dir(tmp_path, "good", BENCH)
    out = _dg(env, "bench", good, "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert {k: row[k] for k in ("name", "us", "tflops", "gbps", "baseline", "baseline_us", "ratio")} == {
        "name": "good", "us": 10.0, "tflops": 1.5, "gbps": 100.0, "baseline": "cublas", "baseline_us": 20.0,
        "ratio": 2.0}
    assert "[1/1] good (sm_90a) 2 x cuBLAS" in out.stderr
    table = _dg(env, "bench", good).stdout
    header, line = table.splitlines()
    assert header.split()[:3] == ["kernel", "arch", "µs"]
    assert line.split() == ["good", "sm_90a", "10", "1.5", "100", "cublas", "20", "2", "-"]  # no passes reported


# Each side timed in two passes (ours, cuBLAS, cuBLAS, ours): ours' second pass 5% slower than its first.
BENCH_PASSES = """echo '{"command":"bench","name":"moved","arch":"sm_90a","device":"NVIDIA H200","us":10.25,
"tflops":1.5,"gbps":100.0,"us_passes":[10.0,10.5],"baseline":"cublas","baseline_us":20.0,"baseline_tflops":0.75,
"baseline_us_passes":[20.1,19.9],"ratio":1.95}' | tr -d '\\n'
echo"""


def test_bench_reports_each_pass_ratio_and_warns_when_the_passes_moved(tmp_path):
    env = _fake_gpu_env(tmp_path)
    d = _kernel_dir(tmp_path, "moved", BENCH_PASSES)
    header, line, warned = _dg(env, "bench", d).stdout.splitlines()
    assert header.split()[-1] == "passes" and line.split()[-2:] == ["1.95", "2.01/1.9"]
    assert warned.split()[:8] == ["warning:", "clocks", "or", "power", "moved", "this", "row", "by"]
    assert "by 5.0% between its passes (ours 10/10.5 µs, cuBLAS 20.1/19.9 µs)" in warned and "raise --reps" in warned
    (row,) = json.loads(_dg(env, "bench", d, "--json").stdout)
    assert row["ratio_passes"] == [20.1 / 10.0, 19.9 / 10.5] and row["unstable"] is True
    assert row["us_spread"] == 0.05 and abs(row["baseline_us_spread"] - 0.2 / 19.9) < 1e-12


def test_harness_that_finds_no_gpu_exits_3(tmp_path):
    env = _fake_gpu_env(tmp_path)
    d = _kernel_dir(tmp_path, "nogpu", """echo '{"command":"verify","error":"no CUDA GPU: no device"}'\nexit 3""")
    out = _dg(env, "verify", d)
    assert out.returncode == 3 and "no CUDA GPU" in out.stderr


@pytest.mark.parametrize("command", ["verify", "bench"])
def test_not_built_says_how(tmp_path, command):
    env = _fake_gpu_env(tmp_path)
    g = generate(parse_spec({"name": "fresh", "gemm": {"m": 8, "n": 8, "k": 8}}), get_arch("sm_90a"), tmp_path)
    out = _dg(env, command, g.directory)
    assert out.returncode == 4 and "deepgemm build" in out.stderr


# ------------------------------------------------------------------------------- run-time sizes

DYNAMIC_SPEC = {"name": "dyn", "gemm": {"m": {"min": 1, "max": 16}, "n": 8, "k": 8}}

# A harness that insists on being asked for sizes 1 and 8 and reports them as dg_harness.cuh does.
DYNAMIC_VERIFY = """case "$*" in *"--m 1,8"*) ;; *) echo '{"error":"asked for '"$*"'"}'; exit 4;; esac
echo '{"command":"verify","name":"dyn","arch":"sm_90a","passed":false,"tol":0.01,"max_abs_err":0.5,"rel_err":0.1,
"first_fail":{"m":8,"seed":1,"index":{"m":7,"n":0},"got":0,"want":1.5},"api_null_rejected":true,
"api_misaligned_rejected":true,"repeat":0,"repeat_differed":0,"runs":[],"dynamic":{"letter":"m","lo":1,"hi":16},
"api_m_rejected":false,"api_m_probes":[{"m":0,"rejected":true},{"m":17,"rejected":false}],
"m_cases":[{"m":1,"passed":true,"max_abs_err":0.002,"rel_err":0.0003,"first_fail":null,"repeat_differed":0},
{"m":8,"passed":false,"max_abs_err":0.5,"rel_err":0.1,"first_fail":{"m":8,"seed":1,"index":{"m":7,"n":0},
"got":0,"want":1.5},"repeat_differed":0}]}' | tr -d '\\n'
echo
exit 1"""
DYNAMIC_BENCH = """echo '{"command":"bench","name":"dyn","arch":"sm_90a","us":3.0,"tflops":0.5,"gbps":50.0,
"baseline":"cublas","baseline_us":4.0,"ratio":1.33,"baseline_formulation":"C^T=B^TA","m":16,"dynamic":{"letter":"m","lo":1,"hi":16},
"m_rows":[{"m":1,"us":2.0,"tflops":0.1,"gbps":20.0,"baseline":"cublas","baseline_us":5.0,"ratio":2.5},
{"m":16,"us":3.0,"tflops":0.5,"gbps":50.0,"baseline":"cublas","baseline_us":4.0,"ratio":1.33}]}' | tr -d '\\n'
echo"""
# A fixed-size kernel's harness takes no sizes.
FIXED_REFUSES_M = """case "$*" in *--m*) echo '{"error":"got --m"}'; exit 2;; esac
""" + PASS


def _dynamic_dir(tmp_path: Path, harness: str, name: str = "dyn", lo: int = 1, hi: int = 16) -> Path:
    spec = {**DYNAMIC_SPEC, "name": name, "gemm": {**DYNAMIC_SPEC["gemm"], "m": {"min": lo, "max": hi}}}
    g = generate(parse_spec(spec), get_arch("sm_90a"), tmp_path / "gen")
    exe = g.directory / "build" / "sm_90a" / f"{name}_harness"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n" + harness)
    exe.chmod(0o755)
    return g.directory


def test_verify_passes_the_sizes_and_prints_one_line_a_size(tmp_path):
    env = _fake_gpu_env(tmp_path)
    dyn = _dynamic_dir(tmp_path, DYNAMIC_VERIFY)
    fixed = _kernel_dir(tmp_path, "good", FIXED_REFUSES_M)
    out = _dg(env, "verify", dyn, fixed, "--m", "1,8")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("[1/2] dyn (sm_90a) FAIL")
    assert "m outside 1..16 accepted (must be cudaErrorInvalidValue): m=17" in out.stdout
    assert any(ln.split()[:2] == ["m=1", "PASS"] for ln in lines)
    assert any(ln.split()[:2] == ["m=8", "FAIL"] for ln in lines)
    assert "[2/2] good (sm_90a) PASS" in out.stdout  # the fixed-size kernel got no --m
    rows = {r["name"]: r for r in json.loads(_dg(env, "verify", dyn, fixed, "--m", "1,8", "--json").stdout)}
    assert rows["dyn"]["dynamic"] == {"letter": "m", "lo": 1, "hi": 16}
    assert [c["m"] for c in rows["dyn"]["m_cases"]] == [1, 8]
    assert rows["good"]["dynamic"] is None and rows["good"]["m_cases"] is None and rows["good"]["passed"]


def test_bench_prints_one_row_a_size(tmp_path):
    env = _fake_gpu_env(tmp_path)
    dyn = _dynamic_dir(tmp_path, DYNAMIC_BENCH)
    out = _dg(env, "bench", dyn)
    assert out.returncode == 0, out.stderr
    _, first, second, formulation = out.stdout.splitlines()
    assert first.split() == ["dyn", "m=1", "sm_90a", "2", "0.1", "20", "cublas", "5", "2.5", "-"]
    assert second.split()[:4] == ["dyn", "m=16", "sm_90a", "3"]
    assert "C^T=B^TA" in formulation
    (row,) = json.loads(_dg(env, "bench", dyn, "--json").stdout)
    assert row["us"] == 3.0 and row["m"] == 16 and [r["m"] for r in row["m_rows"]] == [1, 16]
    assert all(r["ratio_passes"] == [] and r["unstable"] is False for r in (row, *row["m_rows"]))


@pytest.mark.parametrize("sizes, words", [
    ("0,8", "--m 0,8: 0 is outside dyn's run-time range 1..16 of 'm'. Fix: give sizes in 1..16"),
    ("1,17", "17 is outside dyn's run-time range 1..16"),
    ("1,x", "--m 1,x: 'x' is not a whole number. Fix:"),
])
@pytest.mark.parametrize("command", ["verify", "bench"])
def test_sizes_the_kernel_cannot_take_are_refused_before_running(tmp_path, command, sizes, words):
    env = _fake_gpu_env(tmp_path)
    dyn = _dynamic_dir(tmp_path, "echo HARNESS-STARTED >&2; exit 9")
    out = _dg(env, command, dyn, "--m", sizes)
    assert out.returncode == 2 and words in out.stderr and "HARNESS-STARTED" not in out.stderr, out.stderr


def test_one_size_list_serves_kernels_of_different_ranges(tmp_path):
    # dyn (1..16) runs 1 and 8; wide (8..40) runs 8 and 32; each is told only its own sizes, and a note names the
    # sizes left out for each.
    env = _fake_gpu_env(tmp_path)
    dyn = _dynamic_dir(tmp_path, DYNAMIC_VERIFY)
    wide = _dynamic_dir(tmp_path, WIDE_VERIFY, "wide", 8, 40)
    out = _dg(env, "verify", dyn, wide, "--m", "1,8,32", "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert [c["m"] for c in rows["dyn"]["m_cases"]] == [1, 8], out.stderr
    assert [c["m"] for c in rows["wide"]["m_cases"]] == [8, 32] and rows["wide"]["passed"], out.stderr
    assert "note: dyn runs --m 1,8 only (32 outside its run-time range)" in out.stderr
    assert "note: wide runs --m 8,32 only (1 outside its run-time range)" in out.stderr


# A harness sized 8..40 that insists on being asked for sizes 8 and 32, and passes them.
WIDE_VERIFY = """case "$*" in *"--m 8,32"*) ;; *) echo '{"error":"asked for '"$*"'"}'; exit 4;; esac
echo '{"command":"verify","name":"wide","arch":"sm_90a","passed":true,"tol":0.01,"max_abs_err":0.0,"rel_err":0.0,
"first_fail":null,"api_null_rejected":true,"api_misaligned_rejected":true,"repeat":0,"repeat_differed":0,"runs":[],
"dynamic":{"letter":"m","lo":8,"hi":40},"api_m_rejected":true,"api_m_probes":[],"m_cases":[
{"m":8,"passed":true,"max_abs_err":0.0,"rel_err":0.0,"first_fail":null,"repeat_differed":0},
{"m":32,"passed":true,"max_abs_err":0.0,"rel_err":0.0,"first_fail":null,"repeat_differed":0}]}' | tr -d '\\n'
"""


@pytest.mark.parametrize("sizes, words", [
    ("8,64", "--m 8,64: 64 is outside the run-time range of every kernel given (dyn 1..16 of 'm', wide 20..40 of 'm')"),
    ("1,8", "--m 1,8: none is inside wide's run-time range 20..40 of 'm'. Fix: add sizes in 20..40, or run wide apart"),
])
def test_sizes_no_kernel_can_take_are_refused_before_running(tmp_path, sizes, words):
    env = _fake_gpu_env(tmp_path)
    dyn = _dynamic_dir(tmp_path, "echo HARNESS-STARTED >&2; exit 9")
    wide = _dynamic_dir(tmp_path, "echo HARNESS-STARTED >&2; exit 9", "wide", 20, 40)
    out = _dg(env, "bench", dyn, wide, "--m", sizes)
    assert out.returncode == 2 and words in out.stderr and "HARNESS-STARTED" not in out.stderr, out.stderr


def test_sizes_for_fixed_size_kernels_only_are_refused(tmp_path):
    env = _fake_gpu_env(tmp_path)
    fixed = _kernel_dir(tmp_path, "good", PASS)
    out = _dg(env, "verify", fixed, "--m", "1,8")
    assert out.returncode == 2 and "none of these kernels has a run-time size" in out.stderr


@pytest.mark.parametrize("command", ["verify", "bench"])
def test_help_teaches_the_sizes(command):
    out = subprocess.run([sys.executable, "-m", "dgemm_cli", command, "--help"], capture_output=True, text=True,
                         cwd=REPO, check=False)
    assert "--m LIST" in out.stdout and "run time" in out.stdout
