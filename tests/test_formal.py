"""Formal verification (dgemm_cli/formal, the cta family's model): the expressions, the models checked by exhaustive
enumeration at small sizes (which guards the proof generator), the Coq proofs, the mutations Coq must reject, the
model against the kernel's text, and `verify --formal`."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import ARCHES
from dgemm_cli.cli import main
from dgemm_cli.families import FAMILIES
from dgemm_cli.families.cta import index as cta_index
from dgemm_cli.formal import coq as coq_script
from dgemm_cli.formal.check import (
    FAILED,
    PROVED,
    ProvedLemmas,
    kernel_plans,
    models_of,
    places,
    prove_model,
    references,
)
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.formal.expr import (
    INDEX,
    Add,
    Cmp,
    Const,
    Ite,
    Let,
    Min,
    Mul,
    Var,
    all_of,
    coq,
    cuda,
    evaluate,
    replace,
    split_ite,
    walk,
)
from dgemm_cli.formal.model import Obligation, Range, obligations
from dgemm_cli.formal.search import enumerate_points, exhaust, search
from dgemm_cli.formal.views import view_type
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.randspec import random_specs
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .formal_support import at_points, needs_coq, view_addresses

ROOT = Path(__file__).resolve().parents[1]


def _spec(name: str, **doc) -> dict:
    return {"name": name, "arch": "sm_80", **doc}


# Small problems the cta family plans in each of its variants: tails in every role, column-major and strided views,
# a batch with a broadcast input, an NCHW view (merged segments), rows sized at run time, f32 (FFMA, transposing
# loads), an epilogue with D, vector loads behind a pointer check.
SMALL = [
    _spec("tails_f16", dtype="f16", gemm={"m": 37, "n": 21, "k": 19},
          operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}),
    _spec("vec_f16", dtype="f16", gemm={"m": 40, "n": 72, "k": 48},
          operands={"A": {"layout": "row", "align": 16}, "B": {"layout": "row", "align": 16},
                    "C": {"layout": "row"}}),
    _spec("vec_checked_bf16", dtype="bf16", gemm={"m": 33, "n": 64, "k": 40},
          operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "col"}}),
    _spec("batch_bcast", dtype="f16", gemm={"batch": 3, "m": 20, "n": 24, "k": 16},
          operands={"A": {"layout": "row", "align": 16}, "B": {"strides": [0, 24, 1], "align": 16},
                    "C": {"layout": "row"}}),
    _spec("nchw", dtype="f16", contraction="nchw,kc->nkhw", sizes={"n": 2, "c": 16, "h": 3, "w": 5, "k": 24},
          operands={"A": {"strides": [240, 15, 5, 1]}, "B": {"strides": [16, 1]},
                    "C": {"strides": [360, 15, 5, 1]}}),
    _spec("dyn_rows", dtype="f16", gemm={"m": {"min": 1, "max": 40}, "n": 24, "k": 32},
          operands={"A": {"layout": "row"}, "B": {"layout": "row"}, "C": {"layout": "row"}}),
    _spec("f32_tn", dtype="f32", gemm={"m": 19, "n": 36, "k": 23},
          operands={"A": {"layout": "col"}, "B": {"layout": "row"}, "C": {"layout": "row"}}),
    _spec("f32_nt_k_aligned", dtype="f32", gemm={"m": 24, "n": 20, "k": 32},
          operands={"A": {"layout": "row", "align": 16}, "B": {"layout": "col", "align": 16},
                    "C": {"layout": "col"}}),
    _spec("epilogue_d", dtype="f16", gemm={"m": 21, "n": 18, "k": 24}, beta=0.5,
          operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}, "D": {"layout": "col"}},
          epilogue=[{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}},
                    {"residual": {"strides": [20, 1]}}]),
    _spec("padded_offset_view", dtype="f32", contraction="mk,kn->mn", sizes={"m": 9, "k": 7, "n": 6},
          operands={"A": {"strides": [9, 1], "offset": 5}, "B": {"strides": [6, 1]}, "C": {"strides": [1, 11]}}),
]


def _models(doc: dict, family: str = "cta"):
    spec = parse_spec(doc, f"<{doc['name']}>")
    planned = plan_spec(spec, ARCHES[doc.get("arch", "sm_80")], family)
    out = []
    for label, views, fp in kernel_plans(planned.plan, planned.views):
        found = models_of(views, fp, label)
        assert not isinstance(found, str), found
        out.extend((views, m) for m in found)
    return out


# ---- expressions


def test_printing_and_evaluation():
    c, k = Var("c"), Const(4, "kPerRow")
    row, col = Let("row", c // k), Let("col", (c % k) * Const(8, "VEC"))
    assert cuda(row.value) == "c / kPerRow" and cuda(col.value) == "(c % kPerRow) * VEC"
    assert cuda(Var("m") + Const(128, "T::BM") - 1) == "m + T::BM - 1"
    assert coq(col) == "((c mod 4) * 8)" and coq(Const(3) * Const(5) + 1) == "16"  # constants folded
    assert evaluate((Var("x") - 7) // 4, {"x": 0}) == -2  # floor, as Z.div: the obligations require x >= 0
    assert evaluate(Ite(c < 3, c, Const(0)), {"c": 2}) == 2
    cases = split_ite(Ite(c < 3, c, Const(9)) < 5)
    assert [cuda(p) for _, p in cases] == ["c < 5", "9 < 5"]


def test_a_variable_of_one_value_is_that_value_in_the_lemma():
    """x ranges over {0} alone: its product with the run-time y is 0 in the statement lia sees (nia would have to
    find it), while the lemma still quantifies over x."""
    x, y = Var("x"), Var("y")
    ob = Obligation("one_value", "in-bounds", "x y is 0", (Range(x, Const(0), Const(1)), Range(y, Const(0), Const(9))),
                    all_of(Cmp("<=", Const(0), x), Cmp("<", x, Const(1))), Cmp("<=", (x % 32) * (y + 5), Const(0)))
    (lemma,) = coq_script.lemmas([ob])
    assert "forall x y : Z" in lemma.text and "mod" not in lemma.text.split("Proof.")[0].split("->")[-1]


# ---- the models, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("doc", SMALL, ids=[d["name"] for d in SMALL])
def test_every_obligation_holds_at_every_point(doc):
    """Each obligation holds at every point of its ranges, and its hypotheses hold somewhere (none is vacuous)."""
    checked = 0
    for views, model in _models(doc):
        for ob in obligations(model, references(views)):
            found = exhaust(ob)
            if found is None:
                continue  # too many points (a pointer-alignment multiple times the grid): Coq's alone
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            checked += 1
    assert checked > 30






@pytest.mark.parametrize("doc", SMALL, ids=[d["name"] for d in SMALL])
def test_maps_enumerated_store_each_output_once_and_load_inside_views(doc):
    """The maps themselves, enumerated: the output's store addresses are its view's, each exactly once, and every
    element a load moves is an element of its view (computed by numpy from the spec's letters)."""
    for views, model in _models(doc):
        rows_range = [r for a in model.accesses for r in a.ranges if r.var.name == "mrows"][:1]
        sizes = range(int(rows_range[0].lo.value), int(rows_range[0].hi.value)) if rows_range else [None]
        for rows in sizes:
            for a in model.accesses:
                pts = enumerate_points(a.ranges if rows is None else
                                       tuple(dataclasses.replace(r, lo=Const(rows), hi=Const(rows + 1))
                                             if r.var.name == "mrows" else r for r in a.ranges))
                assert pts is not None
                count, address = at_points(a.count, pts), at_points(a.address, pts)
                moved = np.concatenate([address[count > e] + e for e in range(a.width)])
                view = view_addresses(views, a.operand, rows)
                if a.kind == "store":
                    assert np.array_equal(np.sort(moved), np.sort(view)), f"{model.kernel}: {a.text}"
                else:
                    assert np.isin(moved, view).all(), f"{model.kernel}: {a.text}"


# ---- Coq


@needs_coq
@pytest.mark.parametrize("doc", [SMALL[0], SMALL[3], SMALL[5], SMALL[8]], ids=lambda d: d["name"])
def test_coq_proves_the_small_models(doc, tmp_path):
    for views, model in _models(doc):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)
        assert "Proof completed" in _coqc_output(Path(r.script))


