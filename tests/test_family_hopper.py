"""The Hopper family's planner: gates, tensor maps of views, register and shared-memory budgets."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.families import hopper
from dgemm_cli.families.solving import of_assignment, ranked
from dgemm_cli.plan import make_plan
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS

BENCH = sorted((REPO / "specs" / "bench").glob("*.yaml"))


@pytest.mark.parametrize("path", [p for p in SPECS + BENCH], ids=lambda p: p.stem)
def test_every_candidate_fits_the_register_pool_and_shared_memory(path):
    """setmaxnreg.inc blocks until the block's pool has the registers: a consumer must never ask for
    more than its threads started with, minus what the producer keeps (a deadlock otherwise)."""
    views = analyse(load_spec(path))
    arch = get_arch("sm_90a")
    if hopper.gates(views, arch):
        return
    for p in ranked(hopper.problem(views, arch), 512):
        entry = hopper.entry_regs(p.consumers, p.ctas_per_sm)
        assert entry * p.threads >= 128 * hopper.PRODUCER_REGS + 128 * p.consumers * p.consumer_regs
        assert p.consumer_regs % 8 == 0 and 24 <= p.consumer_regs <= 256
        assert p.wg_m // 64 * p.block_n // 2 * p.acc_chains + hopper.CONSUMER_OVERHEAD_REGS <= p.consumer_regs
        assert p.smem_bytes * p.ctas_per_sm + 1024 * p.ctas_per_sm <= arch.smem_per_sm
        assert p.threads == 128 * (p.consumers + 1) and p.stages >= 3


def test_conv_view_is_loaded_by_tma_without_a_copy():
    views = analyse(load_spec(next(p for p in BENCH if p.stem == "conv_nchw_8x256x56x56_k512")))
    a = hopper.tma_operand(views, "A", 128)
    assert a.major == "mn" and [d.label for d in a.dims] == ["hw[3136]", "c[256]", "n[8]"]
    assert [d.stride_bytes for d in a.dims] == [0, 3136 * 2, 256 * 3136 * 2]
    b = hopper.tma_operand(views, "B", 128)
    assert b.major == "k" and b.boxes_per_stage == 1


@pytest.mark.parametrize("operands,gate", [
    ({"A": {"strides": [8, 1000]}}, "innermost dim is strided"),
    ({"A": {"strides": [129, 1]}}, "not a positive multiple of 16"),
    ({"A": {"offset": 3}}, "not 16-byte aligned"),
    ({"B": {"strides": [0, 1]}}, "stride 0 along its innermost k"),
])
def test_gates_name_what_tma_cannot_take(operands, gate):
    spec = parse_spec({"name": "g", "dtype": "bf16", "gemm": {"m": 96, "n": 96, "k": 128}, "operands": operands})
    reasons = " ".join(r for _, r in hopper.gates(analyse(spec), get_arch("sm_90a")))
    assert gate in reasons


def test_f32_and_pre_hopper_archs_are_gated():
    spec = parse_spec({"name": "g", "dtype": "f32", "gemm": {"m": 64, "n": 64, "k": 64}})
    names = [n for n, _ in hopper.gates(analyse(spec), get_arch("sm_80"))]
    assert "wgmma" in names and "wgmma dtypes" in names


def test_batch_broadcast_is_left_out_of_the_tensor_map():
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": {"batch": 4, "m": 128, "n": 128, "k": 128},
                       "operands": {"B": {"strides": [0, 128, 1]}}})
    views = analyse(spec)
    b = hopper.tma_operand(views, "B", 128)
    a = hopper.tma_operand(views, "A", 128)
    assert len(b.dims) == 2 and len(a.dims) == 3  # the batch dim only where the stride is not 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sq4096_bf16", "conv_nchw_8x256x56x56_k512"])
def test_explain_dump_ptx_shows_wgmma_and_tma(tmp_path, name):
    """Compiles (nvcc -ptx, no GPU) the square and the conv spec for sm_90a: the PTX has the Hopper
    instructions the family is built on."""
    import subprocess
    import sys

    path = REPO / "specs" / "bench" / f"{name}.yaml"
    gen = subprocess.run([sys.executable, "-m", "dgemm_cli", "gen", str(path), "-o", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert gen.returncode == 0, gen.stderr
    out = subprocess.run([sys.executable, "-m", "dgemm_cli", "explain", str(path), "--dump-ptx", "-o", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr
    ptx = out.stdout
    # the packed store: C is m-contiguous in the conv (stored transposed), n-contiguous in the square
    packed = "stmatrix.sync.aligned.m8n8.x4" + (".trans" if "conv" in name else ".shared")
    for instruction in ("wgmma.mma_async.sync.aligned.m64n", "cp.async.bulk.tensor", "mbarrier.try_wait.parity",
                        "setmaxnreg.inc.sync.aligned", "wgmma.wait_group.sync.aligned", packed,
                        "st.global.wb.v4.u32"):  # the packed store's 16-byte copies, not split into 4-byte stores
        assert instruction in ptx, instruction


# ------------------------------------------------------------------------------------------------
# K split over a cluster, and A's box cut to the rows present
# ------------------------------------------------------------------------------------------------

def _gemm(m, n, k, a="row", b="col", c="row", dtype="bf16"):
    return analyse(parse_spec({"name": "g", "arch": "sm_90a", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
                               "operands": {"A": {"layout": a}, "B": {"layout": b}, "C": {"layout": c}}}))


@pytest.mark.parametrize("m, n, k", [(8, 14336, 4096), (16, 4096, 4096), (64, 4096, 4160), (40, 520, 2048),
                                     (1, 128, 192)])
def test_k_splits_leave_no_block_without_k_iterations_and_only_where_tiles_leave_sms_idle(m, n, k):
    views, arch = _gemm(m, n, k), get_arch("sm_90a")
    plans = ranked(hopper.problem(views, arch), 2000)
    split = [p for p in plans if p.k_splits > 1]
    assert split, "decode shapes leave SMs idle: some candidate splits K"
    for p in split:
        assert p.tiles < arch.sms and p.tiles * p.k_splits <= 2 * arch.sms
        assert (p.k_splits - 1) * p.kt_per_split < p.k_iters <= p.k_splits * p.kt_per_split
        rows = p.block_n if p.c_unit == "m" else p.block_m
        assert rows * p.red_pitch * 4 <= p.stages * (p.block_m + p.block_n) * hopper.BLOCK_K * 2
        assert "cluster of" in p.summary and "persistent" not in p.summary
    assert all(p.kt_per_split == p.k_iters and p.red_pitch == 0 for p in plans if p.k_splits == 1)


def test_a_problem_whose_tiles_fill_the_sms_is_not_split():
    views, arch = _gemm(4096, 4096, 4096), get_arch("sm_90a")
    assert {p.k_splits for p in ranked(hopper.problem(views, arch), 500)} == {1}
    assert hopper.k_split_slices(3, 4)[1] is not None  # 3 k-iterations cannot feed 4 blocks
    assert hopper.k_split_slices(5, 4) == (2, "5 k-iteration(s) in slices of 2 leave block 3 without one")
    assert hopper.k_split_slices(7, 4) == (2, None)


def test_a_tuned_assignment_from_before_the_k_split_reads_back_unsplit():
    from dgemm_cli.families.solving import of_assignment

    views, arch = _gemm(8, 14336, 4096), get_arch("sm_90a")
    old = {"block_m": 64, "block_n": 128, "consumers": 1, "ctas_per_sm": 1, "stages": 6}  # from before the K split
    plan = of_assignment(hopper.problem(views, arch), old)
    assert plan.k_splits == 1 and plan.tiles == 112 and "persistent" in plan.summary


def test_an_assignment_outside_the_views_domain_is_refused():
    """A 112-wide tile with an n-major B (64-wide boxes) renders a kernel whose stage barrier never completes: an
    assignment from a database or a tool must not go past the domain."""
    from dgemm_cli.errors import PlanError
    from dgemm_cli.families.solving import of_assignment

    views, arch = _gemm(8, 14336, 4096, b="row"), get_arch("sm_90a")
    a = {"block_m": 64, "block_n": 112, "consumers": 1, "ctas_per_sm": 1, "stages": 6, "k_splits": 1}
    with pytest.raises(PlanError, match="block_n = 112 is not one of 64, 128, 192, 256"):
        of_assignment(hopper.problem(views, arch), a)
    assert of_assignment(hopper.problem(views, arch), {**a, "block_n": 128}).block_n == 128


@pytest.mark.parametrize("m, a_layout, rows", [(1, "row", 8), (8, "row", 8), (20, "row", 24), (64, "row", 64),
                                               (300, "row", 300), (8, "col", None)])
def test_a_box_holds_only_the_rows_present_for_k_major_a(m, a_layout, rows):
    views = _gemm(m, 4096, 1024, a=a_layout)
    for p in ranked(hopper.problem(views, get_arch("sm_90a")), 50):
        mn = next(d for d in p.a.dims if d.index == "mn")
        if rows is None:  # MN-major A: boxes of 64 m-elements (one 128-byte swizzle row), uncut
            assert not p.a_rows_follow_m and p.a_box_rows == 0 and mn.box == hopper.BOX_MN
            continue
        assert p.a_rows_follow_m and p.a_box_rows == min(rows, p.block_m) == mn.box
        assert mn.box % hopper.SWIZZLE_ROWS == 0


def test_pipelines_at_most_8_stages():
    """8 stages are the fastest depth of every decode tiling measured on the H200 where they fit (deeper rings only in
    A-multicast clusters): no plan of these shapes goes past 8, and the decode picks take 8."""
    arch = get_arch("sm_90a")
    for m, n in ((1, 4096), (16, 4096), (64, 4096), (8, 14336), (300, 4096)):
        for p in ranked(hopper.problem(_gemm(m, n, 4096), arch), 3000):
            assert p.stages <= 8, (m, n, p.summary)
    for m, n, want in ((1, 4096, (64, 8, 2)), (64, 4096, (64, 8, 2)), (8, 14336, (112, 8, 1))):
        pick = ranked(hopper.problem(_gemm(m, n, 4096), arch), 1)[0]
        assert (pick.block_n, pick.stages, pick.k_splits) == want, (m, n, pick.summary)


# ------------------------------------------------------------------------------------------------
# The packed store (beta == 0: the epilogue in registers, stmatrix into a 16-bit staging tile)
# ------------------------------------------------------------------------------------------------

def _spec(c="row", dtype="bf16", epilogue=(), gemm=None, **extra):
    doc = {"name": "g", "arch": "sm_90a", "dtype": dtype, "gemm": gemm or {"m": 300, "n": 520, "k": 264},
           "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": c}}, **extra}
    if epilogue:
        doc["epilogue"] = list(epilogue)
    return parse_spec(doc)


@pytest.mark.parametrize("doc, packed", [
    ({}, True),
    ({"c": "col"}, True),  # a column of 300 rows: 4-element (8-byte) vectors along m
    ({"c": "col", "gemm": {"m": 302, "n": 520, "k": 264}}, False),  # 302 rows: 2-element vectors, below PACK_MIN_VEC
    ({"epilogue": [{"activation": "gelu_tanh"}, {"clamp": [-2.0, 2.0]}]}, True),  # steps that read no view
    ({"epilogue": [{"bias": {"letters": "n"}}]}, False),  # the bias is read in the store phase
    ({"D": True}, False),  # C is read for beta beside the output D
    ({"dtype": "f32"}, False),
])
def test_the_packed_store_is_planned_for_16_bit_outputs_whose_epilogue_reads_no_view(doc, packed):
    doc = dict(doc)
    if doc.pop("D", False):
        spec = parse_spec({"name": "g", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": 300, "n": 520, "k": 264},
                           "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"},
                                        "D": {"layout": "row"}}})
    else:
        spec = _spec(**doc)
    views = analyse(spec)
    assert hopper.packed_store(views) is packed
    if spec.A.dtype == "f32":
        return
    plan = make_plan(views, get_arch("sm_90a"), "hopper").primary
    assert plan.packed_store is (packed and plan.k_splits == 1)
    assert plan.epi_bytes == (hopper.epi_bytes(plan.c_unit, packed) if plan.k_splits == 1 else 0)


@pytest.mark.parametrize("c, trans", [("row", False), ("col", True)])
def test_the_packed_store_renders_stmatrix_beside_the_staged_store(c, trans):
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.render import render_sources

    # m = 304 keeps C's column stride a multiple of 8 elements (16-byte vectors along m when C is column-major)
    spec = parse_spec({"name": "g", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 304, "n": 520, "k": 264},
                       "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": c}},
                       "epilogue": [{"activation": "relu"}]})
    views, arch = analyse(spec), get_arch("sm_90a")
    plan = make_plan(views, arch, "hopper")
    assert plan.primary.packed_store and plan.primary.c_vec == 8
    files = render_sources(spec, views, plan, plan_baseline(views), arch)
    traits = _traits(files["g.cu"])
    # the packed store (dg/hopper_common.cuh: stmatrix, transposed where C is m-contiguous) on the plan's tile
    assert "static constexpr bool PACKED = true;" in traits and "PACK_COLS = 64, PACK_PITCH = 72;" in traits
    assert f"static constexpr bool C_ALONG_M = {'true' if trans else 'false'};" in traits
    common = files["dg/hopper_common.cuh"]
    assert "stmatrix_x4<M>(" in common and "the packed tile must fit the staging buffer" in common
    # beta == 0 takes the packed store, any other beta the f32 staging (C read for beta)
    store = common[common.index("void store_tile("):]
    assert store.index("if (beta == 0.0f)") < store.index("packed_store<T>(") < store.index("staged_store<T>(")
    # the activation runs on each value in registers, before the rounding (out_pair)
    assert "t = dg::relu(t);\n    return t;" in traits[traits.index("float pointwise(float t)"):]
    assert "when beta == 0, the epilogue on the accumulators in registers" in files["g.cu"]  # the header comment


# ------------------------------------------------------------------------------------------------
# Flat rows: tiles that run across the m loops in 64-row blocks
# ------------------------------------------------------------------------------------------------

def _conv(n=8, c=256, hw=56, k=512, **extra):
    return analyse(parse_spec({"name": "conv", "dtype": "bf16", "arch": "sm_90a", "contraction": "nchw,kc->nkhw",
                               "sizes": {"n": n, "c": c, "h": hw, "w": hw, "k": k}, **extra}))


def test_flat_rows_fill_the_tiles_of_a_convolution_across_its_batch():
    views, arch = _conv(), get_arch("sm_90a")
    by_tile = {(p.block_m, p.block_n, p.consumers, p.ctas_per_sm): p for p in ranked(hopper.problem(views, arch), 2000)}
    p = by_tile[(128, 128, 1, 2)]
    assert p.flat_rows and p.tiles == 784 and p.tiles_m == 196 and p.tile_groups == 1  # not 8 x 25 x 4 = 800
    assert p.m_loop_rows == 8 * 3136
    assert p.a.boxes_per_stage == 2 and all(d.box == 64 for d in p.a.dims if d.index == "mn")
    assert not by_tile[(64, 128, 1, 2)].flat_rows  # 64-row tiles: every block is a tile already
    assert by_tile[(128, 256, 2, 1)].tiles == 392


@pytest.mark.parametrize("doc, why", [
    ({"hw": 55}, "3025 rows a batch: not a whole number of 64-row blocks"),
    ({"n": 1}, "no m loop"),
])
def test_flat_rows_need_m_loops_and_whole_64_row_blocks(doc, why):
    views = _conv(**doc)
    assert not hopper.flat_rows(views, 128, 1), why
    assert not hopper.flat_rows(_conv(), 128, 2)  # a K split keeps its one tile a cluster
    assert not hopper.flat_rows(_conv(hw=64), 128, 1)  # 4096 rows: 128-row tiles already fit, nothing to save


def test_a_flat_rows_kernel_loads_and_stores_by_64_row_block():
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.render import render_sources

    views, arch = _conv(), get_arch("sm_90a")
    plan = make_plan(views, arch, "hopper")
    assert plan.primary.flat_rows
    traits = _traits(render_sources(views.spec, views, plan, plan_baseline(views), arch)["conv.cu"])
    assert "static constexpr bool FLAT_ROWS = true;" in traits and "static constexpr int M_ROWS = 25088;" in traits
    # the producer: a box a block (dg/hopper_common.cuh: issue_operand), at the block's row and batch index
    assert "static constexpr int RANK = 3, BOXES = 2, BOX_BYTES = 8192;" in traits
    assert "{ 3136, 0, 64, dg::hopper::AT_MN, 0 },  // hw[3136]" in traits
    assert "dg::hopper::AT_LOOP, 0 },  // n[8]" in traits
    # the store phase: each 64-row block its own batch offset of C (the loop's C stride)
    assert "{ 8, true, 1605632 },  // n[8]" in traits


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_every_flat_rows_candidate_covers_its_rows_once(seed):
    import random

    from dgemm_cli.randspec import random_spec

    views = analyse(parse_spec(random_spec(random.Random(seed), "r", tma_share=1.0, row_blocks_share=1.0)))
    arch = get_arch("sm_90a")
    if hopper.gates(views, arch):
        return
    for p in ranked(hopper.problem(views, arch), 200):
        m_loops = math.prod(x.size for x in p.tile_loops if x.role == "m")
        if not p.flat_rows:
            assert p.tiles == p.tile_groups * p.tiles_m * p.tiles_n
            continue
        assert p.m_inner % 64 == 0 and m_loops > 1 and p.k_splits == 1 and p.block_m > 64
        assert p.m_loop_rows == m_loops * p.m_inner
        assert (p.tiles_m - 1) * p.block_m < p.m_loop_rows <= p.tiles_m * p.block_m
        assert p.tile_groups * m_loops == math.prod(x.size for x in p.tile_loops)
        unflat = p.tile_groups * m_loops * -(-p.m_inner // p.block_m) * p.tiles_n  # a partial tile each m-loop index
        assert p.tiles == p.tile_groups * p.tiles_m * p.tiles_n < unflat
        assert p.a.boxes_per_stage == p.block_m // 64 and not p.a_rows_follow_m


# ------------------------------------------------------------------------------------------------
# Tile widths past the powers of two (BLOCK_N): 112 fills the SMs at N = 14336
# ------------------------------------------------------------------------------------------------

def test_widths_whose_tile_count_fills_the_sms_are_candidates():
    arch = get_arch("sm_90a")
    widths = {p.block_n for p in ranked(hopper.problem(_gemm(8, 14336, 4096), arch), 3000)}
    assert {96, 112, 160, 192, 224} <= widths
    pick = ranked(hopper.problem(_gemm(8, 14336, 4096), arch), 1)[0]
    assert pick.tiles == 128 <= arch.sms  # 112 tiles of 128 would leave 20 SMs idle
    # an n-major B is loaded in 64-wide boxes: only multiples of 64
    views = _gemm(8, 14336, 4096, b="row")
    assert {p.block_n for p in ranked(hopper.problem(views, arch), 3000)} <= {64, 128, 192, 256}


@pytest.mark.parametrize("bn, epi, pack", [(64, 32, 64), (96, 32, 32), (112, 16, 16), (160, 32, 32), (192, 32, 64)])
def test_the_stores_take_columns_that_divide_the_tile(bn, epi, pack):
    assert (hopper.epi_cols(bn), hopper.pack_cols(bn)) == (epi, pack)
    assert bn % epi == 0 and bn % pack == 0 and pack % 16 == 0  # stmatrix.x4 writes 16 columns


def test_wgmma_efficiency_is_interpolated_between_the_measured_widths():
    assert hopper.wgmma_eff(64) == hopper.WGMMA_EFF[64] and hopper.wgmma_eff(256) == hopper.WGMMA_EFF[256]
    assert hopper.WGMMA_EFF[64] < hopper.wgmma_eff(96) < hopper.wgmma_eff(112) < hopper.WGMMA_EFF[128]


def test_a_112_wide_tile_renders_its_wgmma_and_16_column_stores():
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.render import render_sources

    spec = parse_spec({"name": "g", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 8, "n": 14336, "k": 4096},
                       "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}})
    views, arch = analyse(spec), get_arch("sm_90a")
    plan = make_plan(views, arch, "hopper")
    assert plan.primary.block_n == 112 and plan.primary.packed_store
    files = render_sources(spec, views, plan, plan_baseline(views), arch)
    wgmma = files["dg/wgmma.cuh"]
    assert "wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16" in wgmma
    assert "wgmma_m64n112k16_f16(float (&d)[56]" in wgmma  # 112 / 2 accumulators a thread
    traits = _traits(files["g.cu"])
    assert "BN = 112," in traits and "using A_t = ::A_t;" in traits and "using A_t = __half;" in files["g.cu"]
    assert "static constexpr int EPI_COLS = 16," in traits and "PACK_COLS = 16, PACK_PITCH = 72" in traits


# ------------------------------------------------------------------------------------------------
# L2 promotion of the tensor maps
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, n, want", [
    (1, 14336, "none"), (16, 14336, "none"), (64, 14336, "none"),  # one tile row of 64: the weight streams once
    (64, 4096, "none"),                                             # ... with K split over a cluster
    (128, 14336, "256B"),    # one tile row of 128 rows of A (measured 1% slower without)
    (14336, 16, "256B"),     # one tile column: A streams (measured 7% slower without)
    (4096, 4096, "256B"), (4096, 14336, "256B"), (512, 14336, "256B"),  # both re-read across tiles
])
def test_the_maps_drop_l2_promotion_only_where_the_weight_streams_once(m, n, want):
    """Measured on the H200: the decode plans run up to 3% faster without promotion; re-read operands (square
    GEMMs, one tile column, 128-row tiles) run slower."""
    p = ranked(hopper.problem(_gemm(m, n, 4096), get_arch("sm_90a")), 1)[0]
    assert p.l2_promotion == want, p.summary
    assert f"L2 promotion {want}" in p.summary
    if want == "none":
        assert p.tiles_m == 1 and (p.a_box_rows or p.block_m) <= hopper.STREAM_A_ROWS[1], p.summary


def test_the_promotion_reaches_both_tensor_maps_and_old_assignments_keep_256_bytes():
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.families.solving import of_assignment
    from dgemm_cli.render import render_sources

    arch = get_arch("sm_90a")
    for m, enum in ((16, "CU_TENSOR_MAP_L2_PROMOTION_NONE"), (4096, "CU_TENSOR_MAP_L2_PROMOTION_L2_256B")):
        views = _gemm(m, 4096 if m > 16 else 14336, 4096)
        cu = render_sources(views.spec, views, make_plan(views, arch, "hopper"), plan_baseline(views), arch)["g.cu"]
        # one promotion for the traits type: dg/hopper_common.cuh's encode gives it to both maps
        assert f"static constexpr CUtensorMapL2promotion L2_PROMOTION = {enum};" in _traits(cu)
    # A tuning database written before the node existed reads back with the promotion every kernel had then.
    old = {"block_m": 64, "block_n": 112, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1}
    assert of_assignment(hopper.problem(_gemm(16, 14336, 4096), arch), old).l2_promotion == "256B"


@pytest.mark.parametrize("m, n, counted", [(16, 14336, True), (64, 14336, True),   # unsplit, 16 / 64 rows of A
                                           (1, 14336, False), (8, 14336, False),   # one swizzle atom of A
                                           (16, 4096, False)])                     # a K split over a cluster
def test_the_promotion_gain_is_counted_only_where_it_was_measured(m, n, counted):
    """The model credits no promotion only on unsplit plans with 9..64 rows of A: elsewhere it already prices
    hopper too low against gemv and tcgemv, so the costs tie and the plan still takes no promotion."""
    from dgemm_cli.families.solving import of_assignment

    problem = hopper.problem(_gemm(m, n, 4096), get_arch("sm_90a"))
    pick = ranked(problem, 1)[0]
    assert pick.l2_promotion == "none"
    without = of_assignment(problem, {**pick.assignment, "l2_promotion": "none"}).cost_us
    with_256 = of_assignment(problem, {**pick.assignment, "l2_promotion": "256B"}).cost_us
    assert (without < with_256) == counted and without <= with_256
    assert (pick.k_splits > 1) == (n == 4096)


@pytest.mark.parametrize("m, n, k, family", [(1, 4096, 4096, "gemv"), (1, 14336, 4096, "gemv"),
                                             (1, 4096, 2048, "gemv"), (2, 4096, 2048, "tcgemv"),
                                             (8, 4096, 2048, "tcgemv"), (12, 4096, 2048, "tcgemv"),
                                             (16, 4096, 2048, "tcgemv"), (8, 14336, 4096, "tcgemv"),
                                             (16, 14336, 4096, "hopper"), (64, 4096, 4096, "hopper"),
                                             (17, 4096, 2048, "hopper"), (64, 4096, 2048, "hopper")])
def test_the_measured_family_picks_stay(m, n, k, family):
    """The family each size measured fastest at on the H200, same run: gemv at one row, tcgemv at 2..16 rows of
    [., 2048]x[2048, 4096] and 8 rows of N = 14336, hopper where nothing else was faster."""
    views = analyse(parse_spec({"name": "g", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": m, "n": n, "k": k},
                                "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}},
                                "beta": 0.5 if k == 2048 else 0.0}))
    assert make_plan(views, get_arch("sm_90a")).primary.family == family


@pytest.mark.parametrize("m", [17, 32, 64])
def test_a_k_split_is_kept_where_the_unsplit_tiles_leave_half_the_gpu_idle(m):
    """[17..64, 2048]x[2048, 4096] bf16: the unsplit 64x64 plan (64 tiles on 132 SMs) measured about 1.3x slower than
    the split. The stream bound (STREAM_LATENCY_US) keeps 64 SMs from streaming DRAM's whole bandwidth in the model, so
    the split's cluster reduce, priced at its measured cost, does not turn it off."""
    from dgemm_cli.families.solving import of_assignment

    views = analyse(parse_spec({"name": "g", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": m, "n": 4096, "k": 2048},
                                "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}},
                                "beta": 0.5}))
    problem = hopper.problem(views, get_arch("sm_90a"))
    pick = ranked(problem, 1)[0]
    assert pick.k_splits == 2 and (pick.block_m, pick.block_n) == (64, 64)
    unsplit = of_assignment(problem, {**pick.assignment, "k_splits": 1, "acc_chains": 1}).cost_us
    assert unsplit > 1.2 * pick.cost_us


