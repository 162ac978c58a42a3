"""Run-time sizes (issue 7's run-time M, the spec surface): a row letter given a range, the checks on it,
the round trip (planning and rendering them: tests/test_plan_dynamic.py)."""

from __future__ import annotations

import pytest

from dgemm_cli.errors import SpecError
from dgemm_cli.spec import parse_spec

DECODE = {"name": "d", "gemm": {"m": {"min": 1, "max": 256}, "n": 14336, "k": 4096},
          "operands": {"B": {"layout": "col"}}}


def test_a_row_range_parses_with_its_max_as_the_size_and_round_trips():
    s = parse_spec(DECODE)
    assert s.dynamic == {"m": (1, 256)} and s.sizes["m"] == 256
    assert s.to_dict()["sizes"]["m"] == {"min": 1, "max": 256} and parse_spec(s.to_dict()) == s
    c = parse_spec({"name": "c", "contraction": "tk,nk->tn", "sizes": {"t": {"min": 2, "max": 64}, "k": 8, "n": 5}})
    assert c.dynamic == {"t": (2, 64)}
    assert "min" not in str(parse_spec({"name": "p", "gemm": {"m": 4, "n": 4, "k": 4}}).to_dict())


@pytest.mark.parametrize("doc, key, words", [
    ({"name": "d", "gemm": {"m": {"min": 1, "max": 64}, "n": 8, "k": 8}, "operands": {"A": {"layout": "col"}}},
     "operands.A.layout", "depend on the run-time size of 'm'"),
    ({"name": "d", "contraction": "tk,kn->nt", "sizes": {"t": {"min": 1, "max": 64}, "k": 8, "n": 5}},
     "operands.C.strides", "depend on the run-time size of 't'"),
    ({"name": "d", "gemm": {"m": 8, "n": {"min": 1, "max": 8}, "k": 8}}, "gemm.n", "not a row letter"),
    ({"name": "d", "gemm": {"m": {"min": 9, "max": 8}, "n": 8, "k": 8}}, "gemm.m", "min 9 > max 8"),
    ({"name": "d", "gemm": {"m": {"min": 1}, "n": 8, "k": 8}}, "gemm.m.max", "missing"),
    ({"name": "d", "gemm": {"m": {"min": 0, "max": 8}, "n": 8, "k": 8}}, "gemm.m.min", "0 is less than 1"),
    ({"name": "d", "gemm": {"m": {"lo": 1, "max": 8}, "n": 8, "k": 8}}, "gemm.m.lo", "unknown key"),
    ({"name": "d", "contraction": "tsk,kn->tsn",
      "sizes": {"t": {"min": 1, "max": 4}, "s": {"min": 1, "max": 4}, "k": 8, "n": 5}},
     "sizes.s", "2 letters have run-time sizes"),
])
def test_every_refusal_names_the_key(doc, key, words):
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.key == key and words in str(err.value)


def test_explicit_strides_that_hold_for_every_size_are_accepted():
    # C column-major with an explicit leading dimension of 256: independent of the run-time m.
    doc = {"name": "d", "gemm": {"m": {"min": 1, "max": 256}, "n": 64, "k": 64},
           "operands": {"C": {"strides": [1, 256]}}}
    assert parse_spec(doc).C.strides == (1, 256)


def test_aliases_are_noted_once_with_a_run_time_size():
    s = parse_spec({"name": "d", "gemm": {"m": {"min": 1, "max": 8}, "n": 8, "k": 8},
                    "operands": {"A": {"dtype": "half"}, "B": {"dtype": "half"}}})
    assert s.notes == ("operands.A.dtype 'half' read as f16", "operands.B.dtype 'half' read as f16")
