"""The `epilogue:` list and the output view D (issue 8's spec surface): parsing, every refusal, the
round trip, and the plan's refusal until a kernel family renders them."""

from __future__ import annotations

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import SpecError
from dgemm_cli.plan import make_plan
from dgemm_cli.spec import ACTIVATIONS, load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO


def _spec(epilogue=None, **operands):
    doc = {"name": "lin", "dtype": "bf16", "gemm": {"m": 4, "n": 8, "k": 16},
           "operands": {"B": {"layout": "col"}, **operands}}
    if epilogue is not None:
        doc["epilogue"] = epilogue
    return parse_spec(doc)


def test_steps_parse_in_order_with_their_views():
    s = _spec([{"bias": {"letters": "n", "dtype": "f32"}}, {"scale": {"letters": "m", "strides": [0]}},
               {"activation": "silu"}, {"clamp": [-2, 3.5]}, {"residual": {"letters": "nm"}}])
    assert [st.kind for st in s.epilogue] == ["bias", "scale", "activation", "clamp", "residual"]
    bias, scale, act, clamp, res = s.epilogue
    assert (bias.view.letters, bias.view.sizes, bias.view.strides, bias.view.dtype) == ("n", (8,), (1,), "f32")
    assert scale.view.strides == (0,)  # broadcast is allowed
    assert act.activation == "silu" and clamp.clamp == (-2.0, 3.5)
    assert res.view.letters == "nm" and res.view.strides == (4, 1) and res.view.dtype == "bf16"  # C's dtype


def test_round_trip_and_a_spec_without_epilogue_normalises_as_before():
    s = _spec([{"bias": {"letters": "n"}}, {"activation": "gelu_erf"}], D={"dtype": "f32"})
    assert parse_spec(s.to_dict()) == s and s.D.dtype == "f32" and s.D.letters == "mn"
    plain = _spec()
    assert "epilogue" not in plain.to_dict() and "D" not in plain.to_dict()["operands"]


@pytest.mark.parametrize("epilogue, key, words", [
    ([{"activation": "gelu"}], "epilogue[0].activation", "unsupported activation 'gelu'"),
    ([{"activation": "Relu"}], "epilogue[0].activation", "did you mean 'relu'"),
    ([{"bias": {"letters": "k"}}], "epilogue[0].bias.letters", "not one of C's"),
    ([{"bias": {}}], "epilogue[0].bias.letters", "missing"),
    ([{"bias": {"letters": "nn"}}], "epilogue[0].bias.letters", "appears twice"),
    ([{"residual": {"letters": "m"}}], "epilogue[0].residual.letters", "a residual has C's letters"),
    ([{"clamp": [1.0, -1.0]}], "epilogue[0].clamp", "lo 1.0 > hi -1.0"),
    ([{"clamp": [1.0]}], "epilogue[0].clamp", "expected [lo, hi]"),
    ([{"biass": {"letters": "n"}}], "epilogue[0].biass", "did you mean 'bias'"),
    (["relu"], "epilogue[0]", "write `{activation: relu}`"),
    ([{"bias": {"letters": "n"}, "activation": "relu"}], "epilogue[0]", "one key"),
    ({"bias": {"letters": "n"}}, "epilogue", "expected a list"),
    ([{"bias": {"letters": "n", "strides": [1, 1]}}], "epilogue[0].bias.strides", "has 2 entries"),
    ([{"bias": {"letters": "n", "layout": "row"}}], "epilogue[0].bias.layout", "unknown key"),
])
def test_every_refusal_names_the_key(epilogue, key, words):
    with pytest.raises(SpecError) as err:
        _spec(epilogue)
    assert err.value.key == key and words in str(err.value)


def test_output_view_d_must_not_alias():
    with pytest.raises(SpecError) as err:
        _spec(D={"strides": [0, 1]})
    assert err.value.key == "operands.D.strides"


def test_every_activation_is_accepted():
    for act in ACTIVATIONS:
        assert _spec([{"activation": act}]).epilogue[0].activation == act


def test_the_plan_takes_epilogues_and_an_output_view():
    for spec in (_spec([{"activation": "relu"}]), _spec(D={})):
        assert make_plan(analyse(spec), get_arch("sm_90a")).kernels


def test_a_second_view_step_of_one_kind_is_refused():
    with pytest.raises(SpecError) as err:
        _spec([{"scale": {"letters": "m"}}, {"scale": {"letters": "n"}}])
    assert err.value.key == "epilogue[1].scale" and "the first is epilogue[0]" in str(err.value)


def test_extra_operands_come_in_the_c_api_order():
    s = _spec([{"residual": {}}, {"scale": {"letters": "m"}}, {"bias": {"letters": "n"}}], D={})
    assert [op.name for op in s.extra_operands] == ["D", "bias", "scale", "residual"]
    plain = _spec()
    assert s.output is s.D and plain.output is plain.C


@pytest.mark.parametrize("view, key", [
    ({"residual": {"letters": "nm"}}, "epilogue[0].residual.strides"),  # m innermost: n's stride is m's size
    ({"bias": {"letters": "nm"}}, "epilogue[0].bias.strides"),
])
def test_epilogue_strides_must_not_depend_on_a_run_time_size(view, key):
    doc = {"name": "dyn", "dtype": "f16", "gemm": {"m": {"min": 1, "max": 64}, "n": 8, "k": 16},
           "operands": {"B": {"layout": "col"}}, "epilogue": [view]}
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.key == key and "depend on the run-time size" in str(err.value)


def test_a_run_time_output_view_d_is_checked_too():
    doc = {"name": "dyn", "dtype": "f16", "gemm": {"m": {"min": 1, "max": 64}, "n": 8, "k": 16},
           "operands": {"D": {"layout": "col"}}}
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.key == "operands.D.layout"


def test_d_and_the_epilogue_views_get_operand_facts_like_c():
    # Their contiguous role and widest vector, as for C: the store phases vectorize their loads from these.
    spec = load_spec(REPO / "specs" / "epilogue" / "residual_scale_clamp_d.yaml")
    ops = analyse(spec).operands
    assert list(ops) == ["A", "B", "C", "D", "bias", "scale", "residual"]
    assert (ops["D"].unit_role, ops["bias"].unit_role, ops["scale"].unit_role) == ("m", "n", "m")
    assert ops["bias"].roles == ("m", "n")  # m with stride 0: a bias lacks it
    assert ops["bias"].broadcast == ()  # and no summed letters: an input would be broadcast over those
    assert (ops["bias"].vector_elems, ops["bias"].vector_elems_aligned) == (1, 4)  # f32: 4 in 16 bytes
    assert ops["residual"].vector_elems_aligned == 8  # row stride 520 keeps 16-byte rows
