"""Integer weights (docs/design/weight-only.md): the spec's packed B views, the weights' scales and zero points, the
errors users can cause, and the one line planning gives while no family runs them (pure)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import PlanError, SpecError
from dgemm_cli.plan import family_gates, make_plan
from dgemm_cli.spec import parse_spec
from dgemm_cli.spec.model import dg_words
from dgemm_cli.views import analyse

GPTQ = {"name": "w4", "dtype": "f16", "gemm": {"m": 16, "n": 4096, "k": 4000},
        "operands": {"A": {"layout": "row"}, "B": {"dtype": "uint4", "packing": "gptq", "layout": "row"},
                     "C": {"layout": "row"}},
        "scales": {"B": {"block": {"k": 128}, "layout": "row"}},
        "zeros": {"B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}}}


def _spec(**changes) -> dict:
    spec = copy.deepcopy(GPTQ)
    for path, value in changes.items():
        *outer, last = path.split("__")
        node = spec
        for key in outer:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return spec


def _error(data: dict) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "w4.yaml")
    return str(info.value)


def test_gptq_weights_are_words_packed_along_k():
    spec = parse_spec(_spec(), "w4.yaml")
    b = spec.B
    assert (b.dtype, b.sizes, b.word_sizes, b.strides, b.elem_bytes) == ("uint4", (4000, 4096), (500, 4096),
                                                                         (4096, 1), 4)
    assert (b.packing.along, b.packing.order) == ("k", "linear")
    assert b.span == 499 * 4096 + 4095 + 1  # words
    assert spec.inputs == "weight-only"
    sc, = spec.scales
    assert (sc.operand, sc.blocks, sc.view.sizes, sc.view.dtype) == ("B", (("k", 128), ("n", 1)), (32, 4096), "f16")
    z, = spec.zeros
    assert (z.form, z.view.letters, z.view.sizes, z.view.word_sizes) == ("subtract", "kn", (32, 4096), (32, 512))
    assert (z.view.packing.along, z.view.packing.order) == ("n", "linear")  # GPTQ's qzeros pack along n


def test_awq_packs_along_n_in_its_order_and_dg_is_one_dense_run():
    awq = parse_spec(_spec(operands__B__packing="awq", zeros__B__packing="awq"), "w4.yaml")
    assert (awq.B.packing.along, awq.B.packing.order, awq.B.word_sizes) == ("n", "awq", (4000, 512))
    assert awq.zeros[0].view.packing.order == "awq"
    dg = parse_spec(_spec(operands__B={"dtype": "int4", "packing": "dg", "align": 16}, zeros=None), "w4.yaml")
    assert (dg.B.packing.order, dg.B.span) == ("dg", dg_words(4000, 4096))
    assert dg_words(4000, 4096) == 63 * 256 * 128  # K up to 64, N up to 16, 128 words a tile


def test_explicit_packing_and_byte_strides_count_words():
    spec = parse_spec(_spec(operands__B={"dtype": "int4", "packing": {"along": "k", "order": "linear"},
                                         "byte_strides": [4, 2000]}), "w4.yaml")  # column-major words: [n][k/8]
    assert spec.B.strides == (1, 500) and spec.B.word_sizes == (500, 4096)


@pytest.mark.parametrize("source", ["gptq", "awq", "dg", "int8"])
def test_the_normalised_spec_reads_back_equal(source):
    changes = {"gptq": {}, "awq": {"operands__B__packing": "awq", "zeros__B__packing": "awq"},
               "dg": {"operands__B": {"dtype": "uint4", "packing": "dg"}},
               "int8": {"operands__B": {"dtype": "int8", "layout": "col"}, "zeros": None,
                        "scales__B": {"per": "channel", "dtype": "bf16"}}}[source]
    spec = parse_spec(_spec(**changes), "w4.yaml")
    assert parse_spec(spec.to_dict(), "again.yaml") == spec


@pytest.mark.parametrize(("changes", "key", "words"), [
    ({"operands__B__packing": None}, "operands.B.packing", "packed eight to a 32-bit word"),
    ({"operands__A__dtype": "uint4"}, "operands.A.dtype", "B and its zero points only"),
    ({"operands__A__dtype": "int8"}, "operands.A.dtype", "integer types are for the weights"),
    ({"dtype": "f32", "operands__C__dtype": "f32"}, "dtype", "dequantize to f16 or bf16"),
    ({"operands__B__packing": {"along": "q"}}, "operands.B.packing.along", "not a letter"),
    ({"operands__B__packing": {"along": "k", "order": "dg"}}, "operands.B.packing.order", "unsupported"),
    ({"operands__B": {"dtype": "uint4", "packing": "dg", "layout": "row"}}, "operands.B.layout", "no strides"),
    ({"operands__B__dtype": "int8"}, "operands.B.packing", "4-bit values"),
    ({"operands__B__layout": None, "operands__B__byte_strides": [6, 4]}, "operands.B.byte_strides[0]", "4-byte word"),
    ({"operands__C__dtype": "int8"}, "operands.C.dtype", "an input type only"),
    ({"scales": None}, "scales", "need their scales"),
    ({"scales__A": {"per": "tensor"}}, "scales.A", "carry no scales"),
    ({"scales__B__dtype": "e4m3"}, "scales.B.dtype", "scales are f16, bf16, f32"),
    ({"zeros__B__dtype": "int4"}, "zeros.B.dtype", "write `dtype: uint4`"),
    ({"zeros__B__dtype": None}, "zeros.B.dtype", "missing"),
    ({"zeros__B__form": "prescaled"}, "zeros.B.form", "a float"),
    ({"zeros__B__packing": None}, "zeros.B.packing", "missing"),
])
def test_errors_name_the_key_and_the_fix(changes, key, words):
    message = _error(_spec(**changes))
    assert f"w4.yaml: {key}:" in message and words in message and "Fix:" in message


def test_zeros_and_weights_need_integer_b():
    float_b = _spec(operands__B={"layout": "row"}, scales=None)
    assert "zero points go with integer weights" in _error(float_b)
    assert "scales go with e4m3 inputs or integer weights" in _error(_spec(operands__B={"layout": "row"}, zeros=None))


def test_prescaled_zeros_are_floats_and_a_run_time_m_is_taken():
    spec = parse_spec(_spec(zeros__B={"dtype": "f16", "form": "prescaled"}, gemm__m={"min": 1, "max": 64}),
                      "w4.yaml")
    assert spec.zeros[0].form == "prescaled" and spec.zeros[0].view.dtype == "f16" and spec.dynamic == {"m": (1, 64)}


def test_only_the_weight_only_families_take_integer_weights_and_the_others_say_so():
    spec = parse_spec(_spec(), "w4.yaml")
    for arch in ("sm_80", "sm_90a"):
        gated = family_gates(analyse(spec), get_arch(arch))
        assert gated["wq"] == [] and gated["wqtc"] == []  # GPTQ's words: both read them
        for name, reasons in gated.items():
            if name not in ("wq", "wqtc"):
                assert reasons, f"{name} takes integer weights on {arch}"
        assert make_plan(analyse(spec), get_arch(arch)).family in ("wq", "wqtc")
    with pytest.raises(PlanError) as info:  # the host runs none: the one reason names where they run
        make_plan(analyse(spec), get_arch("cpu"))
    assert "integer weights: no integer weights kernel in this family (wqtc and wq run integer weights on CUDA " \
        "targets)" in str(info.value)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 700), n=st.integers(1, 300), along_k=st.booleans(), col=st.booleans())
def test_a_packed_view_spans_exactly_its_words(k, n, along_k, col):
    """The span of a dense packed view is its word count: ceil(size / 8) words along the packed letter."""
    packing = {"along": "k" if along_k else "n", "order": "linear" if along_k else "awq"}
    data = _spec(gemm__k=k, gemm__n=n, operands__B={"dtype": "int4", "packing": packing,
                                                    "layout": "col" if col else "row"}, zeros=None)
    b = parse_spec(data, "w4.yaml").B
    words = (-(-k // 8) * n) if along_k else (k * -(-n // 8))
    assert b.span == words
    assert sorted(b.strides) == sorted([1, (b.word_sizes[1] if not col else b.word_sizes[0])])
