"""Each plan lists the arch features its kernels use (arch.FEATURES), and `build --arch` refuses a target that
lacks one: checked against the PTX the rendered .cu actually contains, so that a feature the renderer emits but
the plan does not list (as a dependent launch once was) fails here."""

from __future__ import annotations

import json
import re

import pytest

from dgemm_cli.arch import ARCHES, FEATURES, lowest_arch, unbuildable
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.cli.build_cmd import unbuildable_reason as _unbuildable
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS

# PTX (or launch API) text in a .cu -> the feature it needs. Written apart from the families' own lists.
PTX_FEATURES = {
    r"griddepcontrol\.": "griddepcontrol",
    r"cudaLaunchAttributeProgrammaticStreamSerialization": "griddepcontrol",
    r"cp\.async\.bulk": "tma",
    r"expect_tx": "tma",
    r"prefetch\.tensormap": "tma",
    r"fence\.mbarrier_init": "tma",
    r"barrier\.cluster|mapa\.shared|cudaLaunchAttributeClusterDimension|__cluster_dims__": "clusters",
    r"wgmma\.": "wgmma",
    r"setmaxnreg": "setmaxnreg",
    r"stmatrix": "stmatrix",
}

SPEC_PATHS = SPECS + sorted((REPO / "specs" / "epilogue").glob("*.yaml")) + sorted(
    (REPO / "specs" / "bench").glob("decode_[0-9]*.yaml"))


def used_features(cu: str) -> set[str]:
    return {feature for pattern, feature in PTX_FEATURES.items() if re.search(pattern, cu)}


def _render(spec, arch_name: str, family: str | None = None) -> dict[str, str]:
    views = analyse(spec)
    arch = ARCHES[arch_name]
    return render_sources(spec, views, make_plan(views, arch, family), plan_baseline(views), arch)


@pytest.mark.parametrize("path", SPEC_PATHS, ids=lambda p: p.stem)
def test_plan_json_lists_every_feature_the_kernels_use(path):
    spec = load_spec(path)
    files = _render(spec, "sm_90a")
    listed = set(json.loads(files["plan.json"])["build"]["arch_features"])
    assert used_features(files[f"{spec.name}.cu"]) <= listed <= set(FEATURES)


@pytest.mark.parametrize("path", SPEC_PATHS, ids=lambda p: p.stem)
def test_an_sm90a_folder_builds_for_sm80_or_is_refused_with_one_line(path):
    spec = load_spec(path)
    files = _render(spec, "sm_90a")
    plan = json.loads(files["plan.json"])
    why = _unbuildable(plan, ARCHES["sm_80"])
    used = used_features(files[f"{spec.name}.cu"])
    if why is None:  # it builds: nothing sm_90-only in the source, and its shared memory fits
        assert not used and plan["plan"]["smem_bytes"] <= ARCHES["sm_80"].smem_per_block
    else:
        assert "\n" not in why and ("sm_80 lacks" in why or "shared memory" in why)


def test_a_dependent_launch_gemv_names_griddepcontrol():
    """The first-hour bug: a one-block gemv planned for sm_90a launches dependently; sm_80's ptxas refuses that."""
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": {"m": 1, "n": 32768, "k": 64}})
    files = _render(spec, "sm_90a", "gemv")
    plan = json.loads(files["plan.json"])
    assert plan["plan"]["primary"]["splits"] == 1
    assert "griddepcontrol" in plan["build"]["arch_features"] and plan["build"]["requires_arch"] == ["sm_90a"]
    assert "griddepcontrol" in _unbuildable(plan, ARCHES["sm_80"])
    assert _unbuildable(plan, ARCHES["sm_90a"]) is None
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


def test_old_plan_json_without_features_falls_back_to_requires_arch():
    plan = {"build": {"requires_arch": ["sm_90a"]}, "plan": {"smem_bytes": 0}}
    assert "sm_90a" in _unbuildable(plan, ARCHES["sm_80"])
    assert _unbuildable(plan, ARCHES["sm_90a"]) is None
    big = {"build": {"arch_features": []}, "plan": {"smem_bytes": 200_000}}
    assert "shared memory" in _unbuildable(big, ARCHES["sm_86"])