def _coqc_output(script: Path) -> str:
    import subprocess

    return subprocess.run([find_coqc(), "-q", script.name], cwd=script.parent, capture_output=True, text=True).stdout


@needs_coq
def test_coq_proves_a_spec_of_the_repository(tmp_path):
    spec = load_spec(ROOT / "specs" / "conv1x1_nchw.yaml")
    planned = plan_spec(spec, ARCHES["sm_80"], "cta")
    for label, views, fp in kernel_plans(planned.plan, planned.views):
        for model in models_of(views, fp, label):
            r = prove_model(views, model, tmp_path)
            assert r.status == PROVED, (r.failed, r.obligation, r.reason)


# A batch of outputs whose rows are sized at run time: the store's inverse divides the block index by the run-time
# tile count (batch x tiles along m x tiles along n), which lia cannot do; a bucket's proof splits on the values the
# tile count takes over it (the widest bucket, 5..72, spans several tiles).
BATCHED_DYN_ROWS = _spec("batched_dyn_rows", dtype="bf16", contraction="bshd,bthd->bhst",
                         sizes={"b": 2, "s": {"min": 1, "max": 72}, "t": 40, "h": 3, "d": 16},
                         operands={"A": {"strides": [3456, 48, 16, 1]}, "C": {"strides": [8640, 2880, 40, 1]}})


