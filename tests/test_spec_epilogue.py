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
    ([{"activation": "Reluu"}], "epilogue[0].activation", "did you mean 'relu'"),
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
    ([{"bias": {"letters": "n", "layout": "col"}}], "epilogue[0].bias.layout", "`col` swaps the last two letters"),
    ([{"bias": {"letters": "n", "layout": "row", "strides": [1]}}], "epilogue[0].bias.strides", "both `layout`"),
    ([{"scale": {"letters": "n", "lettres": "m"}}], "epilogue[0].scale.lettres", "did you mean 'letters'"),
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
    ({"residual": {"layout": "col"}}, "epilogue[0].residual.layout"),  # m contiguous: n's stride is m's size
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


def test_gelu_offers_both_forms_and_says_what_each_is():
    with pytest.raises(SpecError) as err:
        _spec([{"activation": "GeLU"}])
    fix = err.value.fix
    assert "'gelu_tanh' (GeLU's tanh approximation" in fix and "'gelu_erf' (the exact GeLU with erf" in fix
    assert "relu'" not in fix.split("(valid:")[0]


def test_activation_names_in_other_case_are_read_as_ours_with_a_note():
    spec = _spec([{"activation": "SiLU"}])
    assert spec.epilogue[0].activation == "silu" and spec.notes == ("epilogue[0].activation 'SiLU' read as silu",)


@pytest.mark.parametrize("kind", ["bias", "scale"])
def test_a_view_with_no_letters_is_one_scalar(kind):
    spec = _spec([{kind: {"letters": ""}}])
    view = spec.epilogue[0].view
    assert (view.letters, view.sizes, view.strides, view.span) == ("", (), (), 1)
    assert spec == parse_spec(spec.to_dict())
    assert analyse(spec).operands[kind].roles == ("m", "n")  # held with stride 0, like a broadcast letter


def test_a_residual_takes_a_layout_in_its_letter_order():
    col = _spec([{"residual": {"layout": "col"}}]).epilogue[0].view
    assert (col.letters, col.strides) == ("mn", (1, 4))  # m contiguous, like an operand's `layout: col`
    by_letters = _spec([{"residual": {"letters": "nm"}}]).epilogue[0].view
    # The same memory written the other way: letters in memory order.
    assert [by_letters.stride_of(x) for x in "mn"] == [col.stride_of(x) for x in "mn"] == [1, 4]
    bias = _spec([{"bias": {"letters": "nm", "layout": "col"}}]).epilogue[0].view
    assert bias.strides == (1, 8)


def test_epilogue_layouts_work_in_a_contraction_spec_too():
    doc = {"name": "c", "dtype": "f16", "contraction": "mk,kn->mn", "sizes": {"m": 4, "n": 8, "k": 16},
           "epilogue": [{"residual": {"layout": "col"}}]}
    assert parse_spec(doc).epilogue[0].view.strides == (1, 4)
    doc["operands"] = {"A": {"layout": "col"}}
    with pytest.raises(SpecError) as err:  # an operand's letters are its order there: strides say the rest
        parse_spec(doc)
    assert err.value.key == "operands.A.layout"


def test_d_and_the_epilogue_views_default_to_c_s_dtype():
    spec = _spec([{"bias": {"letters": "n"}}, {"residual": {"dtype": "f32"}}], C={"dtype": "f32"}, D={})
    assert (spec.A.dtype, spec.C.dtype, spec.D.dtype) == ("bf16", "f32", "f32")
    assert [st.view.dtype for st in spec.epilogue] == ["f32", "f32"]
    assert parse_spec({"name": "d", "gemm": {"m": 4, "n": 8, "k": 16}}).C.dtype == "f16"  # no `dtype:`: f16


def _code(text: str) -> list[str]:
    """A source's lines without its comments and step labels (they name the view's letters)."""
    return [line for line in text.splitlines() if not line.lstrip().startswith("//") and "DG_STEP_" not in line]


@pytest.mark.parametrize("m", [1, 8, 256])
def test_scalar_views_and_a_col_residual_render_in_every_family_that_takes_them(m):
    """A scalar bias is a bias broadcast over every letter: each family renders it as it renders a stride-0 bias."""
    from dgemm_cli.baseline import plan_baseline
    from dgemm_cli.families import FAMILIES
    from dgemm_cli.plan import family_gates
    from dgemm_cli.render import render_sources

    arch = get_arch("sm_90a")

    def render(bias, family):
        spec = parse_spec({"name": "s", "dtype": "bf16", "gemm": {"m": m, "n": 4096, "k": 4096},
                           "operands": {"B": {"layout": "col"}},
                           "epilogue": [{"bias": bias}, {"scale": {"letters": ""}}, {"residual": {"layout": "col"}}]})
        views = analyse(spec)
        if family_gates(views, arch)[family]:
            return None
        return render_sources(spec, views, make_plan(views, arch, family), plan_baseline(views), arch)

    rendered = 0
    for family in FAMILIES:
        scalar, broadcast = render({"letters": ""}, family), render({"letters": "n", "strides": [0]}, family)
        if scalar is None:
            continue
        assert _code(scalar["s.cu"]) == _code(broadcast["s.cu"]), family
        assert "bias     bf16, read: [(scalar)]" in scalar["s.h"]
        rendered += 1
    assert rendered >= 2
