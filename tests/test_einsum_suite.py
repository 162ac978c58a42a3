"""specs/einsum/: opt_einsum's two-operand equations as specs for the GPU suite (tools/einsum_suite.sh).

The files are what tools/einsum_specs.py writes; each loads, plans and renders; the equations
deepgemm refuses (diagonals) are refused with the reason. The slow test compiles one spec of each
new form with nvcc.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.build import build
from dgemm_cli.errors import SpecError
from dgemm_cli.pipeline import generate
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO
from .test_build import nvcc_or_skip

SUITE_DIR = REPO / "specs" / "einsum"
SUITE_SPECS = sorted(SUITE_DIR.glob("*.yaml"))


def _tool():
    spec = importlib.util.spec_from_file_location("einsum_specs", REPO / "tools" / "einsum_specs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def test_files_are_what_the_tool_writes():
    files = TOOL.suite()
    assert sorted(p.name for p in SUITE_SPECS) == sorted(files), "run: python tools/einsum_specs.py"
    for path in SUITE_SPECS:
        assert path.read_text() == files[path.name], f"{path.name} edited by hand; run tools/einsum_specs.py"


def test_every_two_operand_equation_of_opt_einsum_has_four_variants():
    equations = {}
    for path in SUITE_SPECS:
        spec = load_spec(path)
        equations.setdefault(path.read_text().split('contraction: "', 1)[1].split('"', 1)[0], []).append(spec)
    listed = [e for e, _, _ in TOOL.OPT_EINSUM + TOOL.EXTRAS]
    assert sorted(equations) == sorted(listed)
    assert len(TOOL.OPT_EINSUM) == 17  # the list's 22 two-operand entries less the 5 diagonals
    for equation, specs in equations.items():
        assert sorted((s.A.dtype, max(s.sizes.values()) >= 1000) for s in specs) == [
            ("f16", False), ("f16", True), ("f32", False), ("f32", True)], equation


@pytest.mark.parametrize("path", SUITE_SPECS, ids=lambda p: p.stem)
def test_every_suite_spec_plans_and_renders(path):
    spec = load_spec(path)
    assert spec.name == path.stem
    views = analyse(spec)
    plan = make_plan(views, get_arch(spec.arch))
    render_sources(spec, views, plan, plan_baseline(views), get_arch(spec.arch))


@pytest.mark.parametrize("equation", TOOL.DIAGONALS)
def test_diagonals_of_the_list_are_refused(equation):
    with pytest.raises(SpecError, match="appears twice in .*diagonal"):
        parse_spec({"name": "d", "contraction": equation, "sizes": {"a": 3, "b": 5, "c": 7}}, "d.yaml")


REPRESENTATIVE = [
    "ein_ab_ba_small_f16",  # full reduction, gathers
    "ein_ab_ab_large_f32",  # full reduction, FFMA, K = 6 M in one block
    "ein_abc_cd_to_ad_small_f32",  # summed in A only
    "ein_ab_bcd_to_ad_large_f16",  # summed in B only
    "ein_a_scalar_to_a_small_f16",  # scalar input
    "ein_abcd_ad_small_f32",  # implicit output, N empty
]


@pytest.mark.slow
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_representative_suite_specs_compile_without_spills(name, tmp_path):
    nvcc = nvcc_or_skip()
    g = generate(load_spec(SUITE_DIR / f"{name}.yaml"), get_arch("sm_90a"), tmp_path)
    res = build(g.directory, "sm_90a", nvcc)
    assert res.ok, res.error
    for k in res.kernels:
        assert not k.spills and k.stack_bytes == 0, k


def test_suite_names_are_c_identifiers_and_unique():
    names = [TOOL.spec_name(e, scale, dtype) for e, _, _ in TOOL.OPT_EINSUM + TOOL.EXTRAS
             for scale, dtype in TOOL.VARIANTS]
    assert len(set(names)) == len(names)
    assert all(name.isidentifier() and name.isascii() for name in names)
    assert Path(SUITE_DIR / f"{names[0]}.yaml").is_file()
