"""Planner invariants: every plan covers the problem, fits the arch, and says why."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import ARCHES, get_arch
from dgemm_cli.constraints import ConstraintGraph, Unsatisfiable, solve
from dgemm_cli.families import cta
from dgemm_cli.families.cta import FFMA, MAX_ACCUM_PER_THREAD, MMA, build_tiling_graph, copy_elems
from dgemm_cli.families.solving import best
from dgemm_cli.randspec import random_spec
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import SPECS


def make_plan(views, arch):
    """The cta family's best plan."""
    return best(cta.problem(views, arch))[0]


def check_invariants(views, plan, arch) -> None:
    # Tiles cover the problem exactly once.
    assert plan.tiles_m == math.ceil(views.m / plan.block_m)
    assert plan.tiles_n == math.ceil(views.n / plan.block_n)
    assert plan.tiles == views.batch * plan.tiles_m * plan.tiles_n
    assert plan.tiles_m * plan.block_m >= views.m and (plan.tiles_m - 1) * plan.block_m < views.m
    assert plan.tiles_n * plan.block_n >= views.n and (plan.tiles_n - 1) * plan.block_n < views.n
    # Resources within the arch's limits.
    assert plan.smem_bytes <= arch.smem_per_block
    assert plan.threads % 32 == 0 and 32 <= plan.threads <= 256
    assert plan.block_m * plan.block_n // plan.threads <= MAX_ACCUM_PER_THREAD
    if plan.instruction == MMA:
        assert plan.block_k % 16 == 0
        assert (plan.block_m // plan.warps_m) % 16 == 0 and (plan.block_n // plan.warps_n) % 16 == 0
        assert plan.threads == 32 * plan.warps_m * plan.warps_n
    else:
        assert views.operands["A"].dtype == "f32"
        assert plan.threads == (plan.block_m // plan.thread_m) * (plan.block_n // plan.thread_n)
    # Loaders only use what the views allow.
    for ld, facts, extent in ((plan.a, views.operands["A"], plan.block_m), (plan.b, views.operands["B"], plan.block_n)):
        if ld.kind == "cp_async":
            assert ld.vector_elems == copy_elems(facts, ld.smem_inner, aligned=True)
            assert ld.vector_elems * facts.elem_bytes in (4, 8, 16)
            run = plan.block_k if ld.smem_inner == "k" else extent
            assert run % ld.vector_elems == 0
            if ld.runtime_align:
                assert ld.fallback is not None and ld.vector_elems > facts.vector_elems
            else:
                assert ld.vector_elems <= max(facts.vector_elems, 1) or ld.smem_inner != facts.unit_role
    assert plan.index_type == ("long long" if views.needs_int64 else "int")
    # Every choice has a decision with a reason.
    assert all(d.summary() for d in plan.decisions)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", list(ARCHES))
def test_example_specs_plan_within_limits(path, arch):
    views = analyse(load_spec(path))
    check_invariants(views, make_plan(views, get_arch(arch)), get_arch(arch))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), arch=st.sampled_from(list(ARCHES)))
def test_random_specs_plan_within_limits(seed, arch):
    spec = parse_spec(random_spec(random.Random(seed), "p"))
    views = analyse(spec)
    check_invariants(views, make_plan(views, get_arch(arch)), get_arch(arch))


def test_instruction_follows_dtype():
    for dtype, want in (("f16", MMA), ("bf16", MMA), ("f32", FFMA)):
        views = analyse(parse_spec({"name": "x", "dtype": dtype, "gemm": {"m": 64, "n": 64, "k": 64}}))
        plan = make_plan(views, get_arch("sm_90a"))
        assert plan.instruction == want
        assert plan.decisions[0].node == "instruction"


def test_f32_rejects_tensor_cores_with_reason():
    views = analyse(parse_spec({"name": "x", "dtype": "f32", "gemm": {"m": 64, "n": 64, "k": 64}}))
    plan = make_plan(views, get_arch("sm_80"))
    (rejected,) = plan.decisions[0].rejected
    assert rejected.value == MMA and "tensor-core dtypes" in rejected.why


def test_vectorised_view_uses_cp_async_and_strided_view_gathers():
    dense = analyse(parse_spec({"name": "x", "gemm": {"m": 128, "n": 128, "k": 128},
                                "operands": {"A": {"align": 16}, "B": {"align": 16}}}))
    plan = make_plan(dense, get_arch("sm_90a"))
    assert plan.a.kind == plan.b.kind == "cp_async" and plan.a.vector_elems == 8
    assert plan.a.runtime_align == 0  # 16-byte alignment was promised: no run-time check
    strided = analyse(parse_spec({"name": "x", "gemm": {"m": 128, "n": 128, "k": 128},
                                  "operands": {"A": {"strides": [256, 2]}}}))
    plan = make_plan(strided, get_arch("sm_90a"))
    assert plan.a.kind == "gather"
    loader_a = next(d for d in plan.decisions if d.node == "loader_a")
    assert any("cp.async A" in r.why for r in loader_a.rejected)


def test_default_alignment_dispatches_at_run_time():
    views = analyse(parse_spec({"name": "x", "gemm": {"m": 128, "n": 128, "k": 128}}))
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.a.kind == "cp_async" and plan.a.runtime_align == 16
    assert plan.a.fallback is not None and plan.a.fallback.kind == "gather_direct"


def test_shared_memory_limit_depends_on_arch():
    views = analyse(parse_spec({"name": "x", "gemm": {"m": 4096, "n": 4096, "k": 4096},
                                "operands": {"A": {"align": 16}, "B": {"align": 16}}}))
    graph = build_tiling_graph(views, get_arch("sm_86"), MMA)
    big = {"block_m": 128, "block_n": 128, "block_k": 64, "warps_m": 2, "warps_n": 4, "stages": 4,
           "smem_inner_a": "k", "smem_inner_b": "n", "loader_a": "cp_async", "loader_b": "cp_async"}
    assert any(v.startswith("shared memory") for v in graph.violations(big))
    graph90 = build_tiling_graph(views, get_arch("sm_90a"), MMA)
    assert not any(v.startswith("shared memory") for v in graph90.violations(big))


def test_int64_index_for_huge_views():
    views = analyse(parse_spec({"name": "x", "gemm": {"m": 4, "n": 4, "k": 4},
                                "operands": {"A": {"strides": [2**30, 1]}}}))
    assert make_plan(views, get_arch("sm_90a")).index_type == "long long"


def test_solver_reports_unsatisfiable_and_explains():
    g = ConstraintGraph()
    g.node("x", (1, 2, 3), "a number")
    g.constrain("odd", "problem", ["x"], lambda a: None if a["x"] % 2 else "even")
    sol = solve(g, lambda a: -a["x"])
    assert sol.assignment == {"x": 3} and sol.feasible == 2
    why = {r.value: r.why for r in sol.decisions[0].rejected}
    assert why[2].startswith("odd") and "cost model" in why[1]
    g.constrain("big", "problem", ["x"], lambda a: None if a["x"] > 5 else "small")
    with pytest.raises(Unsatisfiable):
        solve(g, lambda a: 0)
