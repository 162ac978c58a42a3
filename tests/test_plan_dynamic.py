"""Run-time M (issue 7): the run-time letter's place in the views, the buckets of its sizes, each bucket's
plan, and the one entry point that picks a bucket's kernel (no GPU: the kernels run in tests/test_gpu_verify.py)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.families import FAMILIES
from dgemm_cli.plan import EXACT_ROWS, BucketPlan, make_plan, row_buckets
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

# f32: the hopper family is gated out (wgmma runs 16-bit inputs here), so the buckets show the small-M
# families' run-time forms (gemv for single rows, splitk ranges). In f16 the hopper family takes every bucket of
# this shape with its K split and cut A box (measured faster on the H200; tests/test_render.py covers it).
DECODE = {"name": "d", "gemm": {"m": {"min": 1, "max": 64}, "n": 4096, "k": 4096},
          "operands": {"A": {"dtype": "f32"}, "B": {"dtype": "f32", "layout": "col"}, "C": {"dtype": "f32"}}}


@pytest.fixture(scope="module")
def decode_plan() -> BucketPlan:
    """DECODE planned on sm_90a, shared by the tests that only read it (planning it takes seconds)."""
    return make_plan(analyse(parse_spec(DECODE)), get_arch("sm_90a"))


@pytest.fixture(scope="module")
def decode_sources(decode_plan) -> dict[str, str]:
    spec = parse_spec(DECODE)
    views = analyse(spec)
    return render_sources(spec, views, decode_plan, plan_baseline(views), get_arch("sm_90a"))


def test_buckets_are_single_sizes_then_ranges_up_to_powers_of_two():
    assert row_buckets(1, 256) == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128),
                                   (129, 256)]
    assert row_buckets(16, 100) == [(16, 16), (17, 32), (33, 64), (65, 100)]
    assert row_buckets(3, 3) == [(3, 3)] and row_buckets(6, 7) == [(6, 7)]


@given(st.integers(1, 5000), st.integers(0, 5000))
def test_buckets_cover_the_range_once_and_at_most_double(lo, width):
    hi = lo + width
    buckets = row_buckets(lo, hi)
    assert buckets[0][0] == lo and buckets[-1][1] == hi
    for (_, b), (c, _) in zip(buckets, buckets[1:]):
        assert c == b + 1
    for a, b in buckets:
        assert a <= b and (a == b if b <= EXACT_ROWS else b <= 2 * a)


def test_decode_buckets_are_single_sizes_then_ranges_on_run_time_families(decode_plan):
    plan = decode_plan
    assert isinstance(plan, BucketPlan) and (plan.letter, plan.lo, plan.hi) == ("m", 1, 64)
    assert [(b.lo, b.hi) for b in plan.buckets][:4] == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert plan.buckets[0].plan.family == "gemv"  # one row: the weight streamed into registers
    for b in plan.buckets:
        if not b.exact:
            assert all(FAMILIES[k.family].runtime_rows for k in b.plan.kernels), b.label
            assert b.views.spec.dynamic == {"m": (b.lo, b.hi)} and b.views.m == b.hi
    assert plan.to_dict()["run_time"] == {"letter": "m", "min": 1, "max": 64, "why": plan.why}


def test_neighbouring_ranges_with_the_same_plan_share_one_kernel(decode_plan):
    plan = decode_plan
    ranges = [b for b in plan.buckets if not b.exact]
    for left, right in zip(ranges, ranges[1:]):
        assert (left.plan.family, left.plan.primary.assignment) != (right.plan.family, right.plan.primary.assignment)
    # 5..8 and 9..16 take the same splitk tile (16 rows): one kernel serves both.
    assert sum(1 for b in plan.buckets if not b.exact) < len(row_buckets(5, 64))


def test_run_time_letter_goes_outermost_and_never_merges_as_an_inner_letter():
    # s is outer by stride (s: 64 * 8 = t's max times its stride): at t = 64 the two would merge into
    # one segment, which is wrong for any smaller t. The run-time letter goes first instead.
    doc = {"name": "x", "contraction": "stk,kn->stn", "sizes": {"s": 3, "t": {"min": 1, "max": 64}, "k": 8, "n": 5},
           "operands": {"A": {"strides": [512, 8, 1]}, "C": {"strides": [320, 5, 1]}}}
    spec = parse_spec(doc)
    m = analyse(spec).roles["m"]
    assert m.segments[0].letters[0] == "t" and [s.letters for s in m.segments] == [("t",), ("s",)]
    fixed = analyse(spec.rows_bucket(64, 64)).roles["m"]  # a single size: ordinary merging
    assert [s.letters for s in fixed.segments] == [("s", "t")]


def test_a_bucket_of_one_size_is_an_ordinary_fixed_size_problem():
    spec = parse_spec(DECODE)
    one = spec.rows_bucket(1, 1)
    assert one.dynamic == {} and one.sizes["m"] == 1 and one.A.sizes == (1, 4096) and one.C.sizes == (1, 4096)
    assert spec.rows_bucket(5, 8).dynamic == {"m": (5, 8)} and spec.rows_bucket(5, 8).A.strides == spec.A.strides


def _sources(doc: dict, arch: str = "sm_90a") -> dict[str, str]:
    spec = parse_spec(doc)
    views = analyse(spec)
    return render_sources(spec, views, make_plan(views, get_arch(arch)), plan_baseline(views), get_arch(arch))


def test_entry_point_takes_m_checks_its_range_and_picks_buckets_in_order(decode_sources):
    src = decode_sources
    cu, header = src["d.cu"], src["d.h"]
    assert "cudaError_t d(const float* A, const float* B, float* C, int64_t m, float alpha, float beta, " \
           "cudaStream_t stream)" in header
    entry = cu[cu.index('extern "C"'):]
    assert "if (m < 1 || m > 64) return cudaErrorInvalidValue;" in entry
    conds = re.findall(r"if \((m [=<]= \d+)\)", entry)
    assert conds[:4] == ["m == 1", "m == 2", "m == 3", "m == 4"]
    assert conds[4:] == sorted(conds[4:], key=lambda c: int(c.split()[-1]))  # ranges by their largest size
    assert "m1_gemv::launch(A, B, C, alpha, beta, stream)" in entry  # exact: M is a constant there
    assert re.search(r"m5_\d+_splitk::launch\(A, B, C, m, alpha, beta, stream\)", entry)
    assert entry.rstrip().endswith("}") and entry.count("return m") == entry.count("::launch(")


def _namespaces(cu: str) -> dict[str, str]:
    """Each bucket's kernel namespace of a run-time artifact (m1_gemv, m5_16_splitk, ...): its traits and launch()."""
    return dict(re.findall(r"namespace (m\w+) \{\n(.*?)\}  // namespace \1", cu, re.S))


