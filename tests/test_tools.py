"""The maintained runners that need no GPU run against today's package (tools/README.md)."""
from __future__ import annotations

import subprocess
import sys

from .conftest import REPO


def _tool(*args: str) -> str:
    run = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_model_vs_tune_reads_the_tuning_database_it_cites():
    out = _tool("tools/model_vs_tune.py", "docs/results/2026-11-30-h200-tuning-specs-level2-1c97a3b.json",
                "specs/odd_tails.yaml", "specs/square_bf16.yaml")
    assert out.splitlines()[0].split()[:3] == ["problem", "timed", "rho"]
    assert "odd_tails" in out and "mean rho" in out


def test_fit_calibration_fits_every_family_of_the_table():
    out = _tool("tools/fit_calibration.py")
    assert "pairs misordered" in out


def test_perf_summary_leaves_out_the_problems_that_failed_verify(tmp_path):
    """tools/perf_summary.py over a bench list: the distribution, by class, and with --verify a failed problem is left
    out and counted, one not verified counted."""
    import json

    def plan_dir(name: str, family: str) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "plan.json").write_text(json.dumps(
            {"plan": {"family": family, "primary": {"block_m": 128, "block_n": 128, "block_k": 64}}}))

    bench = [{"name": "perf_llm_0000", "ratio": 1.2, "us": 10.0, "baseline_us": 12.0, "baseline_formulation": "C=AB"},
             {"name": "perf_llm_0001", "ratio": 0.5, "us": 20.0, "baseline_us": 10.0, "baseline_formulation": "C=AB"},
             {"name": "perf_f32_0002", "ratio": 0.9, "us": 30.0, "baseline_us": 27.0, "baseline_formulation": "C=AB"}]
    for r in bench:
        plan_dir(r["name"], "hopper")
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    (tmp_path / "verify.json").write_text(json.dumps([{"name": "perf_llm_0000", "passed": True},
                                                      {"name": "perf_llm_0001", "passed": False}]))
    out = _tool("tools/perf_summary.py", str(tmp_path / "bench.json"), str(tmp_path), "--verify",
                str(tmp_path / "verify.json"), "--json", str(tmp_path / "summary.json"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["all"]["count"] == 2 and summary["all"]["min"] == 0.9
    assert summary["verified"] == {"passed": 1, "failed": 1, "not_verified": 1}
    assert "perf_llm_0001: failed verify, left out" in out and "hopper 128x128x64" in out
