"""The dot family (M = N = 1, blocks along K): its gates and the splitk gate that hands these problems to it, where
the planner takes it and spreads K over groups, plan invariants over random full reductions, the random specs'
share that reaches it, rendering, and (slow) that its kernels compile without spills."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.errors import PlanError
from dgemm_cli.explain import explain_text
from dgemm_cli.families import dot, splitk
from dgemm_cli.families.solving import ranked
from dgemm_cli.plan import Plan, make_plan
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, assert_grouped_kernels_compile

SM90, SM80 = get_arch("sm_90a"), get_arch("sm_80")
BENCH = REPO / "specs" / "bench"
FULL_REDUCTIONS = sorted(BENCH.glob("fullred_*.yaml"))


def _views(raw: dict):
    return analyse(parse_spec({"name": "g", **raw}))


def _frobenius_f32():
    return _views({"dtype": "f32", "contraction": "ab,ab->", "sizes": {"a": 4096, "b": 4096}})


def _dot_f16():
    return _views({"dtype": "f16", "contraction": "k,k->", "sizes": {"k": 16 * 2**20}})


def check_dot(p, views) -> None:
    """What every dot plan satisfies."""
    assert p.family == "dot" and views.m == views.n == 1
    assert p.chunk * min(views.operands[x].elem_bytes for x in "AB") == 16
    assert p.k_slice % p.chunk == 0 and (p.groups - 1) * p.k_slice < views.k <= p.groups * p.k_slice
    assert p.tiles == views.batch and p.blocks == p.tiles * p.groups
    assert p.groups == 1 or p.tiles < SM90.sms
    assert p.groups == 1 or p.k_slice >= p.threads * p.chunk  # every thread has a chunk of every slice
    assert p.scratch_bytes == (0 if p.groups == 1 else 4 * p.blocks)
    assert p.finish_threads % 32 == 0 and p.finish_threads <= dot.FINISH_THREADS_MAX
    for x in "AB":
        assert p.chunk % p.vec[x] == 0 and p.chunk % p.vec_aligned[x] == 0 and p.vec[x] <= p.vec_aligned[x]
        assert p.vec_aligned[x] * views.operands[x].elem_bytes <= 16
        assert p.vec_aligned[x] == 1 or views.operands[x].unit_role == "k"
    assert p.runtime_dispatch == (p.vec != p.vec_aligned)
    cap = min(255, SM90.regs_per_sm // p.threads)
    assert all(dot.dot_registers(views, p.unroll, wide) <= cap for wide in (False, True))


# ---- gates: M = N = 1 is this family's and not splitk's ----

def test_gates_name_what_rules_the_family_out():
    assert dot.gates(_dot_f16(), SM90) == []
    assert [c for c, _ in dot.gates(_dot_f16(), SM80)] == ["dependent launch"]
    decode = _views({"dtype": "f16", "gemm": {"m": 1, "n": 128, "k": 4096}})
    assert [c for c, _ in dot.gates(decode, SM90)] == ["one output element"]
    short = _views({"dtype": "f16", "contraction": "k,k->", "sizes": {"k": dot.MIN_K}})
    assert [c for c, _ in dot.gates(short, SM90)] == ["K to split"]


def test_splitk_leaves_m_n_1_to_the_dot_family():
    assert [c for c, _ in splitk.gates(_dot_f16(), SM90)] == ["an output tile"]
    with pytest.raises(PlanError, match=r"--family splitk cannot run this problem \(an output tile: M = N = 1"):
        make_plan(_dot_f16(), SM90, "splitk")
    # Rows sized at run time are never M = N = 1: a range of M is splitk's (and dot's kernel compiles M = 1).
    ranged = _views({"dtype": "f16", "gemm": {"m": {"min": 1, "max": 8}, "n": 1, "k": 4096}})
    assert not dot.is_dot(ranged)


# ---- where the planner takes it ----

@pytest.mark.parametrize("make", [_frobenius_f32, _dot_f16], ids=["ab,ab->_4096x4096_f32", "k,k->_16M_f16"])
def test_a_full_reduction_with_millions_of_k_spreads_over_groups(make):
    views = make()
    plan = make_plan(views, SM90)
    p = plan.primary
    assert plan.family == "dot"
    check_dot(p, views)
    # One block can hold at most a few thousand elements in flight: K in the millions wants most SMs.
    assert p.groups > 1 and p.blocks >= SM90.sms
    groups = next(d for d in p.decisions if d.node == "groups")
    assert groups.value == p.groups and {r.value for r in groups.rejected} >= {1}


@pytest.mark.parametrize("path", FULL_REDUCTIONS, ids=lambda p: p.stem)
def test_the_full_reduction_benches_plan_dot_on_sm90_and_another_family_on_sm80(path):
    views = analyse(load_spec(path))
    plan = make_plan(views, SM90)
    assert plan.family == "dot" and plan.fallback is None
    check_dot(plan.primary, views)
    assert make_plan(views, SM80).family not in ("dot", "splitk")


def test_explain_says_why_dot_won_and_shows_its_graph():
    text = explain_text(_frobenius_f32().spec, SM90)
    assert "family = dot (cheapest of" in text and "## Family dot (chosen): " in text
    assert "splitk     rejected: splitk: an output tile: M = N = 1" in text
    section = text[text.index("## Family dot (chosen)"):]
    assert "groups        in {1, 2, 4" in section and "block shape dot" in section
    assert "groups only where outputs leave SMs idle" in section and "groups = " in section
    # A decode product: dot's gate says why it lost.
    text = explain_text(load_spec(BENCH / "decode_1x4096x4096.yaml"), SM90)
    assert "dot        rejected: dot: one output element: C has 1 x 4096 elements a batch index" in text


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
    if k <= dot.MIN_K:
        sizes[letters[-1]] *= 64
    raw = {"dtype": draw(st.sampled_from(["f16", "bf16", "f32"])), "contraction": f"{a}{batch},{b}{batch}->{batch}",
           "sizes": sizes}
    return _views(raw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full_reductions())
def test_every_candidate_of_a_random_full_reduction_is_consistent(views):
    if dot.gates(views, SM90):
        return
    for p in ranked(dot.problem(views, SM90), 12):
        check_dot(p, views)


def test_the_random_specs_full_reductions_reach_the_family():
    """The random specs' full-reduction share (randspec.FULL_REDUCTION_SHARE) is what reaches this family in the
    random sweeps: among the default draws of seed 7, some plan dot."""
    rng, reached = random.Random(7), 0
    for i in range(300):
        views = analyse(parse_spec(random_spec(rng, f"r{i}")))
        if not dot.gates(views, SM90) and make_plan(views, SM90).family == "dot":
            reached += 1
    assert reached >= 2


# ---- rendering ----

def _render(views, plan=None) -> dict[str, str]:
    plan = plan or make_plan(views, SM90)
    return render_sources(views.spec, views, plan, plan_baseline(views), SM90)


def test_a_full_reduction_renders_the_dot_block_and_checks_both_pointers():
    views = _dot_f16()
    files = _render(views)
    cu = files["g.cu"]
    assert "namespace dot {" in cu and "return dot::launch(A, B, C, alpha, beta, stream);" in cu
    assert "cudaLaunchAttributeClusterDimension" not in cu
    # The spec promises 2 bytes: the 16-byte loads only when both view pointers pass the check; the order of
    # the sum is the same in both instantiations.
    assert "if (aligned(A, 16) && aligned(B, 16)) return dg::dot::launch<Traits, 8, 8>(" in cu
    assert "return dg::dot::launch<Traits, 1, 1>(" in cu
    assert '#include "dg/dot.cuh"' in cu and "FINISH_THREADS = " in cu and "scratch_bytes() == " in cu
    kernel = files["dg/dot.cuh"][files["dg/dot.cuh"].index("    kernel(const"):]
    assert kernel.index("wait_for_predecessor();") < kernel.index("K_SLICE")
    assert "Scratch:" in files["README.md"]


def test_the_header_states_the_plan_as_explain_does():
    views = _dot_f16()
    plan = make_plan(views, SM90)
    cu = _render(views, plan)["g.cu"]
    for line in plan.primary.detail_lines():
        assert line in " ".join(cu.replace("//", " ").split()), line


def test_a_small_full_reduction_may_keep_one_block_and_store_directly():
    views = _views({"dtype": "f32", "contraction": "ab,ab->", "sizes": {"a": 40, "b": 50}})
    p = next(c for c in ranked(dot.problem(views, SM90), 64) if c.groups == 1)
    check_dot(p, views)
    plan = Plan(p, None, make_plan(views, SM90, "dot").family_decision)
    cu = _render(views, plan)["g.cu"]
    assert "GROUPS = 1;" in cu and "FINISH_THREADS" not in cu and "scratch_bytes" not in cu


# ---- compiled ----

@pytest.mark.slow
def test_dot_kernels_compile_without_spills(tmp_path):
    specs = [load_spec(p) for p in FULL_REDUCTIONS]
    specs.append(parse_spec({"name": "dot_perm", "dtype": "f16", "contraction": "abc,cab->",
                             "sizes": {"a": 64, "b": 1000, "c": 130},
                             "epilogue": [{"activation": "silu"}, {"clamp": [-2.0, 2.0]}], "beta": 1.0}))
    specs.append(parse_spec({"name": "dot_batch", "dtype": "bf16", "contraction": "zab,zba->z",
                             "sizes": {"z": 3, "a": 999, "b": 1001}}))
    assert_grouped_kernels_compile(specs, "dot", tmp_path)


@pytest.mark.gpu
def test_a_grouped_dot_verifies_and_is_bit_identical_run_to_run(tmp_path):
    """On a GPU: a batch of dot products whose K is split over groups, with the wide loads' pointer check, verifies
    and reproduces C's bits over 20 more launches (the slices' sums are added in a fixed order)."""
    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.toolchain import find_nvcc

    from .test_gpu_verify import _repeated_20_times
    spec = parse_spec({"name": "det_dot", "dtype": "f16", "contraction": "zk,zk->z",
                       "sizes": {"z": 3, "k": 1 << 20}, "beta": 0.5})
    g = generate(spec, SM90, tmp_path)
    p = g.planned.plan.primary
    assert g.planned.plan.family == "dot" and p.groups > 1 and p.runtime_dispatch, p.summary
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    _repeated_20_times(g.directory)