def test_range_kernels_take_m_as_an_argument_and_exact_ones_keep_the_constant(decode_sources):
    bodies = _namespaces(decode_sources["d.cu"])
    assert "static constexpr bool rows_at_run_time = false;" in bodies["m1_gemv"]
    assert "static constexpr index_t M = 1, " in bodies["m1_gemv"]
    ranged = {name: body for name, body in bodies.items() if re.match(r"m\d+_\d+_", name)}
    assert ranged
    for name, body in ranged.items():
        # M is the launch's: m x M_UNIT rows, passed to the kernel; the traits' M is the bucket's most.
        most = int(re.match(r"m\d+_(\d+)_", name).group(1))
        assert "static constexpr bool rows_at_run_time = true;" in body
        assert "static constexpr index_t M_UNIT = 1;" in body
        assert f"static constexpr index_t M = {most}, " in body
        assert "const Traits::index_t M = Traits::index_t(m) * Traits::M_UNIT;" in body
        launches = re.findall(r"return (dg::\w+::launch)<Traits, \w+, \w+>\(A, B, C, M, ", body)
        assert launches and set(launches) == {"dg::splitk::launch"}, name
    # dg/splitk.cuh's kernel takes M from its argument where the rows are a run-time size, and the grid follows M
    # (dg/cta.cuh's tile count).
    splitk, cta = decode_sources["dg/splitk.cuh"], decode_sources["dg/cta.cuh"]
    assert "const index_t M = T::rows_at_run_time ? M_arg : T::M;" in splitk
    assert "unsigned(Split<T>::blocks(M))" in splitk
    assert "return cta::Shape<T>::tiles(M) * T::GROUPS * T::SPLITS;" in splitk
    assert "static constexpr index_t tiles_m(index_t M) { return (M + T::BM - 1) / T::BM; }" in cta