@needs_coq
def test_coq_proves_a_batch_of_run_time_rows_case_by_tile_count(tmp_path):
    views, model = next((v, m) for v, m in _models(BATCHED_DYN_ROWS) if " 5..72 " in m.kernel)
    stores = dataclasses.replace(model, accesses=())  # the written-once lemmas alone: the loads prove without a split
    r = prove_model(views, stores, tmp_path)
    assert r.status == PROVED, (r.failed, r.obligation, r.reason)
    assert "destruct (Z.eq_dec" in Path(r.script).read_text(), "the tile count took one value: the split went untested"


# Flat rows of 197 elements a run-time row (`ltwb,ibw->witl`: t x l along m, l run-time) in a batch of 2: the tile
# count takes more values over a bucket (5..16: 12) than the proof splits on (coq.MAX_DIVISOR_CASES), so the
# written-once inverse's quotient and remainder by it are stated outright (Z.div_unique, Z.mod_unique) and the batch's
# multiple of it bounded; nia found neither (random-specs --seed 50's rand_50_118).
FLAT_ROWS_DYN = _spec("flat_rows_dyn", dtype="bf16", contraction="ltwb,ibw->witl",
                      sizes={"w": 2, "t": 197, "l": {"min": 1, "max": 25}, "i": 18, "b": 30},
                      operands={"A": {"strides": [1, 1920, 32, 64], "align": 16}, "B": {"strides": [88, 1, 40]},
                                "C": {"strides": [32, 64, 1152, 1], "align": 16},
                                "D": {"strides": [1, 9850, 50, 2], "dtype": "f16"}},
                      epilogue=[{"residual": {"letters": "iltw", "strides": [0, 2, 0, 1], "dtype": "f16"}}])


@needs_coq
def test_coq_proves_a_batch_of_run_time_rows_whose_tile_count_takes_many_values(tmp_path, monkeypatch):
    def width(kernel: str) -> int:
        lo, hi = map(int, re.search(r" (\d+)\.\.(\d+) ", kernel).groups())
        return hi - lo + 1
    views, model = max(_models(FLAT_ROWS_DYN), key=lambda vm: width(vm[1].kernel))
    assert width(model.kernel) > coq_script.MAX_DIVISOR_CASES  # ceil(197 l / 16) takes one value a row here
    # A bucket of up to MAX_SIZE_CASES rows is proved a value of the rows at a time; this one (12 rows) stands for
    # the wider buckets, whose inverse is stated outright.
    monkeypatch.setattr(coq_script, "MAX_SIZE_CASES", width(model.kernel) - 1)
    stores = dataclasses.replace(model, accesses=())
    r = prove_model(views, stores, tmp_path)
    assert r.status == PROVED, (r.failed, r.obligation, r.reason)
    text = Path(r.script).read_text()
    assert "Z.div_unique" in text and "destruct (Z.eq_dec" not in text


