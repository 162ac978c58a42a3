"""Formal verification of the small-M families' index models (splitk, gemv, tcgemv, dot; issue 44), as
tests/test_formal.py checks the cta family's: every obligation holds at every point by exhaustive enumeration at small
sizes and none is vacuous, the maps themselves enumerated (the output's store addresses are its view's, each once;
loads inside their views), Coq proves a few kernels a family, a mutation a family is rejected with a counterexample,
and each model's intermediates are spelled as its header spells them."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dgemm_cli.arch import ARCHES
from dgemm_cli.families import FAMILIES
from dgemm_cli.families.solving import best, of_assignment
from dgemm_cli.formal.check import PROVED, kernel_plans, prove_model, references
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.formal.expr import Const, Let, cuda, evaluate, replace, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import enumerate_points, exhaust
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .formal_support import let_named, models_of_plans, mutate_accesses, mutation_tests, needs_coq, view_addresses

ROOT = Path(__file__).resolve().parents[1]
ARCH = ARCHES["sm_90a"]


def _spec(name: str, **doc) -> dict:
    return {"name": name, "arch": "sm_90a", **doc}


@dataclasses.dataclass(frozen=True)
class Case:
    """A small problem and the family that plans it; `force`: changes to the planner's best assignment (a variant
    the cost model would not pick at this size)."""

    family: str
    doc: dict
    force: tuple[tuple[str, object], ...] = ()
    # Accesses whose obligations no point reaches at this size (a header branch the sizes never take: gemv's element
    # loads of B where K and N are whole chunks); the other cases reach them.
    unreached: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.family}-{self.doc['name']}"


def _row(m, n, k, dtype="f16", a="row", b="col", c="row", **extra) -> dict:
    gemm = {"m": m, "n": n, "k": k}
    ops = {"A": {"layout": a}, "B": {"layout": b}, "C": {"layout": c}}
    ops.update(extra.pop("operands", {}))
    return {"dtype": dtype, "gemm": gemm, "operands": ops, **extra}


CASES = [
    # splitk: one k-tile a block, tails along m and n; several k-tiles a block with C column-major (the walk along m)
    # on FFMA with transposing loads; rows at run time (buckets and a range); a batch with D and a bias; K over two
    # groups of clusters with the scratch buffer and the finish kernel.
    Case("splitk", _spec("sk_f16", **_row(5, 24, 200))),
    Case("splitk", _spec("sk_ccol_f32", **_row(7, 40, 300, dtype="f32", b="row", c="col"))),
    Case("splitk", _spec("sk_dyn", **_row({"min": 1, "max": 24}, 40, 256))),
    Case("splitk", _spec("sk_batch_ep", dtype="bf16", gemm={"batch": 2, "m": 4, "n": 24, "k": 200}, beta=0.5,
                         operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"},
                                   "D": {"layout": "row"}},
                         epilogue=[{"bias": {"letters": "n", "dtype": "f32"}}])),
    Case("splitk", _spec("sk_groups", **_row(3, 20, 2000, c="col")),
         (("groups", 2), ("splits", 4), ("block_k", 64))),
    # gemv: lanes along k with padded rows (B's chunks and A's vectors end inside K: the element paths); lanes along n
    # over a cluster with N past a chunk; f32 with a batch; element chunks of a view with no contiguous role.
    Case("gemv", _spec("gv_pad", dtype="f16", contraction="mk,nk->mn", sizes={"m": 2, "k": 603, "n": 10},
                       operands={"A": {"strides": [608, 1], "align": 16}, "B": {"strides": [608, 1], "align": 16},
                                 "C": {"strides": [10, 1]}})),
    Case("gemv", _spec("gv_npad", dtype="f16", contraction="mk,kn->mn", sizes={"m": 2, "k": 60, "n": 70},
                       operands={"A": {"strides": [64, 1], "align": 16}, "B": {"strides": [72, 1], "align": 16},
                                 "C": {"strides": [70, 1]}})),
    Case("gemv", _spec("gv_f32_batch", dtype="f32", gemm={"batch": 2, "m": 1, "n": 12, "k": 300},
                       operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}),
         unreached=("b_elem",)),
    Case("gemv", _spec("gv_strided", dtype="f16", contraction="mk,kn->mn", sizes={"m": 2, "k": 50, "n": 6},
                       operands={"A": {"strides": [60, 1]}, "B": {"strides": [7, 400]}, "C": {"strides": [6, 1]}}),
         unreached=("b_elem",)),
    # dot: a full reduction of a merged view (wide loads behind the pointer check, the slice's tail); a batch of dot
    # products with one input strided along k; K over two groups with the scratch buffer and the finish kernel.
    Case("dot", _spec("dot_full", dtype="f16", contraction="ab,ab->", sizes={"a": 10, "b": 61},
                      operands={"A": {"strides": [61, 1]}, "B": {"strides": [61, 1]}, "C": {"strides": []}})),
    Case("dot", _spec("dot_batch", dtype="f32", contraction="bk,bk->b", sizes={"b": 3, "k": 301},
                      operands={"A": {"strides": [301, 1]}, "B": {"strides": [1, 3]}, "C": {"strides": [1]}})),
    Case("dot", _spec("dot_groups", dtype="f16", contraction="k,k->", sizes={"k": 3001},
                      operands={"A": {"strides": [1]}, "B": {"strides": [1]}, "C": {"strides": []}}),
         (("groups", 2), ("threads", 128), ("unroll", 2))),
]
BY_NAME = {c.name: c for c in CASES}


def _plans(case: Case):
    """(label, views, family plan) of each kernel the case renders."""
    spec = parse_spec(case.doc, f"<{case.doc['name']}>")
    if case.force:
        views = analyse(spec)
        problem = FAMILIES[case.family].problem(views, ARCH)
        p, _ = best(problem)
        return [("primary", views, of_assignment(problem, {**p.assignment, **dict(case.force)}))]
    planned = plan_spec(spec, ARCH, case.family)
    return kernel_plans(planned.plan, planned.views)


def _models(case: Case):
    return models_of_plans(_plans(case), case.family)


def test_the_cases_take_the_variants_they_name():
    plans = {c.name: [fp for _, _, fp in _plans(c)] for c in CASES}
    assert plans["splitk-sk_groups"][0].groups == 2
    assert any(p.k_tiles_per_split > 1 for p in plans["splitk-sk_ccol_f32"])
    assert len(plans["splitk-sk_dyn"]) > 1  # buckets of the run-time rows
    assert plans["gemv-gv_pad"][0].lanes_along == "k" and plans["gemv-gv_npad"][0].lanes_along == "n"
    assert plans["gemv-gv_npad"][0].splits > 1 and plans["gemv-gv_strided"][0].chunk == 1
    assert plans["dot-dot_groups"][0].groups == 2 and plans["dot-dot_full"][0].runtime_dispatch


# ---- the models, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_obligation_holds_at_every_point(case):
    """Each obligation holds at every point of its ranges, and its hypotheses hold somewhere (none is vacuous)."""
    checked = 0
    for views, _, model in _models(case):
        for ob in obligations(model, references(views)):
            found = exhaust(ob)
            if found is None:
                continue  # too many points (a pointer-alignment multiple times the grid): Coq's alone
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            if not ob.ident.startswith(case.unreached or ("-",)):
                assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            checked += 1
    assert checked > 20




@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_maps_enumerated_store_each_output_once_and_load_inside_views(case):
    """The maps themselves, enumerated: the output's store addresses are its view's, each exactly once; every element
    a load moves is an element of its view; a scratch buffer's slots are each moved once, inside its reach (computed
    by numpy)."""
    for views, _, model in _models(case):
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
                if a.reference is not None:  # a scratch buffer: every slot of its reach, each once
                    reach = model.reach[a.operand]
                    assert len(np.unique(moved)) == len(moved), f"{model.kernel}: {a.text}"
                    assert moved.min() >= reach.lo.value and moved.max() <= reach.hi.value
                    continue
                view = view_addresses(views, a.operand, rows)
                if a.kind == "store":
                    assert np.array_equal(np.sort(moved), np.sort(view)), f"{model.kernel}: {a.text}"
                else:
                    assert np.isin(moved, view).all(), f"{model.kernel}: {a.text}"


# ---- Coq


PROVED_CASES = ["splitk-sk_f16", "splitk-sk_groups", "gemv-gv_pad", "gemv-gv_npad", "dot-dot_full", "dot-dot_groups"]


@needs_coq
@pytest.mark.parametrize("name", PROVED_CASES)
def test_coq_proves_the_small_models(name, tmp_path):
    for views, _, model in _models(BY_NAME[name]):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)
        out = subprocess.run([find_coqc(), "-q", Path(r.script).name], cwd=tmp_path, capture_output=True, text=True)
        assert "Proof completed" in out.stdout


# ---- mutations: each must be rejected, with the obligation and the values that break it


def _splitk_slice_off_by_one(model):
    """kt0 = (group * SPLITS + split) * KT_PER_SPLIT + 1: each block's K slice starts a k-tile late."""
    return mutate_accesses(model, "a_", "address", let_named("kt0"), lambda x: Let(x.name, x.value + 1, x.ctype))