def test_run_time_rows_with_a_unit_merge_into_m():
    # m = t * s: t at run time (outermost), s fixed and merged under it when its strides chain.
    doc = {"name": "u", "contraction": "tsk,kn->tsn", "sizes": {"t": {"min": 3, "max": 40}, "s": 5, "k": 64, "n": 33},
           "operands": {"A": {"dtype": "f32"}, "B": {"dtype": "f32"}, "C": {"dtype": "f32"}}}
    cu = _sources(doc, "sm_80")["u.cu"]
    assert "constexpr index_t M_UNIT = 5;" in cu and "M=15..200" in cu


def test_fixed_size_specs_keep_their_signature():
    src = _sources({"name": "f", "gemm": {"m": 8, "n": 64, "k": 64}})
    assert "int64_t m" not in src["f.h"] and "m1_" not in src["f.cu"]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6))
@example(492954)  # K = 144 (3 segments), N = 2002: tcgemv's gates passed where no tiling fit (found by CI)
def test_every_random_run_time_spec_plans_buckets_that_cover_its_range(seed):
    doc = random_spec(random.Random(seed), "r", small_m_share=0.5, dynamic_share=1.0)
    spec = parse_spec(doc)
    if not spec.dynamic:
        return
    views = analyse(spec)
    plan = make_plan(views, get_arch("sm_90a"))
    assert isinstance(plan, BucketPlan)
    assert plan.buckets[0].lo == plan.lo and plan.buckets[-1].hi == plan.hi
    for left, right in zip(plan.buckets, plan.buckets[1:]):
        assert right.lo == left.hi + 1
    for b in plan.buckets:
        m = b.views.roles["m"]
        if not b.exact:
            assert m.segments[0].letters[0] == plan.letter  # outermost: its size enters no index math
            assert all(FAMILIES[k.family].runtime_rows for k in b.plan.kernels)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_sm_80_and_sm_90a_both_plan_run_time_specs(arch, decode_plan):
    plan = decode_plan if arch == "sm_90a" else make_plan(analyse(parse_spec(DECODE)), get_arch(arch))
    assert {k.family for k in plan.kernels} <= set(FAMILIES)
    if arch == "sm_80":
        assert all(k.family in ("gemv", "cta") for k in plan.kernels)


UP = {"name": "up", "gemm": {"m": {"min": 1, "max": 128}, "n": 14336, "k": 4096},
      "operands": {"A": {"dtype": "bf16", "align": 16}, "B": {"dtype": "bf16", "layout": "col", "align": 16},
                   "C": {"dtype": "bf16", "align": 16}}}


def test_hopper_ranges_encode_a_for_the_run_time_rows_and_count_tiles_from_them():
    plan = make_plan(analyse(parse_spec(UP)), get_arch("sm_90a"))
    ranged = [b for b in plan.buckets if not b.exact and b.plan.family == "hopper"]
    assert ranged, [b.plan.family for b in plan.buckets]
    files = _sources(UP)
    traits = _namespaces(files["up.cu"])[f"{ranged[-1].label}_hopper"]
    assert "static constexpr bool rows_at_run_time = true;" in traits
    # A's map: its rows (size 0) and its box are the launch's; m reaches the launcher.
    assert re.search(r"\{ 0, 8192, 0, dg::hopper::AT_MN, 0 \},  // m\[128\]", traits)
    assert "{ 4096, 0, 64, dg::hopper::AT_K, 0 },  // k[4096]" in traits
    variant = re.search(r"return dg::hopper::launch_(\w+)<Traits>\(A, B, C, m, ", traits).group(1)
    common = files["dg/hopper_common.cuh"]
    assert "dims[d] = Op::DIMS[d].size != 0 ? Op::DIMS[d].size : m_inner;" in common  # encode: M_INNER rows
    assert "e.a == A && e.b == B && e.m_inner == m_inner" in common  # a cached map is per M too
    assert "if constexpr (T::rows_at_run_time) return int(m) * T::M_UNIT;" in common  # rows_of
    # The tiles follow the run-time rows: the kernel's TILES_M and TILES, the launcher's grid.
    kernel = files[f"dg/hopper_{variant}.cuh"]
    assert "const int TILES_M = T::rows_at_run_time ? (M_INNER + T::BM - 1) / T::BM : T::TILES_M;" in kernel
    assert "tile_at<T>(t, TILES_M)" in kernel and "tiles_of<T>(m_inner)" in kernel
    assert ("if constexpr (T::rows_at_run_time) return T::TILE_GROUPS * ((m_inner + T::BM - 1) / T::BM) * T::TILES_N;"
            in common)
    # Ranges whose primary plans agree share one kernel even where their misaligned-pointer fallbacks differ
    # (9..64 on hopper; 5..8 is a tcgemv kernel).
    assert [(b.lo, b.hi) for b in plan.buckets if not b.exact] == [(5, 8), (9, 64), (65, 128)]
    assert [b.plan.family for b in plan.buckets if not b.exact] == ["tcgemv", "hopper", "hopper"]