def test_the_stream_bound_counts_only_a_weight_read_once():
    """The busy-DRAM round trip bounds the stream only where each weight tile is read once: not where outer m
    segments (tile groups) read the same weight tiles again, which come from L2."""
    arch = get_arch("sm_90a")
    once = analyse(parse_spec({"name": "g", "arch": "sm_90a", "gemm": {"m": 32, "n": 4096, "k": 2048},
                               "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}))
    # The same product with M as two outer segments of 16 rows (a [2, 16] view of A and C): two tile groups.
    again = analyse(parse_spec({"name": "g", "arch": "sm_90a", "contraction": "gmk,kn->gmn",
                                "sizes": {"g": 2, "m": 16, "n": 4096, "k": 2048},
                                "operands": {"A": {"strides": [16 * 2048 + 64, 2048, 1]},
                                             "B": {"strides": [1, 2048]},
                                             "C": {"strides": [16 * 4096 + 64, 4096, 1]}}}))
    assignment = {"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1,
                  "l2_promotion": "256B"}
    from dgemm_cli.families.solving import of_assignment

    bound = 32 * hopper.STREAM_LATENCY_US / 8  # one 64-tile wave of 32 k-iterations at 8 stages
    assert of_assignment(hopper.problem(once, arch), assignment).cost_us > bound
    groups = hopper.tile_grid(again)(64, 64, 1)[0]
    assert groups == 2 and of_assignment(hopper.problem(again, arch), assignment).cost_us < bound


@pytest.mark.parametrize("k, assignment, credited", [
    (512, {"block_m": 128, "block_n": 128, "consumers": 2, "ctas_per_sm": 1, "stages": 6}, True),  # 240 tiles
    (512, {"block_m": 128, "block_n": 256, "consumers": 2, "ctas_per_sm": 1, "stages": 4}, False),  # 120: one wave
    (512, {"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 2, "stages": 4}, False),  # two blocks an SM
    (128, {"block_m": 128, "block_n": 128, "consumers": 2, "ctas_per_sm": 1, "stages": 6}, False),  # 2 k-iterations
])
def test_later_tiles_are_credited_only_behind_an_earlier_tile_of_the_same_block(monkeypatch, k, assignment, credited):
    """LATER_TILES_HIDE_US comes off the plans where one block an SM runs two or more tiles of at least
    LATER_TILES_MIN_K k-iterations (1536 x 2560 x k bf16: 240 tiles of 128 x 128 on 132 SMs)."""
    import dgemm_cli.families.hopper.cost as hopper_cost

    views = analyse(parse_spec({"name": "g", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": 1536, "n": 2560, "k": k},
                                "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}))
    full = {"k_splits": 1, "l2_promotion": "256B", "a_multicast": 1, "acc_chains": 1, **assignment}
    arch = get_arch("sm_90a")
    with_credit, credit = of_assignment(hopper.problem(views, arch), full).cost_us, hopper_cost.LATER_TILES_HIDE_US
    monkeypatch.setattr(hopper_cost, "LATER_TILES_HIDE_US", 0.0)
    without = of_assignment(hopper.problem(views, arch), full).cost_us
    assert without - with_credit == (pytest.approx(credit) if credited else 0.0)


# ------------------------------------------------------------------------------------------------
# The stage's load order
# ------------------------------------------------------------------------------------------------

def _traits(cu: str) -> str:
    """The rendered traits and launch of the .cu's hopper namespace."""
    return cu.split("namespace hopper {")[1].split("}  // namespace hopper")[0]


def _flag(traits: str, name: str) -> bool:
    """A bool member of the rendered traits."""
    found = re.search(rf"\b{name} = (true|false)\b", traits)
    assert found, name
    return found.group(1) == "true"


def _producer_loads(cu: str) -> list[str]:
    """The operands of the producer's stage loads, in the order the kernel issues them (dg/hopper_common.cuh:
    issue_stage, B first where the traits say B_FIRST)."""
    return ["B", "A"] if _flag(_traits(cu), "B_FIRST") else ["A", "B"]


@pytest.mark.parametrize("m, n, first", [
    (16, 14336, "B"), (64, 14336, "B"), (128, 14336, "B"),  # one tile row: the weight streams once
    (64, 4096, "B"),                                        # ... with K split over a cluster
    (14336, 16, "A"),                                       # one tile column: A streams
    (4096, 4096, "A"), (512, 14336, "A"),                   # both re-read across tiles
])
def test_each_stage_loads_the_weight_first_only_where_it_streams_once(m, n, first):
    """B's box before A's measured faster on the K-split kernel and level unsplit (one tile row); elsewhere the
    order stays A first."""
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.render import render_sources

    arch = get_arch("sm_90a")
    views = _gemm(m, n, 4096)
    plan = make_plan(views, arch, "hopper")
    assert plan.primary.b_first == (first == "B") == (plan.primary.tiles_m == 1)
    cu = render_sources(views.spec, views, plan, plan_baseline(views), arch)["g.cu"]
    loads = _producer_loads(cu)
    assert loads[0] == first and sorted(loads) == ["A", "B"], loads
    assert ("loads: B's box before A's" in cu) == (first == "B")


@pytest.mark.parametrize("m, n, hinted", [
    (16, 14336, True), (128, 14336, True), (64, 4096, True),  # one tile row (the last with K split)
    (14336, 16, False), (4096, 4096, False), (512, 14336, False),  # B read again by other tiles
])
def test_the_weight_takes_l2s_evict_first_priority_only_where_it_streams_once(m, n, hinted):
    """B's loads marked evict_first measured faster where the weight streams once (kernels chained in a graph);
    where B's tiles are read again by other tiles the lines must stay: no hint. A's loads never take it (every block
    reads A again)."""
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.render import render_sources

    arch = get_arch("sm_90a")
    views = _gemm(m, n, 4096)
    plan = make_plan(views, arch, "hopper")
    assert plan.primary.b_evict_first is hinted is plan.primary.b_streams_once
    assert plan.primary.to_dict()["b_evict_first"] is hinted
    cu = render_sources(views.spec, views, plan, plan_baseline(views), arch)["g.cu"]
    traits = _traits(cu)
    assert _flag(traits, "B_EVICT_FIRST") is hinted and not _flag(traits, "A_EVICT_FIRST")
    assert ("its L2 lines evict_first" in cu) is hinted  # the header comment says so


def test_a_weight_broadcast_over_a_batch_is_not_loaded_first():
    """One tile row, but every batch index's tiles read the same B tiles (stride 0): B comes from L2 after the
    first, so the order stays A first and its lines keep their priority (weight_streams_once, as the stream bound
    counts it)."""
    views = analyse(parse_spec({"name": "g", "arch": "sm_90a", "dtype": "f16",
                                "gemm": {"batch": 4, "m": 64, "n": 4096, "k": 1024},
                                "operands": {"B": {"strides": [0, 1, 1024]}}}))
    plan = make_plan(views, get_arch("sm_90a"), "hopper").primary
    assert plan.tiles_m == 1 and plan.tile_groups == 4 and not plan.b_first and not plan.b_evict_first


def test_gqa_pv_over_a_kv_cache_stays_on_the_split_hopper_plan():
    """GQA P.V over a V cache in place (32 KV heads, 8 query heads, 4096 tokens, head dim 128): the split hopper
    plan measured faster than splitk's best. It bounds the split's reduce cost from above: splitk prices its own
    cluster reduce at 0.4 µs."""
    views = analyse(parse_spec({"name": "gqa_pv", "arch": "sm_90a", "dtype": "f16",
                                "gemm": {"batch": 32, "m": 8, "n": 128, "k": 4096},
                                "operands": {"A": {"layout": "row"}, "B": {"strides": [128, 4096, 1]},
                                             "C": {"layout": "row"}}}))
    plan = make_plan(views, get_arch("sm_90a")).primary
    assert plan.family == "hopper" and plan.k_splits == 2


# Decode with the roles swapped: C^T = W X^T, the weight as A (k-major), the tokens as B (k-major), C m-contiguous.
SWAPPED = {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "col"}}


# The multicast plan measured on the swapped decode sizes (10 stages).
MULTICAST_64X32 = {"block_m": 64, "block_n": 32, "consumers": 1, "ctas_per_sm": 1, "stages": 10, "k_splits": 1,
                   "a_multicast": 2}


def _swapped(m, n, k, dtype="f16", **extra):
    return analyse(parse_spec({"name": "swapped", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
                               "operands": SWAPPED, **extra}))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 5000), n=st.integers(1, 300), k=st.integers(1, 5000))
def test_a_multicast_only_where_one_cluster_covers_n_with_whole_k_major_a_boxes(m, n, k):
    views = _swapped(m, n, k)
    arch = get_arch("sm_90a")
    if hopper.gates(views, arch):
        return
    for p in ranked(hopper.problem(views, arch), 400):
        if p.a_multicast == 1:
            # narrow tiles and deep rings are measured only in multicast clusters
            assert p.block_n >= hopper.NARROW_N and p.stages <= hopper.DEEP_STAGES
            assert p.grid_tiles == p.tiles
            continue
        assert p.k_splits == 1 and p.tiles_n == p.a_multicast == 2 and p.a.major == "k" and not p.flat_rows
        rows = next(d.box for d in p.a.dims if d.index == "mn")
        assert rows * p.a_multicast == p.block_m and p.a_box_rows in (0, p.block_m)
        assert p.grid_tiles == p.tile_groups * p.tiles_m * 2 and p.a.stage_bytes == p.block_m * 64 * 2


def test_issue_7_sizes_with_the_roles_swapped_keep_the_k_split_as_measured():
    # The K split measured faster than the multicast plan at these sizes.
    for tokens in (33, 44, 60, 64):
        problem = hopper.problem(_swapped(4096, tokens, 4096), get_arch("sm_90a"))
        pick = ranked(problem, 1)[0]
        assert pick.a_multicast == 1 and pick.k_splits == 2, pick.summary
        multicast = of_assignment(problem, MULTICAST_64X32)
        assert multicast.cost_us > pick.cost_us and multicast.a_evict_first


def test_a_multicast_kernel_loads_its_part_into_the_cluster_and_releases_stages_in_both_blocks(tmp_path):
    from dgemm_cli.pipeline import generate
    from dgemm_cli.plan import make_plan

    spec = parse_spec({"name": "mc", "dtype": "bf16", "gemm": {"m": 2000, "n": 40, "k": 1000}, "beta": 0.5,
                       "operands": SWAPPED})
    views = analyse(spec)
    model = make_plan(views, get_arch("sm_90a"))  # the model takes the K split here (measured faster)
    assert model.family == "hopper" and model.primary.a_multicast == 1 and model.primary.k_splits == 2
    plan = of_assignment(hopper.problem(views, get_arch("sm_90a")), MULTICAST_64X32)
    g = generate(spec, get_arch("sm_90a"), tmp_path, "hopper", plan=replace(model, primary=plan), views=views)
    assert plan.a_multicast == 2 and plan.block_n == 32, plan.summary
    cu = (g.directory / "mc.cu").read_text()
    traits = _traits(cu)
    assert "static constexpr int A_PARTS = 2;" in traits and _flag(traits, "A_EVICT_FIRST")
    assert "dg::hopper::launch_multicast<Traits>(" in traits and '#include "dg/hopper_multicast.cuh"' in cu
    kernel = (g.directory / "dg" / "hopper_multicast.cuh").read_text()
    common = (g.directory / "dg" / "hopper_common.cuh").read_text()
    # this block's part of A's box into every block of the cluster; A is the stream the prologue prefetches
    assert "return tile.m0 + a_part * Config<T>::A_PART_ROWS + shift;" in common
    assert "issue_operand<T, true, PREFETCH>(" in common
    # every consumer warp releases the stage in both blocks, without a cluster-scope release (ERRBAR: 4x slower)
    assert "if (lane < T::A_PARTS) mbar_arrive_remote(&empty[last], lane);" in common
    ptx = (g.directory / "dg" / "ptx.cuh").read_text()
    assert "mbarrier.arrive.shared::cluster.b64" in ptx and "release.cluster.shared::cluster" not in ptx
    assert "mbar_init(&empty[s], T::CONSUMERS * 4 * T::A_PARTS);" in kernel
    assert kernel.count("cluster_barrier();") == 3  # barriers set up; the producer's and the consumers' ends
    assert "cudaOccupancyMaxActiveClusters" in kernel and "unsigned(T::A_PARTS)};" in kernel
    # no leftovers of the persistent grid's other shape
    assert "RASTER" not in traits and "sm_count(" not in kernel
