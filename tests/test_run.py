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
from dgemm_cli.render import generate
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
    table = _dg(env, "bench", good).stdout
    header, line = table.splitlines()
    assert header.split()[:3] == ["kernel", "arch", "µs"]
    assert line.split() == ["good", "sm_90a", "10", "1.5", "100", "cublas", "20", "2"]


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
