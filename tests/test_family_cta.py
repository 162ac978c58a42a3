"""Planner invariants: every plan covers the problem, fits the arch, and says why."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import ARCHES, get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.constraints import ConstraintGraph, Unsatisfiable, solve
from dgemm_cli.families import cta
from dgemm_cli.families.cta import (
    FFMA,
    FFMA_MAX_ACCUM,
    FFMA_UNROLLED_MAX,
    FULL_REGISTER_FILE,
    MAX_ACCUM_PER_THREAD,
    MMA,
    OTHER,
    REGISTER_CAP,
    build_tiling_graph,
    copy_elems,
    transposed_store_ways,
)
from dgemm_cli.families.solving import best
from dgemm_cli.plan import make_plan as make_full_plan
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS


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
    accumulators = plan.block_m * plan.block_n // plan.threads
    if plan.instruction == MMA:
        assert accumulators <= MAX_ACCUM_PER_THREAD
        assert plan.block_k % 16 == 0
        assert (plan.block_m // plan.warps_m) % 16 == 0 and (plan.block_n // plan.warps_n) % 16 == 0
        assert plan.threads == 32 * plan.warps_m * plan.warps_n
    else:
        assert views.operands["A"].dtype == "f32"
        assert plan.threads == (plan.block_m // plan.thread_m) * (plan.block_n // plan.thread_n)
        # The registers decision caps what __launch_bounds__ allows, and the thread tile fits it.
        assert plan.register_cap in (REGISTER_CAP, FULL_REGISTER_FILE)
        assert plan.register_cap == plan.assignment["registers"]
        assert accumulators <= FFMA_MAX_ACCUM[plan.register_cap]
        # A thread's rows (columns) are groups read as one 4-, 8- or 16-byte shared vector.
        assert plan.frag_m in (1, 2, 4) and plan.thread_m % plan.frag_m == 0
        assert plan.frag_n in (1, 2, 4) and plan.thread_n % plan.frag_n == 0
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
        if ld.kind == "transpose":  # loads along the stride-1 k, stored into the [k][m] / [k][n] tile
            assert plan.instruction == FFMA and facts.unit_role == "k" and ld.smem_inner == OTHER[ld.operand]
            assert ld.vector_elems == facts.vector_elems_aligned
            if ld.runtime_align:
                assert ld.fallback.kind == "transpose" and ld.fallback.vector_elems == facts.vector_elems
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



def test_solver_names_ties_and_keeps_a_decimal_under_one_percent():
    g = ConstraintGraph()
    g.node("x", (1, 2, 3, 4), "a number")
    g.constrain("not four", "problem", ["x"], lambda a: "four" if a["x"] == 4 else None)
    costs = {1: 10.0, 2: 10.0, 3: 10.04}
    sol = solve(g, lambda a: costs[a["x"]])
    decision = sol.decisions[0]
    why = {r.value: r.why for r in decision.rejected}
    assert sol.assignment == {"x": 1}  # the tie goes to the earlier value
    assert why[2] == "ties (cost model): the earlier value in the domain is kept"
    assert why[3] == "costs +0.4% (cost model)" and why[4].startswith("not four")
    assert decision.summary() == "x = 1 (cheapest of 4 by the cost model)"
    costs[3] = 10.0  # every priced value ties
    assert solve(g, lambda a: costs[a["x"]]).decisions[0].summary() == (
        "x = 1 (ties by the cost model: the first of 3 in the domain)")
    costs.update({2: 13.0, 3: 10.0})  # a clear loss keeps the rounded share
    assert {r.value: r.why for r in solve(g, lambda a: costs[a["x"]]).decisions[0].rejected}[2] == (
        "costs +30% (cost model)")

# ------------------------------------------------------------------------------------------------
# The FFMA path (f32 on the CUDA cores)

SQ4096_F32 = REPO / "specs" / "bench" / "sq4096_f32.yaml"


def _f32(gemm: dict, **operands) -> object:
    return analyse(parse_spec({"name": "x", "dtype": "f32", "gemm": gemm,
                               "operands": {x: operands.get(x, {"layout": "row"}) for x in "ABC"}}))


def _decision(plan, node: str):
    return next(d for d in plan.decisions if d.node == node)


def test_large_f32_product_takes_square_tiles_of_vector_fragments():
    views = analyse(load_spec(SQ4096_F32))
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.instruction == FFMA and (plan.block_m, plan.block_n) == (128, 128)
    assert plan.thread_m * plan.thread_n >= 64 and plan.frag_m == plan.frag_n == 4  # 16-byte shared loads
    # A is contiguous along k: 16-byte loads along k, stored transposed into [k][m]; the spec promises 4-byte
    # alignment only, so a pointer check picks element loads otherwise.
    assert (plan.a.kind, plan.a.vector_elems, plan.a.smem_inner) == ("transpose", 4, "m")
    assert plan.a.runtime_align == 16 and (plan.a.fallback.kind, plan.a.fallback.vector_elems) == ("transpose", 1)
    assert (plan.b.kind, plan.b.vector_elems, plan.b.smem_inner) == ("cp_async", 4, "n")
    # Each transposing alternative the model ranked is in the decision with its reason.
    loader_a = _decision(plan, "loader_a")
    assert {r.value for r in loader_a.rejected} == {"cp_async", "gather"}
    assert _decision(plan, "registers").value == plan.register_cap


def test_transposed_loads_need_a_view_contiguous_along_k():
    views = _f32({"m": 1024, "n": 1024, "k": 1024}, B={"layout": "col"})
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.b.kind == "transpose" and plan.b.smem_inner == "n"  # B[n][k] read along k, stored [k][n]
    row_b = make_plan(_f32({"m": 1024, "n": 1024, "k": 1024}), get_arch("sm_90a"))
    why = {r.value: r.why for r in _decision(row_b, "loader_b").rejected}
    assert why["transpose"].startswith("transpose B: B is contiguous along n, not k")
    strided = make_plan(_f32({"m": 512, "n": 512, "k": 512}, A={"strides": [1024, 2]}), get_arch("sm_90a"))
    assert strided.a.kind != "transpose"


def test_two_transposing_loaders_pipeline_two_stages():
    views = _f32({"m": 1024, "n": 1024, "k": 1024}, B={"layout": "col"})
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.a.kind == plan.b.kind == "transpose" and plan.stages == 2
    why = {r.value: r.why for r in _decision(plan, "stages").rejected}
    assert "register-staged loads overlap exactly one k-tile" in why[3]


def test_transposes_may_hold_two_k_tiles_in_registers_with_a_third_stage():
    views = _f32({"m": 1024, "n": 256, "k": 2048}, B={"layout": "col"})
    graph = build_tiling_graph(views, get_arch("sm_90a"), FFMA)
    tile = {"block_m": 64, "block_n": 32, "block_k": 32, "thread_m": 2, "thread_n": 4, "smem_inner_a": "m",
            "smem_inner_b": "n", "loader_a": "transpose", "loader_b": "transpose", "registers": FULL_REGISTER_FILE}
    assert not graph.violations({**tile, "stages": 2, "transpose_depth": 1})
    assert not graph.violations({**tile, "stages": 3, "transpose_depth": 2})
    assert any("overlap exactly two: 3 stages" in v for v in graph.violations({**tile, "stages": 4,
                                                                              "transpose_depth": 2}))
    assert any("need a third stage" in v for v in graph.violations({**tile, "stages": 2, "transpose_depth": 2}))
    cp_async = {**tile, "loader_a": "cp_async", "loader_b": "cp_async", "stages": 3, "transpose_depth": 2}
    assert any("no transposing loader" in v for v in graph.violations(cp_async))
    # Two sets double what a thread stages: 8 elements of A's 64 x 32 k-tile each.
    assert cta.staged_per_thread({**tile, "transpose_depth": 2}, "a", FFMA) == 16
    assert cta.staged_per_thread({**tile, "transpose_depth": 1}, "a", FFMA) == 8
    # The small problem's model pick keeps two k-tiles of its transposes in flight.
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.transpose_depth == 2 and plan.stages >= 3
    assert "TRANSPOSE_DEPTH = 2" in _cu(views)


def test_register_decision_bounds_the_thread_tile():
    views = analyse(load_spec(SQ4096_F32))
    graph = build_tiling_graph(views, get_arch("sm_90a"), FFMA)
    node = next(n for n in graph.nodes if n.name == "registers")
    assert node.domain == (REGISTER_CAP, FULL_REGISTER_FILE)
    big = {"block_m": 128, "block_n": 128, "block_k": 16, "thread_m": 8, "thread_n": 16, "stages": 3,
           "smem_inner_a": "m", "smem_inner_b": "n", "loader_a": "transpose", "loader_b": "cp_async"}
    # 128 accumulators a thread need the whole register file; 64 fit the cap that lets two blocks share an SM.
    assert any(v.startswith("register budget") for v in graph.violations({**big, "registers": REGISTER_CAP}))
    assert not graph.violations({**big, "registers": FULL_REGISTER_FILE})
    assert not graph.violations({**big, "thread_n": 8, "registers": REGISTER_CAP})
    # Under the cap, a deeper k-tile's staged elements spill (ptxas): the live-register bound says so.
    deep = {**big, "thread_n": 8, "block_k": 32, "registers": REGISTER_CAP}
    assert any(v.startswith("live registers") for v in graph.violations(deep))
    # Gathers keep the whole register file (they spill under the cap).
    gather = {**big, "thread_n": 8, "block_k": 8, "loader_b": "gather", "registers": REGISTER_CAP}
    assert any(v.startswith("gathers keep the register file") for v in graph.violations(gather))


def test_the_unrolled_ffma_k_tile_stays_within_the_instruction_cache():
    views = analyse(load_spec(SQ4096_F32))
    graph = build_tiling_graph(views, get_arch("sm_90a"), FFMA)
    tile = {"block_m": 128, "block_n": 128, "block_k": 16, "thread_m": 8, "thread_n": 16, "stages": 3,
            "smem_inner_a": "m", "smem_inner_b": "n", "loader_a": "cp_async", "loader_b": "cp_async",
            "registers": FULL_REGISTER_FILE}
    assert not [v for v in graph.violations(tile) if v.startswith("unrolled k-tile")]  # 2048 FFMAs
    deeper = [v for v in graph.violations({**tile, "block_k": 32}) if v.startswith("unrolled k-tile")]
    assert deeper and "4096 FFMAs" in deeper[0]
    assert not [v for v in graph.violations({**tile, "block_k": 32, "thread_n": 8}) if v.startswith("unrolled")]
    # [2048, 512] x [512, 4096]: the 8x16 thread tile at block_k 16 (measured 218 µs against 311 at block_k 32).
    plan = make_plan(_f32({"m": 2048, "n": 4096, "k": 512}), get_arch("sm_90a"))
    assert plan.thread_m * plan.thread_n * plan.block_k <= FFMA_UNROLLED_MAX


def test_register_cap_is_taken_only_where_it_adds_blocks_an_sm():
    # 264 tiles on 132 SMs: two blocks an SM either way, so the cap would only risk spills.
    views = _f32({"m": 1000, "n": 1030, "k": 999})
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.register_cap == FULL_REGISTER_FILE
    why = {r.value: r.why for r in _decision(plan, "registers").rejected}
    assert "cost model" in why[REGISTER_CAP] or why[REGISTER_CAP].startswith(("live registers", "staged loads"))


def test_transposed_stores_bank_conflicts():
    # Lanes take consecutive 4-element chunks of a row along k and store them down [k][m] rows of 132 words:
    # two chunks a row (BK 8) land in disjoint banks, four (BK 16) in two ways.
    assert transposed_store_ways(128, 8, 4, 132) == 1
    assert transposed_store_ways(128, 16, 4, 132) == 2
    assert transposed_store_ways(128, 8, 1, 132) == 1


def test_mma_graph_has_no_ffma_nodes():
    """The mma.sync path's decisions, and so its kernels, do not change with the FFMA ones."""
    views = analyse(parse_spec({"name": "x", "gemm": {"m": 4096, "n": 4096, "k": 4096}}))
    graph = build_tiling_graph(views, get_arch("sm_90a"), MMA)
    nodes = {n.name: n.domain for n in graph.nodes}
    assert "registers" not in nodes and "thread_m" not in nodes
    assert nodes["loader_a"] == nodes["loader_b"] == ("cp_async", "gather")


