"""Formal verification of the tcgemv family's index model (families/tcgemv/index.py; issue 44), as
tests/test_formal_small.py checks the other small-M families': every obligation of each variant by exhaustive
enumeration at small sizes (none vacuous), the maps enumerated (the output's stores are its view's elements, each
once; loads inside their views), Coq's proofs, a mutation Coq rejects with a counterexample, the model against the
header's text, and `verify --formal` on the decode spec.

The family's gates want a block for every SM; the small problems here are planned for sm_90a with as few SMs as their
blocks (`_arch`), which changes nothing the kernel indexes."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dgemm_cli.arch import ARCHES
from dgemm_cli.cli import main
from dgemm_cli.families.tcgemv import index as tc_index
from dgemm_cli.formal.check import PROVED, kernel_plans, prove_model, references
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.formal.expr import Const, Let, cuda, evaluate, replace, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import enumerate_points, exhaust
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.spec import parse_spec

from .formal_support import models_of_plans, mutation_tests, needs_coq, view_addresses

ROOT = Path(__file__).resolve().parents[1]
_ROW16 = {"layout": "row", "align": 16}
_COL16 = {"layout": "col", "align": 16}


def _arch(sms: int):
    return dataclasses.replace(ARCHES["sm_90a"], sms=sms)


# name -> (spec, SMs): 8 tokens with K not whole segments and N not whole blocks, the pointers checked at run time
# (the cta fallback beside it); 16 tokens, both halves of the activation, promised pointers; a batch of products;
# rows at run time (the buckets, one kernel a range); a long slice whose first rounds are prefetched; the staged
# kernel (A by TMA, 6 row groups).
CASES = {
    "t8_tail": ({"name": "t8_tail", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 3, "n": 40, "k": 200},
                 "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}, 2),
    "t16": ({"name": "t16", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": 12, "n": 24, "k": 256},
             "operands": {"A": _ROW16, "B": _COL16, "C": {"layout": "row"}}}, 2),
    "t_batch": ({"name": "t_batch", "arch": "sm_90a", "dtype": "f16", "gemm": {"batch": 2, "m": 4, "n": 16, "k": 136},
                 "operands": {"A": _ROW16, "B": _COL16, "C": {"layout": "row"}}}, 2),
    "t_dyn": ({"name": "t_dyn", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": {"min": 2, "max": 16}, "n": 16,
                                                                           "k": 128},
               "operands": {"A": _ROW16, "B": _COL16, "C": {"layout": "row"}}}, 1),
    "t_prefetch": ({"name": "t_prefetch", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 5, "n": 16, "k": 4096},
                    "operands": {"A": _ROW16, "B": _COL16, "C": {"layout": "row"}},
                    "plan": {"family": "tcgemv", "k_warps": 2}}, 1),
    "t_staged": ({"name": "t_staged", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 16, "n": 192, "k": 512},
                  "operands": {"A": _ROW16, "B": _COL16, "C": {"layout": "row"}},
                  "plan": {"family": "tcgemv", "a_stage": "shared", "row_groups": 6}}, 2),
}


def _plans(name: str):
    doc, sms = CASES[name]
    planned = plan_spec(parse_spec(doc, f"<{name}>"), _arch(sms), "tcgemv")
    return [(label, v, fp) for label, v, fp in kernel_plans(planned.plan, planned.views) if fp.family == "tcgemv"]


def _models(name: str):
    out = models_of_plans(_plans(name))
    assert out
    return out


def test_the_cases_take_the_variants_they_name():
    plans = {n: [fp for _, _, fp in _plans(n)] for n in CASES}
    t8 = plans["t8_tail"][0]
    assert t8.tokens == 8 and not t8.whole_segments and not t8.whole_blocks and t8.a_check and t8.b_check
    assert plans["t16"][0].tokens == 16 and not plans["t16"][0].a_check
    assert len(plans["t_dyn"]) > 1  # the buckets
    assert plans["t_prefetch"][0].prefetch_rounds > 0
    assert plans["t_staged"][0].shared_act and plans["t_staged"][0].row_groups == 6


# ---- the model, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("name", list(CASES))
def test_every_obligation_holds_at_every_point(name):
    checked = 0
    for views, _, model in _models(name):
        for ob in obligations(model, references(views)):
            found = exhaust(ob)
            if found is None:
                continue  # too many points: Coq's alone
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("name", list(CASES))
def test_maps_enumerated_store_each_output_once_and_load_inside_views(name):
    for views, fp, model in _models(name):
        rows_range = [r for a in model.accesses for r in a.ranges if r.var.name == "mrows"][:1]
        sizes = range(int(rows_range[0].lo.value), int(rows_range[0].hi.value)) if rows_range else [None]
        for rows in sizes:
            for a in model.accesses:
                pts = enumerate_points(a.ranges if rows is None else
                                       tuple(dataclasses.replace(r, lo=Const(rows), hi=Const(rows + 1))
                                             if r.var.name == "mrows" else r for r in a.ranges))
                assert pts is not None
                n = len(next(iter(pts.values())))
                count = np.broadcast_to(np.asarray(evaluate(a.count, pts)), (n,))
                address = np.broadcast_to(np.asarray(evaluate(a.address, pts)), (n,))
                moved = np.concatenate([address[count > e] + e for e in range(a.width)])
                view = view_addresses(views, a.operand, rows)
                if a.kind == "store":
                    assert np.array_equal(np.sort(moved), np.sort(view)), f"{model.kernel}: {a.text}"
                else:
                    assert np.isin(moved, view).all(), f"{model.kernel}: {a.text}"
                    if a.ident == "a_tma":  # a block's boxes bring every element of A's view, each once
                        assert np.array_equal(np.unique(moved), np.sort(view))
                        assert len(moved) == fp.blocks * len(view)


# ---- Coq


@needs_coq
@pytest.mark.parametrize("name", ["t8_tail", "t_prefetch", "t_staged"])
def test_coq_proves_the_small_models(name, tmp_path):
    for views, _, model in _models(name):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)
        out = subprocess.run([find_coqc(), "-q", Path(r.script).name], cwd=tmp_path, capture_output=True, text=True)
        assert "Proof completed" in out.stdout


def _unclamped_token(model):
    """token = g + 8h, not min(g + 8h, M - 1): the tokens past M read rows past A's view."""
    accesses = []
    for a in model.accesses:
        if a.ident.startswith("a_"):
            node = next(x for x in walk(a.address) if isinstance(x, Let) and x.name == "token")
            a = dataclasses.replace(a, address=replace(a.address, node, Let(node.name, node.value.a, node.ctype)),
                                    logical={r: replace(i, node, Let(node.name, node.value.a, node.ctype))
                                             for r, i in a.logical.items()})
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def _whole_tail(model):
    """k_whole = k_len (no round down to whole segments): the loop loads the partial segment whole, past K."""
    accesses = []
    for a in model.accesses:
        if a.ident.startswith("b_loop"):
            node = next(x for x in walk(a.count) if isinstance(x, Let) and x.name == "k_whole")
            a = dataclasses.replace(a, count=replace(a.count, node, node.value.a.a))
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


