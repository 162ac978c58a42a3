"""Tests for dgemm_cli.views: roles, segment merging and per-operand facts. No GPU needed.

Hand-written cases pin the documented behaviour (NCHW / NHWC / padded / permuted / broadcast views,
vector widths and their limits, int64 indexing); hypothesis properties check, over random specs from
`randspec`, that segments describe exactly the same addresses as the per-letter strides and that the
vector widths the planner is given are safe.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.randspec import random_spec
from dgemm_cli.spec import DTYPE_BYTES, Spec, load_spec, parse_spec
from dgemm_cli.views import (
    INT32_MAX,
    ROLE_HOLDERS,
    ROLES,
    VECTOR_BYTES,
    ProblemViews,
    analyse,
    letter_stride,
    merge_segments,
    role_of,
)

SPECS_DIR = Path(__file__).resolve().parent.parent / "specs"


def views_of(data: dict) -> ProblemViews:
    return analyse(parse_spec(data, "test.yaml"))


def seg_table(views: ProblemViews, role: str) -> list[tuple[str, int, dict[str, int]]]:
    """[(letters joined, size, {operand: stride})] outer -> inner."""
    return [("".join(s.letters), s.size, dict(s.strides)) for s in views.roles[role].segments]


def dense(sizes: list[int]) -> list[int]:
    out, step = [], 1
    for n in reversed(sizes):
        out.append(step)
        step *= n
    return out[::-1]


# ------------------------------------------------------------------------------------------------
# roles and merging on real layouts


def test_roles_of_letters():
    spec = parse_spec({"name": "x", "contraction": "bmk,bkn->bmn", "sizes": {"b": 2, "m": 3, "n": 4, "k": 5}})
    assert {x: role_of(x, spec) for x in "bmnk"} == {"b": "batch", "m": "m", "n": "n", "k": "k"}
    spec = parse_spec({"name": "x", "contraction": "nchw,kc->nkhw", "sizes": dict(n=2, c=3, h=4, w=5, k=6)})
    assert {x: role_of(x, spec) for x in "nchwk"} == {"n": "m", "c": "k", "h": "m", "w": "m", "k": "n"}


def test_nchw_conv1x1_segments():
    views = views_of({
        "name": "c", "contraction": "nchw,kc->nkhw",
        "sizes": {"n": 8, "c": 256, "h": 56, "w": 56, "k": 512},
        "operands": {"A": {"strides": [802816, 3136, 56, 1]}},
    })
    assert seg_table(views, "m") == [("n", 8, {"A": 802816, "C": 512 * 3136}), ("hw", 3136, {"A": 1, "C": 1})]
    assert views.roles["m"].letters == ("n", "h", "w")
    assert views.m == 8 * 3136 and views.n == 512 and views.k == 256 and views.batch == 1
    assert seg_table(views, "k") == [("c", 256, {"A": 3136, "B": 1})]
    assert seg_table(views, "n") == [("k", 512, {"B": 256, "C": 3136})]
    assert views.roles["batch"].segments == () and views.roles["batch"].size == 1
    assert views.flops == 2 * 8 * 3136 * 512 * 256
    a = views.operands["A"]
    assert a.roles == ("m", "k") and a.unit_role == "m"
    assert views.operands["B"].unit_role == "k"
    assert views.operands["C"].unit_role == "m"  # n (k letter) is not contiguous in NKHW
    assert not views.needs_int64


def test_nchw_example_spec_file():
    views = analyse(load_spec(SPECS_DIR / "conv1x1_nchw.yaml"))
    assert [(s.letters, s.size) for s in views.roles["m"].segments] == [(("n",), 8), (("h", "w"), 3136)]


def test_nhwc_dense_merges_n_h_w():
    sizes = {"n": 2, "h": 7, "w": 9, "c": 16, "k": 24}
    views = views_of({"name": "c", "contraction": "nhwc,kc->nhwk", "sizes": sizes})
    assert seg_table(views, "m") == [("nhw", 2 * 7 * 9, {"A": 16, "C": 24})]
    assert views.operands["A"].unit_role == "k"
    assert views.operands["B"].unit_role == "k"
    assert views.operands["C"].unit_role == "n"


def test_padded_row_pitch_stops_merge():
    # NHWC with 8 channels, but each image row (w) is stored with a pitch of 48 > 5 * 8 elements.
    sizes = {"n": 2, "h": 4, "w": 5, "c": 8, "k": 16}
    views = views_of({"name": "p", "contraction": "nhwc,kc->nhwk", "sizes": sizes,
                      "operands": {"A": {"strides": [4 * 48, 48, 8, 1]}}})
    # h -> w does not chain in A (48 != 8 * 5); n -> h still does in both A (192 = 48 * 4) and C.
    assert seg_table(views, "m") == [("nh", 8, {"A": 48, "C": 80}), ("w", 5, {"A": 8, "C": 16})]


def test_padding_in_output_only_also_stops_merge():
    sizes = {"n": 2, "h": 4, "w": 5, "c": 8, "k": 16}
    views = views_of({"name": "p", "contraction": "nhwc,kc->nhwk", "sizes": sizes,
                      "operands": {"C": {"strides": [4 * 5 * 16, 5 * 16, 16 + 0, 1]}}})
    assert len(views.roles["m"].segments) == 1  # control: dense C merges
    views = views_of({"name": "p", "contraction": "nhwc,kc->nhwk", "sizes": sizes,
                      "operands": {"C": {"strides": [4 * 5 * 20, 5 * 20, 20, 1]}}})  # k padded to 20
    assert seg_table(views, "m") == [("nhw", 40, {"A": 8, "C": 20})]  # pitch on w's stride keeps the chain
    views = views_of({"name": "p", "contraction": "nhwc,kc->nhwk", "sizes": sizes,
                      "operands": {"C": {"strides": [4 * 90, 90, 16, 1]}}})  # row pitch 90 > 80
    assert seg_table(views, "m") == [("nh", 8, {"A": 40, "C": 90}), ("w", 5, {"A": 8, "C": 16})]


def test_example_padded_nhwc_f32():
    views = analyse(load_spec(SPECS_DIR / "nhwc_padded_f32.yaml"))
    # The channel padding (60 in 64) sits on the k role; n, h, w still chain in A and in C (knhw).
    assert seg_table(views, "m") == [("nhw", 2 * 14 * 14, {"A": 64, "C": 1})]
    assert seg_table(views, "k") == [("c", 60, {"A": 1, "B": 1})]
    a = views.operands["A"]
    assert a.unit_role == "k" and a.vector_elems == 1
    assert a.vector_limit == "offset 3 is not a multiple of 2"


def test_permuted_input_merges_when_output_agrees():
    # A is "hwc" stored w-major (w outermost); C is "hwk" stored w-major too: one M segment in (w, h) order,
    # although the letters are written h before w in both operands.
    sizes = {"h": 3, "w": 5, "c": 4, "k": 6}
    views = views_of({"name": "t", "contraction": "hwc,kc->hwk", "sizes": sizes,
                      "operands": {"A": {"strides": [4, 12, 1]}, "C": {"strides": [6, 18, 1]}}})
    m = views.roles["m"]
    assert m.letters == ("w", "h")
    assert seg_table(views, "m") == [("wh", 15, {"A": 4, "C": 6})]


def test_permuted_input_alone_cannot_merge():
    sizes = {"h": 3, "w": 5, "c": 4, "k": 6}
    views = views_of({"name": "t", "contraction": "hwc,kc->hwk", "sizes": sizes,
                      "operands": {"A": {"strides": [4, 12, 1]}}})  # C dense h-major
    m = views.roles["m"]
    assert len(m.segments) == 2 and m.size == 15
    assert sorted(m.letters) == ["h", "w"]


def test_broadcast_first_holder_does_not_decide_the_order():
    # A broadcasts both m letters (stride 0: its memory order says nothing); C stores them w-major although
    # both operands write h before w. The first holder's (A's) order h, w would split m in two; C's w, h
    # merges it.
    sizes = {"h": 3, "w": 5, "c": 4, "k": 6}
    views = views_of({"name": "t", "contraction": "hwc,kc->hwk", "sizes": sizes,
                      "operands": {"A": {"strides": [0, 0, 1]}, "C": {"strides": [6, 18, 1]}}})
    assert views.roles["m"].letters == ("w", "h")
    assert seg_table(views, "m") == [("wh", 15, {"A": 0, "C": 6})]
    assert views.operands["A"].broadcast == ("h", "w")


def test_order_comes_from_the_operand_that_merges():
    # B's batch letters are written "yx" but x is outer in A and C; B is broadcast on both, so A's (or C's)
    # order is the one that merges everything into one segment.
    sizes = {"x": 2, "y": 3, "m": 4, "n": 5, "k": 6}
    views = views_of({"name": "t", "contraction": "xymk,yxkn->xymn", "sizes": sizes,
                      "operands": {"B": {"strides": [0, 0, 5, 1]}}})
    batch = views.roles["batch"]
    assert batch.letters == ("x", "y")
    assert seg_table(views, "batch") == [("xy", 6, {"A": 24, "B": 0, "C": 20})]
    assert views.operands["B"].broadcast == ("y", "x")
    assert views.operands["A"].broadcast == () and views.operands["C"].broadcast == ()


def test_transposed_gemm_unit_roles():
    views = views_of({"name": "t", "gemm": {"m": 64, "n": 32, "k": 128},
                      "operands": {"A": {"layout": "col"}, "B": {"layout": "col"}, "C": {"layout": "col"}}})
    assert views.operands["A"].unit_role == "m"
    assert views.operands["B"].unit_role == "k"
    assert views.operands["C"].unit_role == "m"
    views = views_of({"name": "t", "gemm": {"m": 64, "n": 32, "k": 128}})
    assert [views.operands[x].unit_role for x in "ABC"] == ["k", "n", "n"]


def test_dense_batched_gemm_one_segment_per_role():
    views = views_of({"name": "t", "gemm": {"batch": 3, "m": 8, "n": 16, "k": 32}})
    for role in ROLES:
        assert len(views.roles[role].segments) == 1
    assert seg_table(views, "batch") == [("b", 3, {"A": 256, "B": 512, "C": 128})]


def test_broadcast_batch_on_b():
    views = analyse(load_spec(SPECS_DIR / "batched_broadcast.yaml"))
    assert seg_table(views, "batch") == [("b", 8, {"A": 64 * 512, "B": 0, "C": 64 * 256})]
    b = views.operands["B"]
    assert b.broadcast == ("b",)
    assert b.span == 512 * 256  # one shared weight matrix
    assert b.roles == ("batch", "n", "k") and b.unit_role == "n"
    assert views.operands["A"].broadcast == () and views.operands["C"].broadcast == ()


def test_broadcast_on_size_one_letter_is_not_reported():
    views = views_of({"name": "t", "gemm": {"batch": 1, "m": 8, "n": 16, "k": 32},
                      "operands": {"B": {"strides": [0, 16, 1]}}})
    assert views.operands["B"].broadcast == ()
    assert views.roles["batch"].segments == () and views.batch == 1


def test_size_one_letters_dropped():
    # h has size 1 and strange strides; n and w must still merge around it.
    sizes = {"n": 3, "h": 1, "w": 5, "c": 8, "k": 16}
    views = views_of({"name": "s", "contraction": "nhwc,kc->nhwk", "sizes": sizes,
                      "operands": {"A": {"strides": [40, 12345, 8, 1]}, "C": {"strides": [80, 0, 16, 1]}}})
    m = views.roles["m"]
    assert m.letters == ("n", "w")
    assert seg_table(views, "m") == [("nw", 15, {"A": 8, "C": 16})]
    assert views.operands["A"].span == 2 * 40 + 4 * 8 + 7 + 1  # h never moves the address


def test_absent_roles():
    views = views_of({"name": "s", "gemm": {"m": 1, "n": 128, "k": 4096}})
    assert views.roles["m"].size == 1 and views.roles["m"].segments == () and views.roles["m"].inner() is None
    assert views.operands["A"].roles == ("k",)
    assert views.operands["C"].roles == ("n",)


def test_merge_segments_directly():
    sizes = {"a": 2, "b": 3, "c": 4}
    strides = {"A": {"a": 12, "b": 4, "c": 1}, "B": {"a": 24, "b": 8, "c": 2}}
    segs = merge_segments(["a", "b", "c"], sizes, strides)
    assert [(s.letters, s.size, s.stride("A"), s.stride("B")) for s in segs] == [(("a", "b", "c"), 24, 1, 2)]
    strides["B"]["a"] = 25  # breaks a -> b in B only
    segs = merge_segments(["a", "b", "c"], sizes, strides)
    assert [(s.letters, s.size) for s in segs] == [(("a",), 2), (("b", "c"), 12)]
    segs = merge_segments(["c", "b", "a"], sizes, strides)  # wrong order: nothing chains
    assert len(segs) == 3


# ------------------------------------------------------------------------------------------------
# vector widths and their limits


def _gemm(dtype="f16", a=None, b=None, c=None, m=64, n=64, k=64):
    return views_of({"name": "v", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
                     "operands": {"A": a or {}, "B": b or {}, "C": c or {}}})


@pytest.mark.parametrize("dtype,expect", [("f16", 8), ("bf16", 8), ("f32", 4)])
def test_full_vector_when_everything_aligned(dtype, expect):
    views = _gemm(dtype, a={"align": 16}, b={"align": 16}, c={"align": 16})
    for x in "ABC":
        f = views.operands[x]
        assert f.vector_elems == expect and f.vector_bytes == VECTOR_BYTES
        assert f.vector_limit == "16-byte vector limit"
        assert f.vector_elems_aligned == expect


def test_align_too_small_limits_vector_but_not_aligned_variant():
    f = _gemm(a={"align": 4}).operands["A"]
    assert f.vector_elems == 2
    assert f.vector_limit == "base pointer promised 4-byte aligned only (align:)"
    assert f.vector_elems_aligned == 8 and f.vector_limit_aligned == "16-byte vector limit"
    f = _gemm().operands["B"]  # default align = element size
    assert f.vector_elems == 1 and "2-byte aligned only" in f.vector_limit
    assert f.vector_elems_aligned == 8


@pytest.mark.parametrize("offset,vec,limit", [
    (4, 4, "offset 4 is not a multiple of 8"),
    (2, 2, "offset 2 is not a multiple of 4"),
    (3, 1, "offset 3 is not a multiple of 2"),
    (16, 8, "16-byte vector limit"),
])
def test_offset_limits_vector(offset, vec, limit):
    f = _gemm(a={"align": 16, "offset": offset}).operands["A"]
    assert (f.vector_elems, f.vector_limit) == (vec, limit)
    assert (f.vector_elems_aligned, f.vector_limit_aligned) == (vec, limit)  # alignment cannot fix an offset


def test_stride_not_multiple_limits_vector():
    f = _gemm(a={"align": 16, "strides": [100, 1]}, k=96).operands["A"]  # row pitch 100 elements
    assert f.unit_role == "k"
    assert (f.vector_elems, f.vector_limit) == (4, "stride 100 of m is not a multiple of 8")
    f = _gemm(a={"align": 16, "strides": [99, 1]}, k=96).operands["A"]
    assert (f.vector_elems, f.vector_limit) == (1, "stride 99 of m is not a multiple of 2")


def test_innermost_segment_size_limits_vector_when_role_has_several_segments():
    # NCHW conv, h*w = 42: the m role is (n[2], hw[42]); a vector of 4 would straddle two images.
    views = views_of({"name": "v", "contraction": "nchw,kc->nkhw",
                      "sizes": {"n": 2, "c": 64, "h": 7, "w": 6, "k": 32},
                      "operands": {"A": {"align": 16}}})
    assert [len(s.letters) for s in views.roles["m"].segments] == [1, 2]
    f = views.operands["A"]
    assert f.unit_role == "m"
    assert f.vector_elems == 2
    assert f.vector_limit == "innermost m segment (hw) has 42 elements, not a multiple of 4"


def test_single_segment_role_size_does_not_limit_vector():
    # Same conv with n = 1: one m segment of 42; tails inside one segment are the kernel's job.
    views = views_of({"name": "v", "contraction": "nchw,kc->nkhw",
                      "sizes": {"n": 1, "c": 64, "h": 7, "w": 6, "k": 32},
                      "operands": {"A": {"align": 16, "strides": [64 * 48, 48, 6, 1]}}})
    assert len(views.roles["m"].segments) == 1
    f = views.operands["A"]
    assert f.unit_role == "m" and f.vector_elems == 8


def test_no_unit_stride():
    f = _gemm(a={"strides": [128, 2], "align": 16}).operands["A"]
    assert f.unit_role is None
    assert (f.vector_elems, f.vector_limit) == (1, "no dim of this operand has stride 1")
    assert (f.vector_elems_aligned, f.vector_limit_aligned) == (1, "no dim of this operand has stride 1")


def test_unit_role_preference():
    # Both m and k of A have stride 1 (an overlapping, legal input view): inputs prefer k, and m's
    # stride 1 then blocks any vector.
    f = _gemm(a={"strides": [1, 1], "align": 16}).operands["A"]
    assert f.unit_role == "k" and f.vector_elems == 1
    assert f.vector_limit == "stride 1 of m is not a multiple of 2"


def test_vector_limit_uses_operand_dtype():
    views = _gemm("bf16", a={"align": 16}, c={"dtype": "f32", "align": 16})
    assert views.operands["A"].vector_elems == 8
    assert views.operands["C"].vector_elems == 4 and views.operands["C"].elem_bytes == 4


# ------------------------------------------------------------------------------------------------
# int64 indexing


def _wide(stride: int, offset: int = 0) -> ProblemViews:
    return views_of({"name": "w", "contraction": "ab,bc->ac", "sizes": {"a": 2, "b": 2, "c": 2},
                     "operands": {"A": {"strides": [stride, 1], "offset": offset}}})


def test_needs_int64_boundary():
    views = _wide(INT32_MAX - 2)  # span = (2^31 - 3) + 1 + 1 = 2^31 - 1
    assert views.operands["A"].span == INT32_MAX
    assert not views.needs_int64
    views = _wide(INT32_MAX - 2, offset=1)  # span 2^31
    assert views.operands["A"].span == INT32_MAX + 1
    assert views.needs_int64


def test_needs_int64_big_strides_small_sizes():
    views = views_of({"name": "w", "gemm": {"batch": 3, "m": 4, "n": 4, "k": 4},
                      "operands": {"C": {"strides": [2**31, 4, 1]}}})
    assert views.operands["C"].span > INT32_MAX and views.needs_int64
    assert not _wide(1 << 20).needs_int64


def test_needs_int64_from_role_size_alone():
    # K of 2^31 broadcast on both inputs: every span is tiny, but the role index passes int32.
    views = views_of({"name": "w", "contraction": "ab,bc->ac", "sizes": {"a": 2, "b": 2**31, "c": 2},
                      "operands": {"A": {"strides": [1, 0]}, "B": {"strides": [0, 1]}}})
    assert max(f.span for f in views.operands.values()) < 100
    assert views.k == 2**31 and views.needs_int64


# ------------------------------------------------------------------------------------------------
# properties over random specs


def _role_letters(spec: Spec, role: str) -> list[str]:
    return [x for x in spec.sizes if role_of(x, spec) == role]


def _letter_offset(spec: Spec, op: str, letters: tuple[str, ...], index: int) -> int:
    """Address (elements, without the operand offset) of flattened `index` over `letters` (outer -> inner),
    from the spec's per-letter strides."""
    off = 0
    for x in reversed(letters):
        off += (index % spec.sizes[x]) * letter_stride(spec, op, x)
        index //= spec.sizes[x]
    assert index == 0
    return off