# Rows sized at run time (s, 1..19) in a batch of 2 as the splitk family's K split runs them: the cluster's store
# walks a tile's valid rows, min(32, M - m0), as the divisor of its element index and the pitch of its columns, which
# lia takes for no value of M and nia did not find (random-specs --seed 50's rand_50_016). Each lemma that divides or
# multiplies by it is proved once a value of the bucket's rows.
SPLIT_K_DYN_ROWS = _spec("split_k_dyn_rows", arch="sm_90a", dtype="f16", contraction="vbds,hmvd->bhms",
                         sizes={"b": 2, "s": {"min": 1, "max": 19}, "h": 133, "m": 112, "d": 30, "v": 128},
                         operands={"A": {"strides": [1, 3840, 128, 7680], "align": 16},
                                   "B": {"strides": [430976, 3848, 1, 128]},
                                   "C": {"strides": [1, 2, 5061, 266], "align": 16}},
                         alpha=0.5, beta=-2.0)


@needs_coq
def test_coq_proves_a_run_time_tail_tile_one_value_of_the_rows_at_a_time(tmp_path):
    views, model = next((v, m) for v, m in _models(SPLIT_K_DYN_ROWS, "splitk") if " 9..16 " in m.kernel)
    stores = dataclasses.replace(model, accesses=())
    r = prove_model(views, stores, tmp_path)
    assert r.status == PROVED, (r.failed, r.obligation, r.reason)
    names = re.findall(r"Lemma (store_once_one_to_one_block\S*) :", Path(r.script).read_text())
    assert {n.rsplit("_mrows", 1)[1] for n in names} == {str(v) for v in range(9, 17)}, names