MUTATIONS = {"unclamped_token": (_unclamped_token, ("a_",)), "whole_tail": (_whole_tail, ("b_loop",))}


def _mutated(name: str):
    mutate, lemmas = MUTATIONS[name]
    views, _, model = _models("t8_tail")[0]
    return views, mutate(model), lemmas


test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(MUTATIONS, _mutated)


# ---- the model against the kernel's text


def test_header_spells_each_intermediate_as_the_model():
    """Each Let the model names is spelled in dg/tcgemv.cuh or dg/reduce.cuh as the model prints its value, or one of
    its header lines (SPELLED, SPELLED_WALK) is there."""
    text = "\n".join((ROOT / "templates" / h).read_text() for h in tc_index.HEADERS)
    spelled = (tc_index.SPELLED, tc_index.SPELLED_WALK)
    seen = set()
    for name in CASES:
        for _, _, model in _models(name):
            for a in model.accesses:
                for e in (a.count, a.address, *a.logical.values(), *a.always):
                    for x in walk(e):
                        if not isinstance(x, Let) or x.name in seen:
                            continue
                        seen.add(x.name)
                        lines = [d[x.name] for d in spelled if x.name in d]
                        if lines:
                            assert any(line in text for line in lines), (x.name, lines)
                        elif not x.name.endswith("_offset"):
                            assert cuda(x.value) in text, f"{x.name} = {cuda(x.value)}"
    assert {"token", "k_whole", "n_even", "odd_chunk", "row_stride"} <= seen
    for d in spelled:
        for line in d.values():
            assert line in text, line


@needs_coq
def test_verify_formal_proves_the_decode_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ROOT / "specs" / "bench" / "decode_8x4096x4096.yaml"
    result = CliRunner().invoke(main, ["verify", "--formal", "--jobs", "1", str(spec)])
    assert "A through L1]: Proof completed" in result.output, result.output