def _splitk_slot_overlap(model):
    """The scratch slot numbered by blockIdx.x, not by the cluster: the ranks' shares land past the buffer."""
    return mutate_accesses(model, "slot_store", "address", let_named("slot"),
                   lambda x: Let(x.name, replace(x.value, x.value.a, x.value.a.a.a), x.ctype))


def _gemv_unclamped_slice(model):
    """k_len = K_SLICE, not min(K_SLICE, K - k0): the last slice's chunks read past K."""
    return mutate_accesses(model, "b_", "count", let_named("k_len"), lambda x: Let(x.name, x.value.a, x.ctype))


def _dot_chunk_stride(model):
    """kk = kb + u * (STEP + CH): the second chunk of a round skips CH elements and reads past the slice."""
    def wider(x):
        b = x.value.b  # u * STEP
        return Let(x.name, x.value.a + b.a * Const(b.b.value + 8, ctype=b.b.ctype), x.ctype)
    return mutate_accesses(model, "a_", "address", let_named("kk"), wider)


MUTATIONS = {
    "splitk_slice_off_by_one": ("splitk-sk_f16", 0, _splitk_slice_off_by_one, ("a_",)),
    "splitk_slot_overlap": ("splitk-sk_groups", 0, _splitk_slot_overlap, ("slot_store",)),
    "gemv_unclamped_slice": ("gemv-gv_npad", 0, _gemv_unclamped_slice, ("b_",)),
    "dot_chunk_stride": ("dot-dot_groups", 0, _dot_chunk_stride, ("a_",)),
}