def test_an_equation_over_a_run_time_divisor_is_one_lemma_a_value_of_the_size():
    """x mod min(8, y) with y a run-time size in 3..6: one lemma a value, each holding the value, that cover the
    range; the same over an index (not a size) stays one lemma."""
    x, y = Var("x"), Var("y")
    goal = Cmp("==", (x % Min(Const(8), y)) + (x // Min(Const(8), y)) * Min(Const(8), y), x)
    hyps = all_of(Cmp("<=", Const(0), x), Cmp("<", x, Const(40)), Cmp("<=", Const(3), y), Cmp("<", y, Const(7)))
    sized = Obligation("walk", "written-once", "x's digits", (Range(y, Const(3), Const(7), size=True),
                                                              Range(x, Const(0), Const(40))), hyps, goal)
    lemmas = coq_script.lemmas([sized])
    assert [lm.name for lm in lemmas] == [f"walk_y{v}" for v in range(3, 7)]
    assert all("forall x : Z" in lm.text and f"(x mod {v})" in lm.text for lm, v in zip(lemmas, range(3, 7)))
    index = dataclasses.replace(sized, ranges=(Range(y, Const(3), Const(7)), Range(x, Const(0), Const(40))))
    assert [lm.name for lm in coq_script.lemmas([index])] == ["walk"]


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.integers(1, 9), st.integers(1, 9), st.integers(1, 3))
def test_folding_the_divisions_constants_decide_keeps_every_value(x, a, b, one):
    """coq._fold's identities (x mod 1, x / 1, (x mod a) / b and (x mod a) mod b for 0 < a <= b) hold at every
    point, Z's floor division."""
    v = Var("x")
    for e in (v % Const(1), v // Const(1), (v % Const(a)) // Const(b), (v % Const(a)) % Const(b),
              ((v % Const(a)) // Const(b) + v) % (Const(one) * Const(1))):
        assert evaluate(coq_script._fold(e), {"x": x}) == evaluate(e, {"x": x})
    # and it folds: each of these is a value, or the remainder it keeps
    assert coq_script._fold(v % Const(1)) == Const(0) and coq_script._fold(v // Const(1)) == v
    if a <= b:  # as Coq reads them (a constant expression printed folded)
        assert coq(coq_script._fold((v % Const(a)) // Const(b))) == "0"
        assert coq(coq_script._fold((v % Const(a)) % Const(b))) == coq(coq_script._fold(v % Const(a)))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 3), st.sampled_from([2, 4, 8, 16, 64]), st.integers(0, 30))
def test_a_stated_quotient_is_the_division_wherever_its_rest_stays_below_the_divisor(k, inner_k, c, c0):
    """coq._quotient splits an affine dividend (multiples of c, through names, casts and nested remainders it has
    stated) into q and r: where it answers, e = q c + r and 0 <= r < c at every point of the ranges, so q = e / c,
    the statement Coq then checks; where r can leave [0, c) it declines."""
    t, j = Var("t"), Var("j")
    ranges = (Range(t, Const(0), Const(40)), Range(j, Const(0), Const(4)))
    inner = Const(inner_k) * (t % Const(c)) + j + Const(c0)
    e = Let("e", Mul(Add(t, Const(k)), Const(c)) + inner)
    known: dict = {}
    got = coq_script._quotient(e, c, ranges, known)
    points = enumerate_points(ranges)
    values, rest_ok = evaluate(e, points), None
    if got is not None:
        q, r = got
        assert np.array_equal(evaluate(q, points) * c + evaluate(r, points), values)
        rest_ok = np.all((0 <= evaluate(r, points)) & (evaluate(r, points) < c))
        assert rest_ok and np.array_equal(evaluate(q, points), values // c)
    else:  # declined: its rest leaves [0, c) somewhere
        r = evaluate(inner, points)
        assert not np.all((0 <= r) & (r < c))


def test_quotients_are_stated_only_in_equations_over_many_divisions():
    """The dg layout's word-index lemma (an equation over 13 constant divisions of affine sums) states each quotient
    and remainder; a bound over a few divisions states none (there they cost lia more than they save)."""
    data = {"name": "w4", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 16, "n": 4096, "k": 4096},
            "operands": {"A": {"layout": "row", "align": 16}, "B": {"dtype": "int4", "packing": "dg", "align": 16},
                         "C": {"layout": "row"}},
            "scales": {"B": {"block": {"k": 128}, "layout": "row"}}}
    spec = parse_spec(data, "w4.yaml")
    planned = plan_spec(spec, ARCHES["sm_90a"])
    [(_, views, fp)] = [x for x in kernel_plans(planned.plan, planned.views) if x[2].family == "wqtc"]
    [model] = models_of(views, fp, "")
    lemmas = coq_script.lemmas(obligations(model, references(views), places(views)))
    stated = {lm.name for lm in lemmas if "Z.div_unique with (r := ((((" in lm.text}
    assert stated and all(name.startswith("b_chunk_element") for name in stated), sorted(stated)
    assert not any("div_unique" in lm.text for lm in lemmas if lm.name.startswith("b_chunk_in_bounds"))


# ---- mutations: each must be rejected, with a readable obligation and the values that break it


def _mutated(doc: dict, mutate) -> tuple:
    views, model = _models(doc)[0]
    return views, mutate(model)


def _replace_in_access(model, ident_prefix: str, field: str, old, new):
    accesses = []
    for a in model.accesses:
        if a.ident.startswith(ident_prefix):
            a = dataclasses.replace(a, **{field: replace(getattr(a, field), old, new)})
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def _node(expr, pred):
    return next(x for x in walk(expr) if pred(x))


def _off_by_one_guard(model):
    a = next(a for a in model.accesses if a.ident.startswith("a_"))
    guard = _node(a.count, lambda x: isinstance(x, Cmp) and x.op == "<" and isinstance(x.a, Let) and x.a.name == "go")
    return _replace_in_access(model, "a_", "count", guard, Cmp("<=", guard.a, guard.b))


def _missing_tail_mask(model):
    a = next(a for a in model.accesses if a.ident.startswith("a_"))
    guard = _node(a.count, lambda x: isinstance(x, Cmp) and isinstance(x.a, Let) and x.a.name == "gk")
    return _replace_in_access(model, "a_", "count", guard, Cmp("<=", Const(0), Const(0)))


def _wrong_stride(model):
    a = next(a for a in model.accesses if a.ident.startswith("b_"))
    stride = _node(a.address, lambda x: isinstance(x, Const) and x.ctype == INDEX and x.value > 1)
    return _replace_in_access(model, "b_", "address", stride, Const(stride.value + 1, ctype=INDEX))


MUTATIONS = {
    # m = 37 is no multiple of the tile: the guard `go <= extent` lets row 37 load.
    "off_by_one_guard": (SMALL[0], _off_by_one_guard, ("a_gather1_in_bounds", "a_gather1_element")),
    # k = 19 is no multiple of the k-tile: without `gk < K` the last k-tile reads past A's rows.
    "missing_tail_mask": (SMALL[0], _missing_tail_mask, ("a_gather1_in_bounds", "a_gather1_element")),
    "wrong_stride": (SMALL[0], _wrong_stride, ("b_gather1_in_bounds", "b_gather1_element")),
}


@needs_coq
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutations_are_rejected(name, tmp_path):
    doc, mutate, lemmas = MUTATIONS[name]
    views, model = _mutated(doc, mutate)
    r = prove_model(views, model, tmp_path)
    assert r.status == FAILED
    assert r.failed.startswith(lemmas), r.failed
    assert r.obligation and r.counterexample, r


def test_proved_lemmas_hold_each_statement_once_whatever_its_name():
    views, model = _models(SMALL[0])[0]
    lemmas = coq_script.lemmas(obligations(model, references(views), places(views)))
    first = {}
    for lem in lemmas:
        first.setdefault(lem.key, lem)
    proved = ProvedLemmas()
    assert proved.pending(lemmas) == list(first.values())  # a repeat within the kernel runs once
    renamed = dataclasses.replace(lemmas[0], name="another_name",
                                  text=lemmas[0].text.replace(f"Lemma {lemmas[0].name} :", "Lemma another_name :"))
    assert proved.pending([lemmas[0], renamed]) == [lemmas[0]]
    proved.add(lemmas[:3])
    assert proved.pending(lemmas[:3] + [renamed]) == []
    assert proved.pending(lemmas) == [lem for lem in first.values() if lem.key not in {x.key for x in lemmas[:3]}]
    changed = dataclasses.replace(lemmas[0], text=lemmas[0].text.replace("->", "-> (0 <= 1) ->", 1))
    assert changed.key != lemmas[0].key and proved.pending([changed]) == [changed]


@needs_coq
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_mutation_is_rejected_after_the_sound_kernel_proved_its_lemmas(name, tmp_path):
    """The run's ledger skips only what was proved: the sound model proves and fills it, the same model again runs
    no lemma, and the mutated model's changed lemma still runs and is rejected."""
    doc, mutate, lemmas = MUTATIONS[name]
    views, model = _models(doc)[0]
    proved = ProvedLemmas()
    first = prove_model(views, model, tmp_path / "first", proved=proved)
    assert first.status == PROVED, first
    again = prove_model(views, model, tmp_path / "again", proved=proved)
    assert again.status == PROVED and again.shared == again.lemmas > first.shared, again
    assert "Proof completed" in _coqc_output(Path(again.script))  # the script on disk is whole
    r = prove_model(views, mutate(model), tmp_path / "mutated", proved=proved)
    assert r.status == FAILED and r.failed.startswith(lemmas) and 0 < r.shared < r.lemmas, r  # a reduced run


@needs_coq
def test_verify_formal_runs_a_lemma_once_a_run_unless_whole(tmp_path, monkeypatch):
    """Two kernels of one spec (cta and its fallback loaders) share lemmas (the stores): proved once by default,
    each kernel whole with --whole."""
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "t.yaml"
    spec.write_text(json.dumps({"name": "two_kernels", "dtype": "f16", "gemm": {"m": 37, "n": 40, "k": 24},
                                "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}))
    args = ["verify", "--formal", "--arch", "sm_80", "--jobs", "1", "--json", str(spec)]
    rows = json.loads(CliRunner().invoke(main, args).stdout)
    assert len(rows) > 1 and all(x["status"] == PROVED for x in rows) and sum(x["shared"] for x in rows[1:]) > 0
    whole = CliRunner().invoke(main, [*args, "--whole"])
    assert whole.exit_code == 0 and all(x["shared"] == 0 for x in json.loads(whole.stdout))
    r = CliRunner().invoke(main, ["verify", "--whole", str(spec)])
    assert r.exit_code != 0 and "--whole: only with --formal" in r.output


def _overflowing_plan():
    """A spec whose A spans more than 2^31 - 1 elements, rendered (wrongly) with a 32-bit index_t."""
    doc = _spec("big", dtype="f16", gemm={"m": 70000, "n": 64, "k": 40000},
                operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}})
    spec = parse_spec(doc, "<big>")
    planned = plan_spec(spec, ARCHES["sm_80"], "cta")
    assert planned.plan.primary.index_type == "long long"
    plan32 = dataclasses.replace(planned.plan.primary, index_type="int")
    return planned.views, cta_index.models(planned.views, plan32, "big")[0]


@needs_coq
def test_a_32_bit_index_that_overflows_is_rejected(tmp_path):
    views, model = _overflowing_plan()
    r = prove_model(views, model, tmp_path)
    assert r.status == FAILED and "_safe_" in r.failed and r.obligation.startswith("64-bit"), r
    assert r.counterexample


def test_the_search_finds_each_mutation_without_coq():
    for name, (doc, mutate, lemmas) in MUTATIONS.items():
        views, model = _mutated(doc, mutate)
        broken = [ob for ob in obligations(model, references(views)) if ob.ident.startswith(lemmas)]
        assert any(search(ob, tries=5000) for ob in broken), name
    views, model = _overflowing_plan()
    safe = [ob for ob in obligations(model, references(views)) if "_safe_" in ob.ident]
    assert any(search(ob, tries=5000) for ob in safe)


# ---- the model against the kernel's text


@pytest.mark.parametrize("doc", SMALL, ids=[d["name"] for d in SMALL])
def test_rendered_views_are_the_models(doc):
    """Each dg::View the .cu's traits declare is the one the model's offsets are built from."""
    spec = parse_spec(doc, f"<{doc['name']}>")
    planned = plan_spec(spec, ARCHES["sm_80"], "cta")
    cu = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)[f"{spec.name}.cu"]
    declared = {m["op"]: re.sub(r"\s+", "", m["view"])
                for m in re.finditer(r"using (?P<op>\w+)_view = (?P<view>dg::View<.*?>);", cu, re.DOTALL)}
    views = analyse(spec)
    for op in ("A", "B", "C", *(o.name for o in spec.extra_operands)):
        assert declared[op] == view_type(views, op), op


def test_view_header_offsets_are_the_models():
    text = (ROOT / "templates" / "dg" / "view.cuh").read_text()
    assert "return S::stride == 1 ? i : i * I(S::stride);" in text
    assert "return (i % I(S::size)) * I(S::stride) + Role<I, Next, Outer...>::offset(i / I(S::size));" in text


def test_cta_header_spells_each_intermediate_as_the_model():
    header = (ROOT / "templates" / "dg" / "cta.cuh").read_text()
    seen = set()
    for doc in SMALL:
        for _, model in _models(doc):
            for a in model.accesses:
                for e in (a.count, a.address, *a.logical.values(), *a.always):
                    for x in walk(e):
                        if isinstance(x, Let) and x.name not in seen:
                            seen.add(x.name)
                            if x.name in cta_index.SPELLED:
                                assert cta_index.SPELLED[x.name] in header, x.name
                            elif not x.name.endswith("_offset") and x.name != "M":
                                assert cuda(x.value) in header, f"{x.name} = {cuda(x.value)}"
    assert {"c", "row", "col", "go", "gk", "k0", "m0", "n0", "tiles_m", "warp_m0", "row(i)"} <= seen


# ---- verify --formal


@needs_coq
def test_verify_formal_on_a_spec_and_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "t.yaml"
    spec.write_text(json.dumps(SMALL[0]))
    runner = CliRunner()
    r = runner.invoke(main, ["verify", "--formal", str(spec), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows and all(x["status"] == PROVED for x in rows)
    assert Path(rows[0]["script"]).is_file() and "build/verify/tails_f16" in rows[0]["script"]
    r = runner.invoke(main, ["gen", str(spec), "-o", "gen", "--family", "cta"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["verify", "--formal", "gen/tails_f16"])
    assert r.exit_code == 0 and "Proof completed" in r.output, r.output
    assert list((tmp_path / "gen" / "tails_f16" / "build" / "verify").glob("*.v"))


@needs_coq
def test_verify_formal_says_what_it_cannot_prove(tmp_path, monkeypatch):
    # Every family has a model: a family without one is made by taking the cpu family's away.
    monkeypatch.setitem(FAMILIES, "cpu", dataclasses.replace(FAMILIES["cpu"], formal=""))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["verify", "--formal", str(ROOT / "specs" / "cpu" / "conv1x1_nchw_f32.yaml")])
    assert r.exit_code == 5, r.output
    assert "not proved: the cpu family has no index model yet" in r.output


def test_verify_formal_without_coq_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    r = CliRunner().invoke(main, ["verify", "--formal", str(ROOT / "specs" / "odd_tails.yaml")])
    assert r.exit_code == 4 and "apt-get install coq" in r.output


# ---- random views: drawn small enough to enumerate every point


@st.composite
def small_gemms(draw) -> dict:
    """A GEMM of small sizes over padded, offset, row- or column-major views, any dtype, an optional batch (with a
    broadcast B) and rows sized at run time."""
    dtype = draw(st.sampled_from(["f16", "bf16", "f32"]))
    batch = draw(st.sampled_from([1, 1, 2, 3]))
    m, n, k = (draw(st.integers(1, 40)) for _ in range(3))
    letters = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
    sizes = {"m": m, "n": n, "k": k}
    operands = {}
    for x, (outer, inner) in letters.items():
        col = draw(st.booleans())
        lo, hi = (inner, outer) if not col else (outer, inner)  # hi: the contiguous letter
        pitch = sizes[hi] + draw(st.sampled_from([0, 0, 1, 8]))
        strides = {hi: 1, lo: pitch}
        dims = [outer, inner]
        op = {"strides": [strides[d] for d in dims], "offset": draw(st.sampled_from([0, 0, 3, 8]))}
        if batch > 1:
            step = 0 if x == "B" and draw(st.booleans()) else pitch * sizes[lo]
            op["strides"] = [step, *op["strides"]]
        op["align"] = draw(st.sampled_from([4, 16])) if dtype == "f32" else draw(st.sampled_from([2, 16]))
        operands[x] = op
    einsum = "mk,kn->mn" if batch == 1 else "bmk,bkn->bmn"
    size_doc: dict = {**sizes, **({"b": batch} if batch > 1 else {})}
    if draw(st.booleans()) and batch == 1:
        size_doc["m"] = {"min": 1, "max": m}
    return _spec(f"drawn_{dtype}", dtype=dtype, contraction=einsum, sizes=size_doc, operands=operands)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=small_gemms())
def test_drawn_views_hold_at_every_point(doc):
    """Random small views through the cta family: every obligation of every kernel (each bucket, each loader
    variant) holds at every point, and the output's store addresses are its view's, each once."""
    for views, model in _models(doc):
        for ob in obligations(model, references(views)):
            found = exhaust(ob)
            assert found is None or found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
        for a in model.accesses:
            if a.kind != "store" or any(r.var.name == "mrows" for r in a.ranges):
                continue
            pts = enumerate_points(a.ranges)
            count, address = at_points(a.count, pts), at_points(a.address, pts)
            assert np.array_equal(np.sort(address[count > 0]), np.sort(view_addresses(views, a.operand)))


# ---- random specs of the generator's sweep, proved by Coq

RANDOM_PROVED = random_specs(12, 44, fp8_share=0, fp8_views_share=0)


@needs_coq
@pytest.mark.parametrize("doc", RANDOM_PROVED, ids=[d["name"] for d in RANDOM_PROVED])
def test_coq_proves_random_specs_through_cta(doc, tmp_path):
    """`random-specs`' views (broadcasts, padded and permuted strides, epilogues, run-time rows) planned as the cta
    family on sm_80: every kernel proved."""
    for views, model in _models({**doc, "arch": "sm_80"}):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (model.kernel, r.failed, r.obligation, r.counterexample, r.reason)
