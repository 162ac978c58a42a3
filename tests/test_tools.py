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