def _segment_offset(views: ProblemViews, role: str, op: str, index: int) -> int:
    off = 0
    for seg in reversed(views.roles[role].segments):
        off += (index % seg.size) * seg.stride(op)
        index //= seg.size
    assert index == 0
    return off


def _spec_from_seed(seed: int) -> Spec:
    return parse_spec(random_spec(random.Random(seed), "p"), f"random_{seed}.yaml")


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


@PROPERTY
@given(seed=SEEDS)
def test_property_role_sizes(seed):
    spec = _spec_from_seed(seed)
    views = analyse(spec)
    for role in ROLES:
        rv = views.roles[role]
        letters = _role_letters(spec, role)
        expected = 1
        for x in letters:
            expected *= spec.sizes[x]
        seg_product = 1
        for seg in rv.segments:
            seg_product *= seg.size
            assert seg.size > 1
            assert {name for name, _ in seg.strides} == set(ROLE_HOLDERS[role])
        assert rv.size == expected == seg_product
        # Letters: every letter of size > 1 exactly once, in segment order.
        assert sorted(rv.letters) == sorted(x for x in letters if spec.sizes[x] > 1)
        assert rv.letters == tuple(x for seg in rv.segments for x in seg.letters)
        for seg in rv.segments:
            size = 1
            for x in seg.letters:
                size *= spec.sizes[x]
            assert seg.size == size
    assert views.flops == 2 * views.batch * views.m * views.n * views.k
    for name, facts in views.operands.items():
        op = {o.name: o for o in spec.operands}[name]
        assert facts.span == op.span
        assert facts.roles == tuple(r for r in ROLES if name in ROLE_HOLDERS[r] and views.roles[r].size > 1)
    biggest = max([f.span for f in views.operands.values()] + [r.size for r in views.roles.values()])
    assert views.needs_int64 == (biggest > INT32_MAX)


