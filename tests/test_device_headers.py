"""The shipped device headers (templates/dg/, a generated folder's dg/) are real CUDA: each compiles on its own, for
the oldest and the newest arch, and each family's kernel templates compile when instantiated with hand-written
traits (tests/cuda/*.cu), as a generated folder instantiates them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dgemm_cli.toolchain import find_nvcc

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "templates"
HEADERS = sorted((TEMPLATES / "dg").glob("*.cuh"))
INSTANTIATIONS = sorted((REPO / "tests" / "cuda").glob("*.cu"))
GENCODE = {"sm_80": "-gencode=arch=compute_80,code=sm_80", "sm_89": "-gencode=arch=compute_89,code=sm_89",
           "sm_90a": "-gencode=arch=compute_90a,code=sm_90a"}


def _compile(source: Path, arch: str, tmp_path: Path) -> subprocess.CompletedProcess:
    nvcc = find_nvcc()
    cmd = [*nvcc.compile_prefix(), "-std=c++17", "-O3", GENCODE[arch], "-I", str(TEMPLATES), "-Werror",
           "all-warnings", "-c", str(source), "-o", str(tmp_path / "out.o")]
    return subprocess.run(cmd, capture_output=True, text=True, env=nvcc.run_env(os.environ), timeout=900, check=False)


def test_every_header_and_instantiation_is_listed():
    assert {h.name for h in HEADERS} >= {"view.cuh", "ptx.cuh", "launch.cuh", "convert.cuh", "activations.cuh",
                                         "reduce.cuh", "gemv.cuh"}
    # every family header has an instantiation test
    # (a family's several headers, dg/<family>_<variant>.cuh, share its tests/cuda/<family>_*.cu)
    families = {h.stem.split("_")[0] for h in HEADERS} - {"view", "ptx", "launch", "convert", "activations", "reduce",
                                                          "wgmma"}
    tested = {p.stem.split("_")[0] for p in INSTANTIATIONS}
    assert families <= tested, f"family headers without a tests/cuda instantiation: {sorted(families - tested)}"


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
def test_header_compiles_on_its_own(header, arch, tmp_path):
    """A header included alone compiles: it includes what it uses, and sm_90 instructions sit in templates that an
    sm_80 translation unit does not instantiate."""
    source = tmp_path / "one.cu"
    source.write_text(f'#include "dg/{header.name}"\n')
    run = _compile(source, arch, tmp_path)
    assert run.returncode == 0, run.stderr


# The families that also plan for sm_80 (no clusters, TMA, wgmma or dependent launches) instantiate there too.
BEFORE_SM90 = {"cta_instantiate.cu", "wq_instantiate.cu", "wqtc_instantiate.cu"}
# The e4m3 families that also plan for sm_89 (mma.sync m16n8k32) instantiate there.
AT_SM89 = {"fp8_cta_instantiate.cu"}


@pytest.mark.slow
@pytest.mark.parametrize("source, arch", [(p, "sm_90a") for p in INSTANTIATIONS]
                         + [(p, "sm_80") for p in INSTANTIATIONS if p.name in BEFORE_SM90]
                         + [(p, "sm_89") for p in INSTANTIATIONS if p.name in AT_SM89],
                         ids=lambda x: x.name if isinstance(x, Path) else x)
def test_family_templates_instantiate(source, arch, tmp_path):
    run = _compile(source, arch, tmp_path)
    assert run.returncode == 0, run.stderr
