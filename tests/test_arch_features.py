"""Each plan lists the arch features its kernels use (arch.FEATURES), and `build --arch` refuses a target that
lacks one: checked against the PTX that nvcc makes of the rendered folder (the .cu and the dg/ headers it
instantiates), so that a feature the kernels use but the plan does not list (as a dependent launch once was) fails
here."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from dgemm_cli.arch import ARCHES, FEATURES, lowest_arch, unbuildable
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.cli.build_cmd import unbuildable_reason
from dgemm_cli.plan import make_plan
from dgemm_cli.records import PlanRecord
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.toolchain import find_nvcc
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS

# PTX text -> the feature it needs. Written apart from the families' own lists.
PTX_FEATURES = {
    r"griddepcontrol\.": "griddepcontrol",
    r"cp\.async\.bulk": "tma",
    r"expect_tx": "tma",
    r"prefetch\.tensormap": "tma",
    r"fence\.mbarrier_init": "tma",
    r"barrier\.cluster|mapa\.shared|\.reqnctapercluster|\.explicitcluster": "clusters",
    r"wgmma\.": "wgmma",
    r"setmaxnreg": "setmaxnreg",
    r"stmatrix": "stmatrix",
}

SPEC_PATHS = SPECS + sorted((REPO / "specs" / "epilogue").glob("*.yaml")) + sorted(
    (REPO / "specs" / "bench").glob("decode_[0-9]*.yaml"))


def used_features(ptx: str) -> set[str]:
    return {feature for pattern, feature in PTX_FEATURES.items() if re.search(pattern, ptx)}


def _render(spec, arch_name: str, family: str | None = None) -> dict[str, str]:
    views = analyse(spec)
    arch = ARCHES[arch_name]
    return render_sources(spec, views, make_plan(views, arch, family), plan_baseline(views), arch)


def _unbuildable(files: dict[str, str], arch: str) -> str | None:
    return unbuildable_reason(PlanRecord.from_dict(json.loads(files["plan.json"])), ARCHES[arch])


def _ptx(files: dict[str, str], name: str, folder: Path) -> str:
    """The PTX nvcc makes of the rendered folder's .cu for sm_90a: only what the kernels instantiate."""
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    nvcc = find_nvcc()
    cmd = [*nvcc.compile_prefix(), "-std=c++17", "-O3", "-arch=sm_90a", "-ptx", str(folder / f"{name}.cu"),
           "-o", str(folder / "out.ptx")]
    run = subprocess.run(cmd, capture_output=True, text=True, env=nvcc.run_env(os.environ), timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    return (folder / "out.ptx").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("path", SPEC_PATHS, ids=lambda p: p.stem)
def test_plan_json_lists_every_feature_the_kernels_use(path, tmp_path):
    """What the PTX uses is listed; and an sm_90a folder that `build --arch sm_80` would accept uses nothing sm_90
    has alone, while one it refuses says why in one line."""
    spec = load_spec(path)
    files = _render(spec, "sm_90a")
    plan = json.loads(files["plan.json"])
    used = used_features(_ptx(files, spec.name, tmp_path))
    assert used <= set(plan["build"]["arch_features"]) <= set(FEATURES)
    why = _unbuildable(files, "sm_80")
    if why is None:
        assert not used and plan["plan"]["smem_bytes"] <= ARCHES["sm_80"].smem_per_block
    else:
        assert "\n" not in why and ("sm_80 lacks" in why or "shared memory" in why)


@pytest.mark.parametrize("path", SPEC_PATHS, ids=lambda p: p.stem)
def test_an_sm90a_folder_for_sm80_builds_or_is_refused_with_one_line(path):
    files = _render(load_spec(path), "sm_90a")
    plan = json.loads(files["plan.json"])
    why = _unbuildable(files, "sm_80")
    if why is None:
        assert plan["build"]["requires_arch"] == [] and plan["plan"]["smem_bytes"] <= ARCHES["sm_80"].smem_per_block
    else:
        assert "\n" not in why and ("sm_80 lacks" in why or "shared memory" in why)


def test_a_dependent_launch_gemv_names_griddepcontrol():
    """The first-hour bug: a one-block gemv planned for sm_90a launches dependently; sm_80's ptxas refuses that."""
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": {"m": 1, "n": 32768, "k": 64}})
    files = _render(spec, "sm_90a", "gemv")
    plan = json.loads(files["plan.json"])
    assert plan["plan"]["primary"]["splits"] == 1
    assert "griddepcontrol" in plan["build"]["arch_features"] and plan["build"]["requires_arch"] == ["sm_90a"]
    assert "griddepcontrol" in _unbuildable(files, "sm_80")
    assert _unbuildable(files, "sm_90a") is None
    # Planned for sm_80 the same gemv launches plainly and runs anywhere.
    plan80 = json.loads(_render(spec, "sm_80", "gemv")["plan.json"])
    assert plan80["build"]["arch_features"] == [] and plan80["build"]["requires_arch"] == []


def test_unbuildable_names_each_missing_feature_and_unknown_ones():
    assert unbuildable([], ARCHES["sm_80"]) is None
    assert unbuildable(["clusters", "wgmma"], ARCHES["sm_90a"]) is None
    why = unbuildable(["clusters", "wgmma"], ARCHES["sm_86"])
    assert "clusters" in why and "wgmma" in why and "sm_86 lacks" in why
    assert "does not know" in unbuildable(["warp_teleport"], ARCHES["sm_90a"])
    assert lowest_arch(frozenset()) is None and lowest_arch(frozenset({"tma"})) == "sm_90a"


def test_a_plan_whose_shared_memory_does_not_fit_is_refused():
    files = _render(load_spec(SPECS[0]), "sm_90a")
    record = PlanRecord.from_dict(json.loads(files["plan.json"]))
    big = dataclasses.replace(record, arch_features=(), smem_bytes=200_000)
    assert "shared memory" in unbuildable_reason(big, ARCHES["sm_86"])
    assert unbuildable_reason(dataclasses.replace(big, smem_bytes=1024), ARCHES["sm_86"]) is None