@PROPERTY
@given(seed=SEEDS, data=st.data())
def test_property_segments_are_address_exact(seed, data):
    spec = _spec_from_seed(seed)
    views = analyse(spec)
    for role in ROLES:
        rv = views.roles[role]
        if rv.size == 1:
            continue
        picks = [0, rv.size - 1] + data.draw(st.lists(st.integers(0, rv.size - 1), min_size=4, max_size=4))
        for op in ROLE_HOLDERS[role]:
            for i in picks:
                assert _segment_offset(views, role, op, i) == _letter_offset(spec, op, rv.letters, i), \
                    (role, op, i)


def _check_vector_runs(spec: Spec, views: ProblemViews, name: str, vec: int, data) -> int:
    """Every vec-aligned run of vec indices of the unit role is vec consecutive, vec-aligned elements.
    Returns how many runs were checked."""
    facts = views.operands[name]
    op = {o.name: o for o in spec.operands}[name]
    unit = facts.unit_role
    assert unit is not None
    assert views.roles[unit].inner().stride(name) == 1
    assert vec & (vec - 1) == 0 and vec * facts.elem_bytes <= VECTOR_BYTES
    size = views.roles[unit].size
    if size < vec:
        return 0  # no whole vector fits in the role
    checked = 0
    for _ in range(3):
        base = op.offset
        for r in facts.roles:
            if r != unit:
                rv = views.roles[r]
                base += _letter_offset(spec, name, rv.letters, data.draw(st.integers(0, rv.size - 1)))
        start = vec * data.draw(st.integers(0, size // vec - 1))
        letters = views.roles[unit].letters
        addrs = [base + _letter_offset(spec, name, letters, start + t) for t in range(vec)]
        assert addrs == list(range(addrs[0], addrs[0] + vec)), (name, unit, start, addrs)
        assert addrs[0] % vec == 0, (name, unit, start, addrs[0])
        checked += 1
    return checked


@PROPERTY
@given(seed=SEEDS, data=st.data())
def test_property_vector_width_is_sound(seed, data):
    spec = _spec_from_seed(seed)
    views = analyse(spec)
    for name, facts in views.operands.items():
        assert facts.vector_elems <= facts.vector_elems_aligned
        assert facts.vector_limit and facts.vector_limit_aligned
        if facts.vector_elems > 1:
            assert facts.align % (facts.vector_elems * facts.elem_bytes) == 0
            _check_vector_runs(spec, views, name, facts.vector_elems, data)
        if facts.vector_elems_aligned > 1:  # with a 16-byte aligned base pointer
            _check_vector_runs(spec, views, name, facts.vector_elems_aligned, data)


def test_random_specs_exercise_the_properties():
    """The property tests above are not vacuous: random specs do have merges, vectors and broadcasts."""
    merged = vectors = vectors_aligned = broadcast = multi_segment = 0
    for seed in range(300):
        spec = _spec_from_seed(seed)
        views = analyse(spec)
        merged += any(len(s.letters) > 1 for r in views.roles.values() for s in r.segments)
        multi_segment += any(len(r.segments) > 1 for r in views.roles.values())
        vectors += any(f.vector_elems > 1 and views.roles[f.unit_role].size >= f.vector_elems
                       for f in views.operands.values())
        vectors_aligned += any(f.vector_elems_aligned > 1 for f in views.operands.values())
        broadcast += any(f.broadcast for f in views.operands.values())
        assert all(DTYPE_BYTES[f.dtype] == f.elem_bytes for f in views.operands.values())
    counts = (merged, multi_segment, vectors, vectors_aligned, broadcast)
    assert merged >= 10 and multi_segment >= 30 and vectors >= 30, counts
    assert vectors_aligned >= 60 and broadcast >= 30, counts


# Random specs rarely merge letters (their memory orders are shuffled per operand), so a second generator
# builds views where each role's letters are stored together and in the same order in every operand that
# holds the role (with padding between roles, stride-0 broadcast of a whole role on an input, offsets):
# every role must then collapse to exactly one segment, and the address/vector properties must still hold.


@st.composite
def grouped_specs(draw) -> dict:
    pool = iter(draw(st.permutations("abcdefghijklmnopqrstuvwxyz"))[:8])
    counts = {"batch": draw(st.integers(0, 2)), "m": draw(st.integers(0, 2)), "n": draw(st.integers(0, 2)),
              "k": draw(st.integers(1, 2))}
    if counts["m"] + counts["n"] == 0:
        counts["m"] = 1
    groups = {r: [next(pool) for _ in range(c)] for r, c in counts.items()}
    sizes = {x: draw(st.integers(1, 6)) for g in groups.values() for x in g}
    dtype = draw(st.sampled_from(["f16", "bf16", "f32"]))
    letters, operands = {}, {}
    for op in "ABC":
        roles = [r for r in ROLES if op in ROLE_HOLDERS[r] and groups[r]]
        roles = draw(st.permutations(roles))  # roles in any memory order; letters in a role keep theirs
        strides, step = {}, draw(st.sampled_from([1, 1, 1, 2]))
        for r in reversed(roles):  # innermost role first
            if op != "C" and draw(st.integers(0, 5)) == 0:
                strides.update({x: 0 for x in groups[r]})  # broadcast the whole role
                continue
            for x in reversed(groups[r]):
                strides[x] = step
                step *= sizes[x]
            step += draw(st.sampled_from([0, 0, 0, 1, 3, 8]))  # padding between roles
        # The letter order written in the contraction is any permutation: only memory order matters.
        letters[op] = "".join(draw(st.permutations([x for r in roles for x in groups[r]])))
        elem = 4 if dtype == "f32" else 2
        operands[op] = {"strides": [strides[x] for x in letters[op]],
                        "offset": draw(st.sampled_from([0, 0, 1, 2, 4, 8, 12])),
                        "align": draw(st.sampled_from([a for a in (2, 4, 8, 16, 32) if a >= elem]))}
    contraction = f"{letters['A']},{letters['B']}->{letters['C']}"
    return {"name": "grouped", "dtype": dtype, "contraction": contraction, "sizes": sizes,
            "operands": operands}


@PROPERTY
@given(raw=grouped_specs(), data=st.data())
def test_property_grouped_views_merge_to_one_segment_per_role(raw, data):
    spec = parse_spec(raw, "grouped.yaml")
    views = analyse(spec)
    for role in ROLES:
        rv = views.roles[role]
        assert len(rv.segments) == (1 if rv.size > 1 else 0), (role, rv)
        if rv.size == 1:
            continue
        for op in ROLE_HOLDERS[role]:
            picks = data.draw(st.lists(st.integers(0, rv.size - 1), min_size=3, max_size=3))
            for i in [0, rv.size - 1] + picks:
                assert _segment_offset(views, role, op, i) == _letter_offset(spec, op, rv.letters, i)
    for name, facts in views.operands.items():
        if facts.vector_elems > 1:
            assert facts.align % (facts.vector_elems * facts.elem_bytes) == 0
            _check_vector_runs(spec, views, name, facts.vector_elems, data)
        if facts.vector_elems_aligned > 1:
            _check_vector_runs(spec, views, name, facts.vector_elems_aligned, data)


def test_a_grid_past_a_32_bit_index_names_the_size_keys_and_the_fix():
    from dgemm_cli.arch import ARCHES
    from dgemm_cli.errors import PlanError
    from dgemm_cli.plan import make_plan

    spec = parse_spec({"name": "huge", "dtype": "f16", "gemm": {"m": 2**24, "n": 2**24, "k": 16}})
    with pytest.raises(PlanError) as err:
        make_plan(analyse(spec), ARCHES["sm_80"])
    text = str(err.value)
    assert "gemm.m, gemm.n:" in text and "exceed a 32-bit launch index" in text and "Fix: split" in text