def _cu(views, arch: str = "sm_90a") -> str:
    spec = views.spec
    return render_sources(spec, views, make_full_plan(views, get_arch(arch)), plan_baseline(views),
                          get_arch(arch))[f"{spec.name}.cu"]


def _files(views, arch: str = "sm_90a") -> dict[str, str]:
    spec = views.spec
    return render_sources(spec, views, make_full_plan(views, get_arch(arch)), plan_baseline(views), get_arch(arch))


def test_ffma_kernel_renders_the_plan():
    views = analyse(load_spec(SQ4096_F32))
    plan = make_full_plan(views, get_arch("sm_90a")).primary
    files = _files(views)
    cu = files["sq4096_f32.cu"]
    # The traits carry the plan: the FFMA path and its thread tile (dg/cta.cuh derives the vector fragments).
    assert '#include "dg/cta.cuh"' in cu and "dg/cta.cuh" in files
    assert "static constexpr bool MMA = false;  // FFMA" in cu
    assert f"static constexpr int TM = {plan.thread_m}, TN = {plan.thread_n};" in cu
    assert f"SMEM_BYTES = {plan.smem_bytes};" in cu
    # A: 16-byte loads along k, stored transposed, or single elements where the pointer fails the check.
    assert "using ALoadTranspose16 = dg::cta::LoadTranspose<Traits, dg::cta::Operand::A, 4>;" in cu
    assert "using ALoadTranspose4 = dg::cta::LoadTranspose<Traits, dg::cta::Operand::A, 1>;" in cu
    assert "if (aligned(A, 16) && aligned(B, 16)) return dg::cta::launch<Traits, ALoadTranspose16," in cu
    # The registers decision is beside the launch bounds' minimum blocks and says why.
    assert "registers = " in cu.split("static constexpr int MIN_BLOCKS")[0].rsplit("//", 1)[-1]


def test_ffma_kernel_zero_fills_past_k_and_takes_run_time_rows():
    tail = _cu(_f32({"m": 1024, "n": 1024, "k": 1022}, A={"strides": [1028, 1], "align": 16},
                    B={"layout": "row", "align": 16}))
    # K = 1022 is not whole k-tiles: the header's transposing loader takes its zero-filling branch from K.
    assert "K = 1022;" in tail and "dg::cta::LoadTranspose<Traits, dg::cta::Operand::A, 4>" in tail
    dynamic = analyse(parse_spec({"name": "x", "dtype": "f32", "gemm": {"m": {"min": 1, "max": 2048}, "n": 1024,
                                                                       "k": 1024}}))
    cu = _cu(dynamic)
    assert "static constexpr bool rows_at_run_time = true;" in cu
    assert "const Traits::index_t M = Traits::index_t(m) * Traits::M_UNIT;" in cu
    assert "dg::cta::launch<Traits, " in cu and "(A, B, C, M, Traits::Epilogue{}, alpha, beta, stream);" in cu
