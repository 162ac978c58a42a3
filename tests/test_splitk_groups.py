"""The splitk family's K split over several clusters (`groups`): where the planner takes it, that it never does
where output tiles fill the GPU, plan invariants, that one group renders the cluster kernel alone, and (slow) that
the kernels compile without spills. (M = N = 1 is the dot family's: tests/test_family_dot.py.)"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.explain import explain_text
from dgemm_cli.families import splitk
from dgemm_cli.families.solving import best, of_assignment, ranked
from dgemm_cli.plan import make_plan
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, assert_grouped_kernels_compile

SM90 = get_arch("sm_90a")
BENCH = REPO / "specs" / "bench"
SKINNY = sorted(BENCH.glob("skinny_*.yaml"))


def _views(raw: dict):
    return analyse(parse_spec({"name": "g", **raw}))


def check(p, views) -> None:
    """What every splitk plan satisfies, with or without groups."""
    slices = p.splits * p.groups
    assert p.splits in splitk.SPLITS and p.groups in splitk.GROUPS
    assert p.blocks == p.tile.tiles * slices
    assert (slices - 1) * p.k_tiles_per_split < p.k_tiles <= slices * p.k_tiles_per_split
    assert p.groups == 1 or p.tile.tiles * p.splits < SM90.sms  # groups only where tiles leave SMs idle
    assert p.tile_elems == min(p.tile.block_m, views.m) * min(p.tile.block_n, views.n)
    assert p.scratch_bytes == (0 if p.groups == 1 else p.tile.tiles * p.groups * p.tile_elems * 4)


# ---- where the planner spreads K over groups ----

def test_a_tiny_output_with_a_huge_k_takes_groups_on_the_tile_path():
    for path in SKINNY:
        views = analyse(load_spec(path))
        p = make_plan(views, SM90).primary
        assert p.family == "splitk" and p.groups > 1, path.name
        check(p, views)


@pytest.mark.parametrize("name", ["decode_1x4096x128", "decode_1x4096x4096", "decode_8x4096x4096",
                                  "decode_16x4096x4096", "decode_16x4096x14336", "decode_64x4096x14336"])
def test_decode_products_keep_one_group(name):
    views = analyse(load_spec(BENCH / f"{name}.yaml"))
    p, _ = best(splitk.problem(views, SM90))
    assert p.groups == 1


def test_groups_are_ruled_out_where_output_tiles_fill_the_sms():
    # 64 x 14336: at least 112 tiles of 64 x 128, x 2 slices: every candidate has one group.
    views = _views({"dtype": "f16", "gemm": {"m": 64, "n": 14336, "k": 1 << 20}})
    cands = ranked(splitk.problem(views, SM90), 400)
    assert cands and all(c.groups == 1 for c in cands)
    # Few tiles: the constraint names why, and the cost model may take groups.
    small = _views({"dtype": "f16", "gemm": {"m": 4, "n": 16, "k": 1 << 22}})
    p, graph = best(splitk.problem(small, SM90))
    names = {c.name for c in graph.constraints}
    assert "groups only where tiles leave SMs idle" in names and p.groups > 1


def test_a_run_time_row_range_keeps_one_group():
    views = _views({"dtype": "f16", "gemm": {"m": {"min": 5, "max": 8}, "n": 16, "k": 1 << 22}})
    for c in ranked(splitk.problem(views, SM90), 50):
        assert c.groups == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_every_candidate_of_a_random_decode_view_holds_the_group_invariants(seed):
    views = analyse(parse_spec(random_spec(random.Random(seed), "r", small_m_share=1.0)))
    if splitk.gates(views, SM90):
        return
    for p in ranked(splitk.problem(views, SM90), 8):
        check(p, views)


# ---- rendering ----

def _render(views, plan=None) -> dict[str, str]:
    plan = plan or make_plan(views, SM90)
    return render_sources(views.spec, views, plan, plan_baseline(views), SM90)


# Decode shapes the splitk family plans with one group: tests/test_render_snapshots.py keeps their sources.
ONE_GROUP = (("bench/decode_8x4096x4096", "splitk"), ("bench/decode_16x4096x4096", "splitk"),
             ("f32/f32_skinny", None), ("bench/decode_1x4096x128", "splitk"), ("epilogue/decode_bias_silu", "splitk"))


@pytest.mark.parametrize("path, family", ONE_GROUP, ids=str)
def test_these_decode_shapes_plan_one_group(path, family):
    views = analyse(load_spec(REPO / "specs" / f"{path}.yaml"))
    plan = make_plan(views, SM90, family)
    assert plan.family == "splitk" and plan.primary.groups == 1


def test_one_group_renders_the_cluster_kernel_alone():
    views = analyse(load_spec(BENCH / "decode_8x4096x4096.yaml"))
    plan = make_plan(views, SM90, "splitk")
    assert plan.primary.groups == 1
    cu = _render(views, plan)["decode_8x4096x4096.cu"]
    # No scratch and no second kernel; the header says why one group (as explain does).
    for absent in ("TILE_ELEMS", "partials", "cudaMallocAsync", "scratch_bytes"):
        assert absent not in cu, absent
    assert "//   groups = 1: the output tiles and the cluster's K slices give the SMs work" in cu
    assert "GROUPS = 1, KT_PER_SPLIT" in cu and "return dg::splitk::launch<Traits, " in cu


def test_groups_render_a_scratch_a_second_kernel_and_the_free():
    views = analyse(load_spec(BENCH / "skinny_4x16_k4M_f16.yaml"))
    plan = make_plan(views, SM90)
    p = plan.primary
    files = _render(views, plan)
    cu = files["skinny_4x16_k4M_f16.cu"]
    assert f"GROUPS = {p.groups}, " in cu and f"scratch_bytes() == {p.scratch_bytes}ull" in cu
    assert '#include "dg/splitk.cuh"' in cu
    # The header: alloc, the cluster kernel, the second kernel, the free, in stream order.
    header = files["dg/splitk.cuh"]
    launch = header[header.index("cudaError_t launch("):]
    order = [launch.index(s) for s in ("cudaMallocAsync(", "status = dg::launch(k,", "dg::launch(finish<T>",
                                       "cudaFreeAsync(partials, stream)")]
    assert order == sorted(order)
    # The second kernel waits for its predecessor before touching memory (programmatic dependent launch).
    finish = header[header.index("    finish(const float*"):]
    assert finish.index("wait_for_predecessor();") < finish.index("partials +")
    assert "Scratch:" in files["README.md"] and "bit-identical" in files["README.md"]


def test_explain_shows_the_groups_node_and_why():
    # A decode product whose tiles fill the SMs: the node and the constraint that keeps it at 1.
    text = explain_text(load_spec(BENCH / "decode_1x4096x14336.yaml"), SM90)
    section = text[text.index("## Family splitk"):]
    assert "groups        in {1, 2, 4, 8, 16}" in section
    assert "groups = 1 (forced by groups only where tiles leave SMs idle)" in section


def test_a_tuned_assignment_from_before_groups_reads_back_with_one_group():
    views = analyse(load_spec(BENCH / "decode_8x4096x4096.yaml"))
    prob = splitk.problem(views, SM90)
    p, _ = best(prob)
    old = {k: v for k, v in p.assignment.items() if k != "groups"}
    again = of_assignment(prob, old)
    assert again.groups == 1 and again.summary == p.summary


# ---- compiled ----

@pytest.mark.slow
def test_group_kernels_compile_without_spills(tmp_path):
    assert_grouped_kernels_compile([load_spec(p) for p in SKINNY], "splitk", tmp_path)
