"""e4m3 inputs and their `scales:` (docs/design/fp8.md): the spec and its scale views, and the one message planning
gives when no family takes an e4m3 problem (pure). tests/test_family_fp8_hopper.py plans them."""

from __future__ import annotations

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import PlanError, SpecError
from dgemm_cli.explain import explain_text
from dgemm_cli.plan import make_plan
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

DEEPGEMM = {"A": {"block": {"k": 128}, "layout": "col"}, "B": {"block": {"n": 128, "k": 128}}}


def _spec(scales=DEEPGEMM, c=None, **top) -> dict:
    spec = {"name": "f8", "dtype": "e4m3", "gemm": {"m": 256, "n": 384, "k": 1000},
            "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": c or {"layout": "row", "dtype": "bf16"}}}
    if scales is not None:
        spec["scales"] = scales
    spec.update(top)
    return spec


def _error(data: dict) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "f8.yaml")
    return info.value


def test_deepgemm_block_scales_are_views_over_the_blocks():
    spec = parse_spec(_spec(), "f8.yaml")
    sa, sb = spec.scales
    assert (sa.operand, sa.blocks) == ("A", (("m", 1), ("k", 128)))
    assert (sa.view.letters, sa.view.sizes, sa.view.strides, sa.view.dtype) == ("mk", (256, 8), (1, 256), "f32")
    assert (sb.operand, sb.blocks) == ("B", (("k", 128), ("n", 128)))
    assert (sb.view.letters, sb.view.sizes, sb.view.strides) == ("kn", (8, 3), (3, 1))  # ceil(1000/128), ceil(384/128)


def test_the_modes_are_shorthands_for_blocks():
    spec = parse_spec(_spec({"A": {"per": "tensor"}, "B": {"per": "channel"}}), "f8.yaml")
    sa, sb = spec.scales
    assert sa.view.letters == "" and sa.view.sizes == () and sa.blocks == (("m", 256), ("k", 1000))
    assert sb.view.letters == "n" and sb.view.sizes == (384,) and sb.block("k") == 1000
    batched = _spec({"A": {"per": "channel"}, "B": {"block": {"k": "all", "n": 64}}})
    batched["gemm"]["batch"] = 3
    sa, sb = parse_spec(batched, "f8.yaml").scales
    assert sa.view.letters == "bm" and sb.view.letters == "bn" and sb.view.sizes == (3, 6)


def test_scales_round_trip_through_the_normalised_spec():
    spec = parse_spec(_spec(), "f8.yaml")
    again = parse_spec(spec.to_dict(), "again.yaml")
    assert again.scales == spec.scales
    assert spec.to_dict()["scales"]["A"]["block"] == {"m": 1, "k": 128}


def test_fp8_is_read_as_e4m3_with_a_note():
    spec = parse_spec(_spec(dtype="fp8"), "f8.yaml")
    assert spec.A.dtype == spec.B.dtype == "e4m3"
    assert any("read as e4m3" in n for n in spec.notes)


@pytest.mark.parametrize("data,key,problem", [
    (_spec(None), "scales", "missing: A and B are e4m3"),
    ({**_spec(), "dtype": "bf16"}, "scales", "scales go with e4m3 inputs"),
    (_spec({"A": {"block": {"k": 128}}}), "scales.B", "missing"),
    (_spec({**DEEPGEMM, "A": {"block": {"n": 128}}}), "scales.A.block.n", "A has no letter 'n'"),
    (_spec({**DEEPGEMM, "A": {"block": {"k": 96}}}), "scales.B.block.k", "neither block is a multiple"),
    (_spec({**DEEPGEMM, "A": {"per": "tensor", "block": {"k": 128}}}), "scales.A", "exactly one of"),
    (_spec({**DEEPGEMM, "A": {"per": "row"}}), "scales.A.per", "unsupported scale mode"),
    (_spec({**DEEPGEMM, "A": {"block": {"k": 0}}}), "scales.A.block.k", "less than 1"),
    (_spec({**DEEPGEMM, "A": {"block": {"k": 128}, "dtype": "bf16"}}), "scales.A.dtype", "scales are f32"),
    (_spec(c={"layout": "row"}), "dtype", "C is e4m3: an input type only"),
    (_spec(c={"layout": "row", "dtype": "fp8"}), "operands.C.dtype", "C is e4m3: an input type only"),
    (_spec(gemm={"m": {"min": 1, "max": 64}, "n": 384, "k": 1000}), "scales", "size given at run time"),
])
def test_errors_name_the_key_and_the_fix(data, key, problem):
    err = _error(data)
    assert err.key == key and problem in err.problem and err.fix, str(err)


def test_an_e4m3_spec_no_family_takes_fails_in_one_message_that_names_sm_89():
    """sm_86 has no FP8 tensor cores: both e4m3 families refuse it, each saying so, and nothing else runs e4m3."""
    views = analyse(parse_spec(_spec(gemm={"m": 256, "n": 384, "k": 1024}), "f8.yaml"))
    with pytest.raises(PlanError) as info:
        make_plan(views, get_arch("sm_86"))
    text = str(info.value)
    assert text.startswith("f8.yaml: no kernel family can run this problem (fp8_hopper: wgmma: sm_86 has no FP8 "
                           "tensor cores: e4m3 inputs need sm_89 or later")
    assert "fp8_cta: FP8 tensor cores: sm_86 has no FP8 tensor cores: e4m3 inputs need sm_89 or later" in text
    assert text.endswith("; no other family runs e4m3)")


def test_a_misaligned_e4m3_spec_plans_fp8_cta_and_says_why_fp8_hopper_lost():
    """A and B promise only 1-byte alignment: TMA needs 16, so fp8_hopper refuses and fp8_cta runs the views."""
    views = analyse(parse_spec(_spec(gemm={"m": 256, "n": 384, "k": 1024}), "f8.yaml"))
    assert make_plan(views, get_arch("sm_90a")).family == "fp8_cta"
    text = explain_text(parse_spec(_spec(gemm={"m": 256, "n": 384, "k": 1024}), "f8.yaml"), get_arch("sm_90a"))
    assert "fp8_hopper rejected: fp8_hopper: aligned A: " in text and "promise `align: 16`" in text


def test_explain_shows_the_scale_views():
    aligned = {"A": {"layout": "row", "align": 16}, "B": {"layout": "col", "align": 16},
               "C": {"layout": "row", "dtype": "bf16"}}
    text = explain_text(parse_spec(_spec(gemm={"m": 256, "n": 384, "k": 1024}, operands=aligned), "f8.yaml"),
                        get_arch("sm_90a"))
    assert "A_scales[mk] f32  sizes [256, 8]  strides [1, 256]" in text and "(m: 1, k: 128)" in text
    assert "family = fp8_hopper" in text


def test_tune_refuses_an_e4m3_spec_no_family_takes_in_one_line():
    from dgemm_cli.tune import candidates

    views = analyse(parse_spec(_spec(gemm={"m": 256, "n": 384, "k": 1024}), "f8.yaml"))
    with pytest.raises(PlanError, match=r"no kernel family can run this problem \(fp8_hopper: wgmma: sm_86 has no "):
        candidates(views, get_arch("sm_86"), 1)


def test_an_e4m3_epilogue_view_is_refused_at_its_key():
    data = _spec({"A": {"per": "tensor"}, "B": {"per": "tensor"}},
                 epilogue=[{"bias": {"letters": "n", "dtype": "fp8"}}])
    err = _error(data)
    assert err.key == "epilogue[0].bias.dtype" and "bias is e4m3" in err.problem
