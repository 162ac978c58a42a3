"""Issue 44's sweep: every kernel of every spec in specs/ proved by Coq, as `gen` plans it (the GPU specs at their
arch, specs/cpu for the host backend), through `deepgemm verify --formal` as a user runs it. The longest test of
the suite (about 12 minutes on 2 cores, docs/RESULTS.md "Verification"); marked slow so that it starts first."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgemm_cli.families import FAMILIES

from .formal_support import needs_coq, prove_every_kernel

ROOT = Path(__file__).resolve().parents[1]
HOST = ROOT / "specs" / "cpu"
GPU_SPECS = sorted(p for p in (ROOT / "specs").rglob("*.yaml") if HOST not in p.parents)
HOST_SPECS = sorted(HOST.glob("*.yaml"))


@pytest.mark.slow(minutes=15)
@needs_coq
def test_every_kernel_of_every_repository_spec_proves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(GPU_SPECS) > 150 and HOST_SPECS
    rows = prove_every_kernel(GPU_SPECS)
    # Every registered family has kernels among them: one whose specs stopped planning would go unproved unseen.
    assert {x["family"] for x in rows} == {name for name, f in FAMILIES.items() if f.backend == "cuda"}
    assert {x["family"] for x in prove_every_kernel(HOST_SPECS, "--arch", "cpu")} == {
        name for name, f in FAMILIES.items() if f.backend != "cuda"}
