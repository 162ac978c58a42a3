"""deepgemm.torch's view analysis (deepgemm/torch/problem.py) on plain shapes and strides: no torch, no compiler.
The property test checks the canonical contraction against the call it came from by numpy.einsum over the same
memory, each side indexing the buffers through its own strides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from deepgemm.api import spec_from_dict

# problem.py needs no torch, but it lives in deepgemm.torch, whose __init__ imports torch: without the extra these
# tests skip, as every deepgemm.torch test does.
pytest.importorskip("torch")

from deepgemm.torch.problem import (  # noqa: E402  (after the skip)
    ROW_RANGES,
    TensorArgumentError,
    TensorMeta,
    contraction_of,
    output_shape,
    parse_equation,
    row_range,
    spec_document,
)

_ADDRESSES = iter(range(1 << 30, 1 << 62, 1 << 30))  # a buffer of its own for each tensor, 16-byte aligned


def meta(shape, strides=None, dtype="f32", address=None):
    if address is None:
        address = next(_ADDRESSES)
    if strides is None:
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    return TensorMeta(tuple(shape), tuple(strides), dtype, address)


def dense_out(eq, a, b, dtype="f32"):
    return meta(output_shape(eq, a, b), dtype=dtype)


# ------------------------------------------------------------------------------------------------- equations


def test_ellipsis_expands_right_aligned_and_the_output_keeps_it():
    eq = parse_equation("...k,nk->...n", 3, 2)
    assert eq.a == ("…1", "…0", "k") and eq.b == ("n", "k") and eq.out == ("…1", "…0", "n")


def test_ellipsis_of_different_widths_broadcasts_from_the_right():
    eq = parse_equation("...mk,...kn->...mn", 4, 3)
    assert eq.a[:2] == ("…1", "…0") and eq.b[:1] == ("…0",) and eq.out[:2] == ("…1", "…0")


def test_implicit_output_is_the_ellipsis_then_the_letters_used_once_in_ascii_order():
    assert parse_equation("kB,kA", 2, 2).out == ("A", "B")
    assert parse_equation("...ij,jk", 3, 2).out == ("…0", "i", "k")


def test_an_explicit_output_without_the_ellipsis_sums_its_dims():
    assert parse_equation("...n,...k->nk", 3, 3).out == ("n", "k")


@pytest.mark.parametrize("equation, ndims, words", [
    ("ab,bc,cd->ad", (2, 2), "3 inputs"),
    ("ab,b1->a", (2, 2), "'1' is neither"),
    ("abc,bc->a", (2, 2), "names 3 dims but a has 2"),
    ("ab,bc->aa", (2, 2), "twice in the output"),
    ("ab,bc->ad", (2, 2), "'d' is in no input"),
    ("ab,bc->a->c", (2, 2), "two arrows"),
    ("...abc,c->a", (2, 1), "names 3 dims"),
])
def test_equations_torch_refuses_are_refused_with_the_fix(equation, ndims, words):
    with pytest.raises(TensorArgumentError, match=words) as err:
        parse_equation(equation, *ndims)
    assert "Fix:" in str(err.value)


def test_sizes_broadcast_one_against_n_and_refuse_a_mismatch():
    eq = parse_equation("bmk,bkn->bmn", 3, 3)
    assert output_shape(eq, (1, 4, 8), (5, 8, 3)) == (5, 4, 3)
    with pytest.raises(TensorArgumentError, match="size 2 here and 5"):
        output_shape(eq, (5, 4, 8), (2, 8, 3))


# --------------------------------------------------------------------------------------------- canonical form


def test_a_linear_over_batch_and_tokens_is_one_gemm_with_one_row_letter():
    eq = parse_equation("...k,nk->...n", 3, 2)
    a, b = meta((4, 7, 64)), meta((128, 64))
    c = contraction_of(eq, a, b, dense_out(eq, a, b), (("bias", meta((128,))),))
    assert c.equation == "ab,cb->ac"
    assert dict(c.sizes) == {"a": 28, "b": 64, "c": 128}
    assert c.a.strides == (64, 1) and c.c.strides == (128, 1)
    assert c.row_letters == "a"
    assert c.epilogue[0].view.letters == "c"


def test_rows_that_do_not_merge_stay_two_letters():
    eq = parse_equation("...k,nk->...n", 3, 2)
    a = meta((4, 7, 64), (1024, 64, 1))  # a padded batch: 7 rows of 64 in a pitch of 1024
    b = meta((128, 64))
    c = contraction_of(eq, a, b, dense_out(eq, a, b))
    assert c.equation == "abc,dc->abd" and c.row_letters == "ab"


def test_size_one_dims_are_dropped_whatever_their_stride():
    eq = parse_equation("bmk,bkn->bmn", 3, 3)
    a = meta((1, 5, 8), (12345, 8, 1))
    b = meta((1, 8, 3), (7, 3, 1))
    c = contraction_of(eq, a, b, dense_out(eq, a, b))
    assert c.equation == "ab,bc->ac" and c.a.strides == (8, 1)


def test_a_broadcast_input_dim_takes_stride_zero():
    eq = parse_equation("bmk,bkn->bmn", 3, 3)
    a = meta((1, 5, 8))
    b = meta((6, 8, 3))
    c = contraction_of(eq, a, b, dense_out(eq, a, b))
    batch = c.c.letters[0]
    assert c.a.strides[c.a.letters.index(batch)] == 0 and c.size(batch) == 6


def test_a_diagonal_is_one_letter_with_the_summed_stride():
    eq = parse_equation("ii,i->i", 2, 1)
    a, b = meta((6, 6)), meta((6,))
    c = contraction_of(eq, a, b, dense_out(eq, a, b))
    assert c.a.strides == (7,)


def test_an_output_dim_with_stride_zero_is_refused():
    eq = parse_equation("mk,kn->mn", 2, 2)
    with pytest.raises(TensorArgumentError, match="alias"):
        contraction_of(eq, meta((4, 8)), meta((8, 3)), meta((4, 3), (0, 1)))


def test_an_out_of_the_wrong_shape_is_refused():
    eq = parse_equation("mk,kn->mn", 2, 2)
    with pytest.raises(TensorArgumentError, match=r"shape \[3, 4\], but the result is \[4, 3\]"):
        contraction_of(eq, meta((4, 8)), meta((8, 3)), meta((3, 4)))


def test_an_epilogue_tensor_that_does_not_broadcast_is_refused():
    eq = parse_equation("mk,kn->mn", 2, 2)
    with pytest.raises(TensorArgumentError, match="does not broadcast"):
        contraction_of(eq, meta((4, 8)), meta((8, 3)), meta((4, 3)), (("bias", meta((5,))),))


def test_a_per_row_scale_broadcasts_over_the_columns():
    eq = parse_equation("mk,kn->mn", 2, 2)
    c = contraction_of(eq, meta((4, 8)), meta((8, 3)), meta((4, 3)), (("scale", meta((4, 1))),))
    assert c.epilogue[0].view.letters == c.c.letters[0]


def test_a_product_of_size_one_tensors_keeps_one_dim():
    eq = parse_equation("mk,kn->mn", 2, 2)
    c = contraction_of(eq, meta((1, 1)), meta((1, 1)), meta((1, 1)))
    assert c.equation == "a,a->a" and c.sizes == (("a", 1),)


@pytest.mark.parametrize("address, dtype, align", [(4096, "bf16", 16), (4098, "bf16", 2), (4100, "f32", 4),
                                                   (4104, "f16", 8), (4097, "e4m3", 1)])
def test_alignment_is_the_pointers_up_to_16_bytes(address, dtype, align):
    assert TensorMeta((1,), (1,), dtype, address).align == align


def test_row_ranges_cover_every_size_to_their_end_without_overlap():
    assert ROW_RANGES[0][0] == 1
    for (_, hi), (lo, _) in zip(ROW_RANGES, ROW_RANGES[1:]):
        assert lo == hi + 1
    assert row_range(1) == (1, 64) and row_range(64) == (1, 64) and row_range(65) == (65, 512)
    assert row_range(ROW_RANGES[-1][1] + 1) is None


@pytest.mark.parametrize("arch", ["cpu", "sm_80", "sm_90a"])
def test_the_document_is_a_valid_spec_with_a_run_time_row_range(arch):
    eq = parse_equation("...k,nk->...n", 3, 2)
    a, b = meta((4, 7, 64), dtype="bf16"), meta((128, 64), dtype="bf16")
    c = contraction_of(eq, a, b, dense_out(eq, a, b, "bf16"), (("bias", meta((128,), dtype="bf16")),
                                                             ("activation", "silu")))
    spec = spec_from_dict({"name": "t", **spec_document(c, arch, rows=(1, 64))})
    assert spec.run_time_letter == ("a", 1, 64)
    assert spec_from_dict({"name": "t", **spec_document(c, arch, reads_c=True)}).beta == 1.0


# ------------------------------------------------------------------------------- the property: same products

LETTERS = "ijklmn"


@st.composite
def calls(draw):
    """A random two-input einsum over random views: permuted, sliced with steps, broadcast, size-1 dims, a shared
    ellipsis; each operand a view into its own buffer."""
    sizes = {x: draw(st.sampled_from([1, 2, 3, 4])) for x in LETTERS}
    letters = list(LETTERS[:draw(st.integers(2, 6))])
    a = draw(st.lists(st.sampled_from(letters), min_size=1, max_size=4, unique=True))
    b = draw(st.lists(st.sampled_from(letters), min_size=1, max_size=4, unique=True))
    used = list(dict.fromkeys(a + b))
    out = [x for x in used if draw(st.booleans())]
    out = draw(st.permutations(out))
    views = []
    seen: dict[str, int] = {}
    for term in (a, b):
        shape = [1 if draw(st.integers(0, 5)) == 0 else sizes[x] for x in term]  # sometimes broadcast
        for x, n in zip(term, shape):
            seen[x] = max(seen.get(x, 1), n)
        views.append(_random_view(draw, shape))
    out_shape = [seen[x] for x in out]
    views.append(_random_view(draw, out_shape, broadcast=False))
    return f"{''.join(a)},{''.join(b)}->{''.join(out)}", views


def _random_view(draw, shape, broadcast=True):
    """(shape, element strides, buffer size): a permuted dense layout with padding, or stride 0 on some dims."""
    order = draw(st.permutations(range(len(shape))))
    strides = [0] * len(shape)
    step = 1
    for i in reversed(order):
        strides[i] = step
        step *= shape[i] + draw(st.integers(0, 2))
    if broadcast:
        strides = [0 if draw(st.integers(0, 6)) == 0 else s for s in strides]
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    return tuple(shape), tuple(strides), span


@settings(max_examples=300, deadline=None)
@given(calls())
def test_the_canonical_contraction_computes_the_same_product_over_the_same_memory(call):
    equation, ((sa, ta, na), (sb, tb, nb), (so, to, no)) = call
    rng = np.random.default_rng(0)
    bufs = [rng.standard_normal(n) for n in (na, nb)]
    eq = parse_equation(equation, len(sa), len(sb))
    c = contraction_of(eq, TensorMeta(sa, ta, "f32", 0), TensorMeta(sb, tb, "f32", 1 << 30),
                       TensorMeta(so, to, "f32", 2 << 30))
    want = np.einsum(equation, *(as_strided(buf, s, [x * 8 for x in t]) for buf, s, t in
                                 ((bufs[0], sa, ta), (bufs[1], sb, tb))))
    sizes = dict(c.sizes)
    views = [as_strided(buf, [sizes[x] for x in v.letters], [x * 8 for x in v.strides])
             for buf, v in ((bufs[0], c.a), (bufs[1], c.b))]
    got_out = np.full(no, np.nan)
    as_strided(got_out, [sizes[x] for x in c.c.letters], [x * 8 for x in c.c.strides])[...] = np.einsum(
        c.equation, *views)
    np.testing.assert_allclose(as_strided(got_out, so, [x * 8 for x in to]), want, rtol=1e-12, atol=1e-12)


def test_an_out_that_overlaps_an_input_is_refused():
    eq = parse_equation("mk,kn->mn", 2, 2)
    a = meta((4, 4), address=4096)
    with pytest.raises(TensorArgumentError, match="out overlaps a"):
        contraction_of(eq, a, meta((4, 4), address=1 << 20), meta((4, 4), address=4096 + 4 * 15))
    contraction_of(eq, a, meta((4, 4), address=1 << 20), meta((4, 4), address=4096 + 4 * 16))  # just past a
