"""The einsum forms numpy accepts beyond `ab,bc->ac`: full reductions (no output letters), summed
letters in one input only, scalar inputs and the implicit output (no `->`). No GPU needed.

Hand-written cases pin the classification and the refusals; hypothesis properties check that the
implicit output is numpy's, and that both descriptions of a problem the generator writes -- the
verify harness's per-letter strides and the kernel's role segments -- compute what numpy.einsum
computes on the same strided buffers.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.explain import explain_text
from dgemm_cli.plan import make_plan
from dgemm_cli.randspec import random_specs
from dgemm_cli.render import _harness_ctx, render_sources
from dgemm_cli.spec import Spec, parse_spec
from dgemm_cli.views import ROLES, ProblemViews, analyse, classify_letters, letter_stride, role_of

from .test_spec import expect_error


def spec_of(expr: str, sizes: dict[str, int] | None = None, **top) -> Spec:
    letters = {x for x in expr if x.isalpha()}
    sizes = sizes or {x: 3 + 2 * i for i, x in enumerate(sorted(letters))}  # small odd, distinct
    return parse_spec({"name": "e", "contraction": expr, "sizes": sizes, **top}, "e.yaml")


def classes(spec: Spec) -> dict[str, str]:
    return {lc.letter: lc.description for lc in classify_letters(spec)}


# ------------------------------------------------------------------------------------------------
# full reductions: no output letters


@pytest.mark.parametrize("expr", ["ab,ab->", "ab,ba->", "abc,bac->", "abc,cba->"])
def test_full_reduction_is_one_output_element(expr):
    spec = spec_of(expr)
    assert spec.C.letters == "" and spec.C.strides == () and spec.C.sizes == ()
    assert spec.contraction == expr
    views = analyse(spec)
    assert (views.batch, views.m, views.n) == (1, 1, 1)
    assert views.k == math.prod(spec.sizes.values())
    assert not views.roles["m"].segments and not views.roles["n"].segments
    assert views.operands["C"].roles == () and views.operands["C"].span == 1
    assert set(classes(spec).values()) == {"summed (in A and B)"}


def test_full_reduction_output_keeps_offset_dtype_align():
    spec = spec_of("ab,ba->", dtype="f16", operands={"C": {"offset": 5, "dtype": "f32", "align": 16,
                                                           "strides": []}})
    assert (spec.C.offset, spec.C.dtype, spec.C.align, spec.C.span) == (5, "f32", 16, 6)
    assert parse_spec(spec.to_dict(), "round.yaml") == spec
    assert spec.to_dict()["operands"]["C"]["strides"] == []


def test_full_reduction_output_given_a_stride_says_it_has_none(tmp_path):
    data = {"name": "e", "contraction": "ab,ab->", "sizes": {"a": 3, "b": 5}, "operands": {"C": {"strides": [1]}}}
    err = expect_error(tmp_path, data, "operands.C.strides", "has 1 entries but the operand has 0 dims")
    assert "strides: []" in err.fix


def test_full_reduction_plans_one_tile_and_renders():
    spec = spec_of("abc,bac->", dtype="f16", operands={"C": {"offset": 3, "dtype": "f32"}}, beta=0.5)
    views = analyse(spec)
    # On sm_90a a small-M family takes the one output element (K = 105: one block, or a K split over a
    # cluster where K is longer); the cta family runs it in one block.
    plan = make_plan(views, get_arch("sm_90a"))
    assert plan.family in ("gemv", "splitk")
    assert plan.primary.blocks == plan.primary.splits  # one output tile
    cta_plan = make_plan(views, get_arch("sm_90a"), prefer="cta")
    assert (cta_plan.primary.tiles_m, cta_plan.primary.tiles_n, cta_plan.primary.tiles) == (1, 1, 1)
    for p in (plan, cta_plan):
        files = render_sources(spec, views, p, plan_baseline(views), get_arch("sm_90a"))
        cu = files["e.cu"]
        # C has no roles: one element, its view empty along every role, no index math.
        assert re.search(r"using C_view = dg::View<dg::Role<index_t>,\s+dg::Role<index_t>,\s+dg::Role<index_t>,"
                         r"\s+dg::Role<index_t>>;", cu)
        assert "C_view::" not in cu and "C_t* p = C + (0);" in cu and "C += 3;" in cu
    assert "\n    0,\n" in files["e_harness.cu"]  # nc = 0: no output letters in the reference
    h = _harness_ctx(spec)
    assert h["nc"] == 0 and [d["letter"] for d in h["dims"]] == list("abc")
    assert all(d["strides"][2] == 0 for d in h["dims"])


def test_full_reduction_baseline_is_a_one_by_one_gemm():
    bl = plan_baseline(analyse(spec_of("ab,ab->")))  # dense and in the same order: one k segment
    assert bl.available and bl.kind == "cublas"
    assert any((c.m, c.n, c.batch, c.k) == (1, 1, 1, 3 * 5) for c in bl.calls)
    bl = plan_baseline(analyse(spec_of("ab,ba->")))  # two k segments: dense temps
    assert bl.available and bl.kind == "copy+cublas" and not bl.copy[2]


# ------------------------------------------------------------------------------------------------
# summed letters in one input only


def test_letter_in_a_only_is_summed_with_b_broadcast():
    spec = spec_of("abc,cd->ad")
    assert role_of("b", spec) == "k"
    assert classes(spec) == {"a": "M (in A and C)", "b": "summed, in A only (B broadcast)",
                             "c": "summed (in A and B)", "d": "N (in B and C)"}
    assert letter_stride(spec, "B", "b") == 0 and letter_stride(spec, "A", "b") == spec.A.stride_of("b")
    views = analyse(spec)
    assert views.k == spec.sizes["b"] * spec.sizes["c"]
    segs = {s.letters: dict(s.strides) for s in views.roles["k"].segments}
    assert segs[("b",)]["B"] == 0
    assert views.operands["B"].broadcast == ("b",) and views.operands["A"].broadcast == ()


def test_letter_in_b_only_is_summed_with_a_broadcast():
    spec = spec_of("ab,bcd->ad")
    assert classes(spec)["c"] == "summed, in B only (A broadcast)"
    assert analyse(spec).operands["A"].broadcast == ("c",)
    # The verify reference sums it too: it walks every summed letter, B's own ones included.
    dims = _harness_ctx(spec)["dims"]
    assert [d["letter"] for d in dims] == ["a", "d", "b", "c"]
    assert dims[3]["strides"] == [0, spec.B.stride_of("c"), 0]


def test_letter_in_one_input_and_the_output_is_m_or_n():
    spec = spec_of("abc,cd->abd")
    assert classes(spec)["b"] == "M (in A and C)"
    spec = spec_of("ac,cdb->adb")
    assert classes(spec)["b"] == "N (in B and C)"


def test_size_one_letters_are_said_to_be_dropped():
    spec = spec_of("abc,cd->ad", sizes={"a": 3, "b": 1, "c": 5, "d": 7})
    assert classes(spec)["b"] == "summed, in A only (B broadcast); size 1: dropped"
    assert analyse(spec).operands["B"].broadcast == ()


def test_one_sided_letter_baseline_materialises_the_broadcast():
    bl = plan_baseline(analyse(spec_of("abc,cd->ad")))
    assert bl.available and bl.copy[1]  # cuBLAS has no stride-0 k: B is expanded, as .contiguous() would


# ------------------------------------------------------------------------------------------------
# scalar inputs and the implicit output


@pytest.mark.parametrize("expr,a,b", [("a,->a", "a", ""), ("ab,->ab", "ab", ""), (",ab->ab", "", "ab")])
def test_scalar_input_has_no_roles(expr, a, b):
    spec = spec_of(expr)
    assert (spec.A.letters, spec.B.letters) == (a, b)
    views = analyse(spec)
    scalar = "B" if not b else "A"
    assert views.operands[scalar].roles == () and views.operands[scalar].span == 1
    assert views.k == 1
    plan = make_plan(views, get_arch("sm_90a"))
    render_sources(spec, views, plan, plan_baseline(views), get_arch("sm_90a"))


@pytest.mark.parametrize("expr,explicit", [
    ("ab,bc", "ab,bc->ac"),
    ("ab,cb", "ab,cb->ac"),
    ("ba,cb", "ba,cb->ac"),
    ("abcd,ad", "abcd,ad->bc"),
    ("abcd,efdc", "abcd,efdc->abef"),
    ("ab,ab", "ab,ab->"),
    ("abc,cba", "abc,cba->"),
    ("Ba,aA", "Ba,aA->AB"),  # numpy sorts by character code: upper case first
    (" ab , bc ", "ab,bc->ac"),
])
def test_implicit_output(expr, explicit):
    spec = spec_of(expr)
    assert spec.contraction == explicit and spec.implicit_output
    assert not spec_of(explicit).implicit_output
    assert spec_of(explicit) == spec  # the same problem either way


# ------------------------------------------------------------------------------------------------
# what einsum rejects, or one kernel cannot do


def _expect(tmp_path, expr, problem, sizes=None):
    letters = sorted({x for x in str(expr) if x.isalpha()})
    data = {"name": "e", "contraction": expr, "sizes": sizes or {x: 3 for x in letters}}
    return expect_error(tmp_path, data, "contraction", problem)


@pytest.mark.parametrize("expr,count,first", [
    ("ab,bc,cd->ad", 3, "ab,bc->ac"),
    ("ab,bc,cd", 3, "ab,bc->ac"),  # implicit: the whole expression's output is "ad"
    ("abc,bcd,de", 3, "abc,bcd->ad"),
    ("a,b,c,d->abcd", 4, "a,b->ab"),
])
def test_three_or_more_operands_point_to_splitting(tmp_path, expr, count, first):
    err = _expect(tmp_path, expr, f"has {count} inputs; one kernel contracts two")
    assert "split" in err.fix and "pairwise" in err.fix and f"'{first}'" in err.fix


@pytest.mark.parametrize("expr", ["ab->ba", "abc"])
def test_one_operand(tmp_path, expr):
    err = _expect(tmp_path, expr, "has one input")
    assert "two inputs" in err.fix


@pytest.mark.parametrize("expr,letter,op", [
    ("aab,bc->ac", "a", "A"), ("ab,bcc->ac", "c", "B"), ("aab,bcc->ac", "a", "A"),
    ("baa,bcc->ac", "a", "A"), ("aab,ccb->ac", "a", "A"),  # opt_einsum's "inner than dot" cases
    ("aab,bc", "a", "A"),
])
def test_diagonal_is_refused_and_says_why(tmp_path, expr, letter, op):
    err = _expect(tmp_path, expr, f"letter '{letter}' appears twice in {op}")
    assert "diagonal" in err.problem and "stride" in err.fix


@pytest.mark.parametrize("expr", ["...ab,...bc->...ac", "ab...,bc->ac", "ab,bc->...", "...,..."])
def test_ellipsis_is_refused_and_says_why(tmp_path, expr):
    err = _expect(tmp_path, expr, "uses '...'")
    assert "letter" in err.fix


@pytest.mark.parametrize("expr,problem", [
    ("ab,bc->ac->ca", "has 2 arrows"),
    ("ab,bc->acd", "letter 'd' appears in C only"),
    (",->", "has no letters"),
    (",", "has no letters"),
    ("ab,bc->a.c", "not of the form"),
    ("ab,bé->a", "not of the form"),
])
def test_other_refusals(tmp_path, expr, problem):
    _expect(tmp_path, expr, problem)


# ------------------------------------------------------------------------------------------------
# properties: the implicit output is numpy's; the harness's and the kernel's descriptions of the
# problem compute numpy.einsum


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALPHABET = "abcdefgAB"


@st.composite
def implicit_expressions(draw) -> str:
    """Two inputs with distinct letters each (numpy would take a diagonal otherwise), no `->`."""
    a = draw(st.lists(st.sampled_from(ALPHABET), unique=True, max_size=4))
    b = draw(st.lists(st.sampled_from(ALPHABET), unique=True, max_size=4))
    return f"{''.join(a)},{''.join(b)}"


@PROPERTY
@given(expr=implicit_expressions(), seed=st.integers(0, 2**32 - 1))
def test_property_implicit_output_is_numpys(expr, seed):
    letters = sorted(set(expr) - {","})
    if not letters:
        return  # ",": a product of scalars, refused
    sizes = {x: i + 1 for i, x in enumerate(letters)}  # distinct: numpy's output shape orders the letters
    spec = spec_of(expr, sizes)
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal([sizes[x] for x in term]) for term in expr.split(","))
    want = np.einsum(expr, a, b)
    assert want.shape == tuple(sizes[x] for x in spec.C.letters)
    np.testing.assert_allclose(np.einsum(spec.contraction, a, b), want, rtol=1e-12, atol=1e-12)


@st.composite
def einsum_specs(draw) -> dict:
    """Small specs in every form: full reductions, one-sided summed letters, scalar inputs, implicit
    outputs, with permuted, padded and broadcast (stride 0) input strides and offsets."""
    pool = iter(draw(st.permutations("abcdefghijklm")))
    counts = {r: draw(st.integers(0, 2)) for r in ("batch", "m", "n", "k", "a_only", "b_only")}
    # numpy's implicit output is the letters that appear once: no batch and no one-sided summed letters.
    implicit = draw(st.integers(0, 3)) == 0
    if implicit:
        counts.update(batch=0, a_only=0, b_only=0)
    groups = {r: [next(pool) for _ in range(c)] for r, c in counts.items()}
    if not any(groups.values()):
        groups["n"].append(next(pool))  # `,->` has no letters: refused
    a = groups["batch"] + groups["m"] + groups["k"] + groups["a_only"]
    b = groups["batch"] + groups["k"] + groups["n"] + groups["b_only"]
    c = groups["batch"] + groups["m"] + groups["n"]
    letters = {op: "".join(draw(st.permutations(ls))) for op, ls in zip("ABC", (a, b, c))}
    sizes = {x: draw(st.integers(1, 4)) for x in sorted(set(a + b + c))}
    while math.prod(sizes.values()) > 1500:  # the checks below walk every index in Python
        sizes[max(sizes, key=sizes.get)] = 1
    operands = {}
    for op in "ABC":
        order = draw(st.permutations(letters[op]))  # memory order, innermost first
        strides, step = {}, draw(st.sampled_from([1, 1, 2]))
        for x in order:
            if op != "C" and draw(st.integers(0, 6)) == 0:
                strides[x] = 0
                continue
            strides[x] = step
            step = step * sizes[x] + draw(st.sampled_from([0, 0, 1, 3]))
        operands[op] = {"strides": [strides[x] for x in letters[op]], "offset": draw(st.integers(0, 3))}
    if implicit:
        letters["C"] = "".join(sorted(letters["C"]))
        del operands["C"]["strides"]  # dense in its (sorted) letter order
        expr = f"{letters['A']},{letters['B']}"
    else:
        expr = f"{letters['A']},{letters['B']}->{letters['C']}"
    return {"name": "p", "dtype": "f32", "contraction": expr, "sizes": sizes, "operands": operands}


def _buffers(spec: Spec, rng) -> dict[str, np.ndarray]:
    return {op.name: rng.standard_normal(op.span) for op in (spec.A, spec.B)}


def _numpy_einsum(spec: Spec, buffers: dict[str, np.ndarray], out: str) -> np.ndarray:
    """numpy.einsum over the spec's own strided views of the buffers."""
    views = []
    for op in (spec.A, spec.B):
        buf = buffers[op.name]
        views.append(np.lib.stride_tricks.as_strided(buf[op.offset:], op.sizes,
                                                     [s * buf.itemsize for s in op.strides]))
    return np.einsum(f"{spec.A.letters},{spec.B.letters}->{out}", *views)


