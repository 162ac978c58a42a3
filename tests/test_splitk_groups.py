"""The splitk family's K split over several clusters (`groups`) and its block shape `dot` for M = N = 1:
where the planner takes them, that it never does where output tiles fill the GPU, plan invariants, that one
group renders the cluster kernel alone, and (slow) that the kernels compile without spills."""

from __future__ import annotations

import math
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

from .conftest import REPO

SM90 = get_arch("sm_90a")
BENCH = REPO / "specs" / "bench"
FULL_REDUCTIONS = sorted(BENCH.glob("fullred_*.yaml"))
SKINNY = sorted(BENCH.glob("skinny_*.yaml"))


def _views(raw: dict):
    return analyse(parse_spec({"name": "g", **raw}))


def _frobenius_f32():
    return _views({"dtype": "f32", "contraction": "ab,ab->", "sizes": {"a": 4096, "b": 4096}})


def _dot_f16():
    return _views({"dtype": "f16", "contraction": "k,k->", "sizes": {"k": 16 * 2**20}})


def check_dot(p, views) -> None:
    """What every plan of block shape dot satisfies."""
    assert p.shape == "dot" and p.splits == 1 and views.m == views.n == 1
    assert p.chunk * min(views.operands[x].elem_bytes for x in "AB") == 16
    assert p.k_slice % p.chunk == 0 and (p.groups - 1) * p.k_slice < views.k <= p.groups * p.k_slice
    assert p.tiles == views.batch and p.blocks == p.tiles * p.groups
    assert p.groups == 1 or p.tiles < SM90.sms
    assert p.groups == 1 or p.k_slice >= p.threads * p.chunk  # every thread has a chunk of every slice
    assert p.scratch_bytes == (0 if p.groups == 1 else 4 * p.blocks)
    assert p.finish_threads % 32 == 0 and p.finish_threads <= splitk.FINISH_THREADS_MAX
    for x in "AB":
        assert p.chunk % p.vec[x] == 0 and p.chunk % p.vec_aligned[x] == 0 and p.vec[x] <= p.vec_aligned[x]
        assert p.vec_aligned[x] * views.operands[x].elem_bytes <= 16
        assert p.vec_aligned[x] == 1 or views.operands[x].unit_role == "k"
    cap = min(255, SM90.regs_per_sm // p.threads)
    assert all(splitk.dot_registers(views, p.unroll, wide) <= cap for wide in (False, True))


def check_tile(p, views) -> None:
    """What every plan of the tile shape satisfies, with or without groups."""
    slices = p.splits * p.groups
    assert p.shape == "tile" and p.splits in splitk.SPLITS and p.groups in splitk.GROUPS
    assert p.blocks == p.tile.tiles * slices
    assert (slices - 1) * p.k_tiles_per_split < p.k_tiles <= slices * p.k_tiles_per_split
    assert p.groups == 1 or p.tile.tiles * p.splits < SM90.sms  # groups only where tiles leave SMs idle
    assert p.tile_elems == min(p.tile.block_m, views.m) * min(p.tile.block_n, views.n)
    assert p.scratch_bytes == (0 if p.groups == 1 else p.tile.tiles * p.groups * p.tile_elems * 4)


def check(p, views) -> None:
    (check_dot if p.shape == "dot" else check_tile)(p, views)


# ---- where the planner spreads K over groups ----

@pytest.mark.parametrize("make", [_frobenius_f32, _dot_f16], ids=["ab,ab->_4096x4096_f32", "k,k->_16M_f16"])
def test_a_full_reduction_with_millions_of_k_spreads_over_groups(make):
    views = make()
    plan = make_plan(views, SM90)
    p = plan.primary
    assert plan.family == "splitk" and p.shape == "dot"
    check(p, views)
    # One block can hold at most a few thousand elements in flight: K in the millions wants most SMs.
    assert p.groups > 1 and p.blocks >= SM90.sms
    groups = next(d for d in p.decisions if d.node == "groups")
    assert groups.value == p.groups and {r.value for r in groups.rejected} >= {1}


def test_a_tiny_output_with_a_huge_k_takes_groups_on_the_tile_path():
    for path in SKINNY:
        views = analyse(load_spec(path))
        p = make_plan(views, SM90).primary
        assert p.family == "splitk" and p.shape == "tile" and p.groups > 1, path.name
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


@st.composite
def full_reductions(draw):
    """`<perm of the K letters>[, batch],<another perm>[, batch]->[batch]`: every input letter summed (but
    the batch), sizes from tiny to millions, any dtype, sometimes a letter in one input only."""
    letters = draw(st.permutations("pqrs"))[:draw(st.integers(1, 3))]
    sizes = {x: draw(st.sampled_from([1, 2, 3, 7, 33, 100, 1000, 4099])) for x in letters}
    a = "".join(letters)
    b = "".join(draw(st.permutations(letters)))
    if len(letters) > 1 and draw(st.booleans()):
        b = b.replace(letters[0], "")  # summed in A only: B broadcast over it
    batch = draw(st.sampled_from(["", "", "z"]))
    if batch:
        sizes["z"] = draw(st.sampled_from([2, 5, 200]))
    k = math.prod(n for x, n in sizes.items() if x != "z")
    if k <= 32:
        sizes[letters[-1]] *= 64
    raw = {"dtype": draw(st.sampled_from(["f16", "bf16", "f32"])), "contraction": f"{a}{batch},{b}{batch}->{batch}",
           "sizes": sizes}
    return _views(raw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full_reductions())
def test_every_candidate_of_a_random_full_reduction_is_consistent(views):
    if views.m != 1 or views.n != 1 or splitk.gates(views, SM90):
        return
    for p in ranked(splitk.problem(views, SM90), 12):
        check_dot(p, views)


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
    # No scratch, no second kernel, no groups line in the header.
    for absent in ("TILE_ELEMS", "partials", "cudaMallocAsync", "scratch_bytes", "groups ="):
        assert absent not in cu, absent
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


def test_a_full_reduction_renders_the_dot_block_and_checks_both_pointers():
    views = _dot_f16()
    files = _render(views)
    cu = files["g.cu"]
    assert "namespace splitk" in cu and "cudaLaunchAttributeClusterDimension" not in cu
    # The spec promises 2 bytes: the 16-byte loads only when both view pointers pass the check; the order of
    # the sum is the same in both instantiations.
    assert "if (aligned(A, 16) && aligned(B, 16)) return dg::dot::launch<Traits, 8, 8>(" in cu
    assert "return dg::dot::launch<Traits, 1, 1>(" in cu
    assert '#include "dg/dot.cuh"' in cu and "FINISH_THREADS = " in cu and "scratch_bytes() == " in cu
    kernel = files["dg/dot.cuh"][files["dg/dot.cuh"].index("    kernel(const"):]
    assert kernel.index("wait_for_predecessor();") < kernel.index("K_SLICE")
    assert "Scratch:" in files["README.md"]


def test_a_small_full_reduction_may_keep_one_block_and_store_directly():
    views = _views({"dtype": "f32", "contraction": "ab,ab->", "sizes": {"a": 40, "b": 50}})
    p = next(c for c in ranked(splitk.problem(views, SM90), 64) if c.groups == 1)
    check_dot(p, views)
    from dgemm_cli.plan import Plan
    plan = Plan(p, None, make_plan(views, SM90, "splitk").family_decision)
    cu = _render(views, plan)["g.cu"]
    assert "GROUPS = 1;" in cu and "FINISH_THREADS" not in cu and "scratch_bytes" not in cu


def test_explain_shows_the_groups_node_and_why():
    text = explain_text(_frobenius_f32().spec, SM90)
    assert "groups        in {1, 2, 4" in text and "block shape dot" in text
    assert "groups only where outputs leave SMs idle" in text and "groups = " in text
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
def test_group_and_dot_kernels_compile_without_spills(tmp_path):
    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.toolchain import find_nvcc
    specs = [load_spec(p) for p in (*FULL_REDUCTIONS, *SKINNY)]
    specs.append(parse_spec({"name": "dot_perm", "dtype": "f16", "contraction": "abc,cab->",
                             "sizes": {"a": 64, "b": 1000, "c": 130},
                             "epilogue": [{"activation": "silu"}, {"clamp": [-2.0, 2.0]}], "beta": 1.0}))
    specs.append(parse_spec({"name": "dot_batch", "dtype": "bf16", "contraction": "zab,zba->z",
                             "sizes": {"z": 3, "a": 999, "b": 1001}}))
    nvcc = find_nvcc()
    for spec in specs:
        views = analyse(spec)
        plan = make_plan(views, SM90)
        assert plan.family == "splitk" and plan.primary.groups > 1, spec.name
        g = generate(spec, SM90, tmp_path)
        report = build(g.directory, "sm_90a", nvcc)
        assert report.ok, report.error
        assert report.kernels and not any(k.spills or k.stack_bytes for k in report.kernels), report.kernels
        assert any("finish" in k.kernel for k in report.kernels)