def _mutated(name: str):
    case, index, mutate, lemmas = MUTATIONS[name]
    views, _, model = _models(BY_NAME[case])[index]
    return views, mutate(model), lemmas


test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(MUTATIONS, _mutated)


# ---- the model against the kernel's text


def _headers(family: str) -> str:
    module = __import__(FAMILIES[family].formal, fromlist=["HEADERS"])
    return "\n".join((ROOT / "templates" / h).read_text() for h in module.HEADERS)


def _spelled(family: str) -> list[dict[str, str]]:
    """The family's SPELLED dicts, most specific first (the cta model's last, for the tile the splitk family runs)."""
    from dgemm_cli.families.cta import index as cta_index

    module = __import__(FAMILIES[family].formal, fromlist=["SPELLED"])
    found = [getattr(module, n) for n in dir(module) if n.startswith("SPELLED") and isinstance(getattr(module, n),
                                                                                                    dict)]
    return [*found, cta_index.SPELLED] if family == "splitk" else found


@pytest.mark.parametrize("family", sorted({c.family for c in CASES}))
def test_header_spells_each_intermediate_as_the_model(family):
    """Each Let the model names is spelled in the family's headers as the model prints its value, or its header line
    (SPELLED) is there."""
    text = _headers(family)
    spelled = _spelled(family)
    seen = set()
    for case in (c for c in CASES if c.family == family):
        for _, _, model in _models(case):
            for a in model.accesses:
                for e in (a.count, a.address, *a.logical.values(), *a.always):
                    for x in walk(e):
                        if not isinstance(x, Let) or x.name in seen:
                            continue
                        seen.add(x.name)
                        lines = [d[x.name] for d in spelled if x.name in d]
                        if lines:
                            assert any(line in text for line in lines), (x.name, lines)
                        elif not x.name.endswith("_offset") and x.name != "M":
                            assert cuda(x.value) in text, f"{x.name} = {cuda(x.value)}"
    assert seen