def _harness_reference(spec: Spec, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """What dg_harness.cuh's reference computes from the DgProblem the generator writes: C's letters
    (dense, in C's order) from dims[:nc], the sum over dims[nc:], addresses offset + sum idx * stride."""
    h = _harness_ctx(spec)
    dims, nc = h["dims"], h["nc"]
    out = np.zeros([d["size"] for d in dims[:nc]])
    for idx in itertools.product(*(range(d["size"]) for d in dims)):
        addr = [h["offsets"][x] + sum(i * d["strides"][x] for i, d in zip(idx, dims)) for x in (0, 1)]
        out[idx[:nc]] += buffers["A"][addr[0]] * buffers["B"][addr[1]]
    return out


def _role_offset(views: ProblemViews, role: str, op: str, index: int) -> int:
    off = 0
    for seg in reversed(views.roles[role].segments):
        off += (index % seg.size) * seg.stride(op)
        index //= seg.size
    return off


def _kernel_view_product(spec: Spec, views: ProblemViews, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """C[batch, m, n] as the kernel addresses it: every operand through its roles' merged segments."""
    out = np.zeros((views.batch, views.m, views.n))
    holds = {x: [r for r in ROLES if r in views.operands[x].roles] for x in "AB"}
    for bi, mi, ni, ki in itertools.product(range(views.batch), range(views.m), range(views.n), range(views.k)):
        index = {"batch": bi, "m": mi, "n": ni, "k": ki}
        a = spec.A.offset + sum(_role_offset(views, r, "A", index[r]) for r in holds["A"])
        b = spec.B.offset + sum(_role_offset(views, r, "B", index[r]) for r in holds["B"])
        out[bi, mi, ni] += buffers["A"][a] * buffers["B"][b]
    return out


@PROPERTY
@given(raw=einsum_specs(), seed=st.integers(0, 2**32 - 1))
def test_property_harness_reference_and_kernel_views_compute_numpys_einsum(raw, seed):
    spec = parse_spec(raw, "p.yaml")
    views = analyse(spec)
    buffers = _buffers(spec, np.random.default_rng(seed))
    want = _numpy_einsum(spec, buffers, spec.C.letters)
    np.testing.assert_allclose(_harness_reference(spec, buffers), want, rtol=1e-10, atol=1e-10)
    # The kernel flattens each role over its letters of size > 1, in segment order.
    order = [x for r in ("batch", "m", "n") for x in views.roles[r].letters]
    flat = _numpy_einsum(spec, buffers, "".join(order)).reshape(views.batch, views.m, views.n)
    np.testing.assert_allclose(_kernel_view_product(spec, views, buffers), flat, rtol=1e-10, atol=1e-10)


def test_einsum_specs_cover_every_form():
    """The property above is not vacuous: its generator reaches each form."""
    seen = set()

    @settings(max_examples=300, deadline=None, database=None)
    @given(raw=einsum_specs())
    def collect(raw):
        spec = parse_spec(raw, "p.yaml")
        seen.add("full" if not spec.C.letters else "output")
        seen.update({"scalar"} if not (spec.A.letters and spec.B.letters) else set())
        seen.update({"implicit"} if spec.implicit_output else set())
        seen.update("one-sided" for lc in classify_letters(spec) if len(lc.holders) == 1)
        seen.update("broadcast" for f in analyse(spec).operands.values() if f.broadcast)

    collect()
    assert seen >= {"full", "output", "scalar", "implicit", "one-sided", "broadcast"}, seen


# ------------------------------------------------------------------------------------------------
# explain


def test_explain_shows_how_each_letter_was_classified():
    text = explain_text(spec_of("abc,cd->ad", sizes={"a": 3, "b": 5, "c": 7, "d": 9}), get_arch("sm_90a"))
    letters = text.split("## Letters\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert letters == ["  a  size 3        M (in A and C)",
                       "  b  size 5        summed, in A only (B broadcast)",
                       "  c  size 7        summed (in A and B)",
                       "  d  size 9        N (in B and C)"]
    assert "B: contiguous along n" in text and "broadcast over b" in text


def test_explain_says_where_an_implicit_or_empty_output_came_from():
    text = explain_text(spec_of("ab,bc"), get_arch("sm_90a"))
    assert "numpy's implicit one" in text and "C[ac]" in text
    text = explain_text(spec_of("ab,ba"), get_arch("sm_90a"))
    assert "C[] (none: a full reduction, C is one element)" in text
    text = explain_text(spec_of("ab,ba->"), get_arch("sm_90a"))
    assert "no output letters: a full reduction, C is one element" in text


# ------------------------------------------------------------------------------------------------
# random specs


def test_random_specs_use_every_form():
    """A share of `deepgemm random-specs` (the GPU sweep) takes each form."""
    counts = dict.fromkeys(("full", "one-sided", "scalar", "implicit"), 0)
    specs = [parse_spec(raw, "r.yaml") for raw in random_specs(400, seed=11)]
    for spec in specs:
        counts["full"] += not spec.C.letters
        counts["one-sided"] += any(len(lc.holders) == 1 for lc in classify_letters(spec))
        counts["scalar"] += not (spec.A.letters and spec.B.letters)
        counts["implicit"] += spec.implicit_output
        analyse(spec)
    assert counts["full"] >= 15 and counts["one-sided"] >= 25 and counts["scalar"] >= 5, counts
    assert counts["implicit"] >= 15, counts
    assert sum(not (s.implicit_output or s.C.letters == "") for s in specs) >= 300  # most stay ordinary