def test_hopper_is_gated_when_the_run_time_letter_is_a_tile_loop():
    from dgemm_cli.families import hopper

    # m = t, s with s's stride not chaining under t: two m segments, t the outer one (a tile loop).
    doc = {"name": "x", "contraction": "tsk,kn->tsn", "dtype": "f16",
           "sizes": {"t": {"min": 1, "max": 64}, "s": 128, "k": 256, "n": 256},
           "operands": {"A": {"strides": [65536, 256, 1]}, "C": {"strides": [65536, 256, 1]}}}
    views = analyse(parse_spec(doc).rows_bucket(5, 8))
    reasons = dict(hopper.gates(views, get_arch("sm_90a")))
    assert "tile loop" in reasons["rows at run time"]


# ------------------------------------------------------------------------------------------------
# --family: taken, or refused with the gates' reasons


def test_a_family_whose_gates_refuse_a_fixed_spec_fails_with_their_reasons():
    from dgemm_cli.errors import PlanError

    fixed = {**DECODE, "gemm": {"m": 8, "n": 4096, "k": 4096}}  # f32: wgmma takes 16-bit inputs here
    with pytest.raises(PlanError) as err:
        make_plan(analyse(parse_spec(fixed)), get_arch("sm_90a"), "hopper")
    msg = str(err.value)
    assert msg.startswith("<spec>: --family hopper cannot run this problem (wgmma dtypes: ")
    assert "Fix: leave --family out to let the planner choose among the families that can (" in msg
    assert "cta" in msg.split("Fix: ")[1] and "hopper" not in msg.split("Fix: ")[1]


def test_a_family_taken_by_request_says_so_in_a_sentence():
    fixed = {**UP, "gemm": {"m": 64, "n": 14336, "k": 4096}}
    plan = make_plan(analyse(parse_spec(fixed)), get_arch("sm_90a"), "cta")
    assert plan.family == "cta"
    assert plan.family_decision.summary() == "family = cta (forced by --family cta)"
    assert all(r.why == "--family cta: the command line asks for cta" for r in plan.family_decision.rejected)


def test_a_family_that_some_buckets_refuse_fails_naming_each_bucket():
    from dgemm_cli.errors import PlanError

    with pytest.raises(PlanError) as err:  # gemv keeps its rows in registers: one size a kernel
        make_plan(analyse(parse_spec(DECODE)), get_arch("sm_90a"), "gemv")
    msg = str(err.value)
    assert "--family gemv cannot run this problem (4 of 8 buckets of m in 1..64 refused: m in 5..8: " in msg
    assert "m in 33..64: " in msg and "rows at run time: gemv kernels are compiled for one M" in msg


def test_a_family_every_bucket_takes_plans_every_bucket():
    plan = make_plan(analyse(parse_spec(UP)), get_arch("sm_90a"), "hopper")
    assert {b.plan.family for b in plan.buckets} == {"hopper"}
    assert all(b.plan.family_decision.summary() == "family = hopper (forced by --family hopper)"
               for b in plan.buckets)


def test_tune_family_still_measures_only_that_family_and_refuses_a_gated_one():
    from dgemm_cli.errors import PlanError
    from dgemm_cli.tune import candidates

    views = analyse(parse_spec({**UP, "gemm": {"m": 64, "n": 4096, "k": 4096}}))
    assert {c.family for c in candidates(views, get_arch("sm_90a"), 1, ("cta",))} == {"cta"}
    f32 = analyse(parse_spec({**DECODE, "gemm": {"m": 8, "n": 4096, "k": 4096}}))
    with pytest.raises(PlanError, match="hopper cannot run this problem"):
        candidates(f32, get_arch("sm_90a"), 1, ("hopper",))
