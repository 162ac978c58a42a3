"""Formal verification of the weight-only families' index models (families/wq/index.py, families/wqtc/index.py;
issue 44), as tests/test_formal_tcgemv.py checks tcgemv's: every obligation of each variant by exhaustive enumeration
at small sizes (none vacuous), the maps enumerated (each packed read is the word and nibble that dgemm_cli/quant.py's
layouts put the value at, the output's stores are its view's elements, each once), the packed references against
quant.py's tables, Coq's proofs, mutations Coq rejects with a readable obligation and values that break it, the
model against the header's and the rendered traits' text, and `verify --formal` on the weight-only specs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dgemm_cli import quant
from dgemm_cli.arch import ARCHES
from dgemm_cli.cli import main
from dgemm_cli.families.wq import index as wq_index
from dgemm_cli.families.wqtc import index as wqtc_index
from dgemm_cli.formal.check import PROVED, kernel_plans, places, prove_model, references
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.formal.expr import INDEX, Cmp, Const, Let, Var, cuda, replace, walk
from dgemm_cli.formal.model import Range, obligations
from dgemm_cli.formal.packed import quant_reference, quant_views, value_place
from dgemm_cli.formal.search import enumerate_points, exhaust
from dgemm_cli.formal.views import view_type
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import parse_spec

from .formal_support import (
    at_points,
    let_named,
    models_of_plans,
    mutate_accesses,
    mutation_tests,
    needs_coq,
    view_addresses,
)

ROOT = Path(__file__).resolve().parents[1]
_ROW = {"layout": "row"}
_ROW16 = {"layout": "row", "align": 16}

# name -> (spec, family): GPTQ's words with packed uint4 zero points (along n) and groups of 16; AWQ's order with
# its zero points, rows at run time (buckets of one size and ranges); the dg layout with padded chunks and strips, a
# scale a column; int8 as nn.Linear keeps it with a bias; views: rows over two letters with padded rows, words
# column-major, k-contiguous scales, uint8 zero points, C at an offset; prescaled f16 zero points.
CASES = {
    "wq_gptq": ({"name": "wq_gptq", "dtype": "f16", "gemm": {"m": 3, "n": 20, "k": 40},
                 "operands": {"A": _ROW, "B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}, "C": _ROW},
                 "scales": {"B": {"block": {"k": 16}, "layout": "row"}},
                 "zeros": {"B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}}}, "wq"),
    "wq_awq_dyn": ({"name": "wq_awq_dyn", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 12}, "n": 24, "k": 36},
                    "operands": {"A": _ROW, "B": {"dtype": "uint4", "packing": "awq", "layout": "row"}, "C": _ROW},
                    "scales": {"B": {"block": {"k": 32}, "layout": "row"}},
                    "zeros": {"B": {"dtype": "uint4", "packing": "awq", "layout": "row"}}}, "wq"),
    "wq_dg": ({"name": "wq_dg", "dtype": "bf16", "gemm": {"m": 2, "n": 20, "k": 70},
               "operands": {"A": _ROW, "B": {"dtype": "int4", "packing": "dg", "align": 16}, "C": _ROW},
               "scales": {"B": {"per": "channel"}}}, "wq"),
    "wq_int8": ({"name": "wq_int8", "dtype": "f16", "gemm": {"m": 5, "n": 36, "k": 24},
                 "operands": {"A": _ROW, "B": {"dtype": "int8", "layout": "col"}, "C": _ROW},
                 "scales": {"B": {"per": "channel", "dtype": "f32"}},
                 "epilogue": [{"bias": {"letters": "n"}}, {"activation": "silu"}]}, "wq"),
    "wq_views": ({"name": "wq_views", "contraction": "btk,kn->btn", "sizes": {"b": 2, "t": 3, "k": 32, "n": 20},
                  "operands": {"A": {"strides": [150, 50, 1], "dtype": "f16"},
                               "B": {"strides": [1, 5], "dtype": "uint4", "packing": {"along": "k", "order": "linear"}},
                               "C": {"strides": [100, 24, 1], "offset": 8, "dtype": "f16"}},
                  "scales": {"B": {"block": {"k": 16}, "strides": [1, 2], "dtype": "f16"}},
                  "zeros": {"B": {"dtype": "uint8", "strides": [20, 1]}}}, "wq"),
    "wq_prescaled": ({"name": "wq_prescaled", "dtype": "f16", "gemm": {"m": 2, "n": 33, "k": 48},
                      "operands": {"A": _ROW, "B": {"dtype": "int4", "packing": "gptq", "layout": "row"}, "C": _ROW},
                      "scales": {"B": {"block": {"k": 16}, "layout": "row"}},
                      "zeros": {"B": {"dtype": "f16", "form": "prescaled", "layout": "row"}}}, "wq"),
    # wqtc: the dg layout, two strips a warp (the grid's last strip past N: read as strip 0, never stored), A in
    # 16-byte runs, K ending inside a chunk and a group of 32; every tail with element loads of A (odd row pitch) and
    # byte zero points; one scale a column; GPTQ's words with packed zero points and A in 16-byte runs, K ending
    # inside a chunk and a group; rows at run time; A in 4-byte pairs only, 3 row tiles (a tile's activations at a
    # time), prescaled zero points; 8-bit weights contiguous along k (K_BYTES) in padded columns with K ending inside a
    # 16-k run (its bytes loaded one at a time) and byte zero points; int8 with K whole runs of 16 but not whole chunks
    # (runs past K load nothing), rows at run time, A in elements (odd row pitch).
    "tc_dg": ({"name": "tc_dg", "dtype": "f16", "gemm": {"m": 3, "n": 40, "k": 200},
               "operands": {"A": _ROW16, "B": {"dtype": "int4", "packing": "dg", "align": 16}, "C": _ROW},
               "scales": {"B": {"block": {"k": 32}, "layout": "row"}}, "plan": {"family": "wqtc", "strips": 2}},
              "wqtc"),
    "tc_dg_tails": ({"name": "tc_dg_tails", "dtype": "bf16", "gemm": {"m": 11, "n": 20, "k": 100},
                     "operands": {"A": {"strides": [103, 1]}, "B": {"dtype": "uint4", "packing": "dg", "align": 16},
                                  "C": _ROW},
                     "scales": {"B": {"block": {"k": 32}, "layout": "row"}},
                     "zeros": {"B": {"dtype": "uint8", "layout": "row"}}, "plan": {"family": "wqtc"}}, "wqtc"),
    "tc_dg_channel": ({"name": "tc_dg_channel", "dtype": "bf16", "gemm": {"m": 2, "n": 24, "k": 72},
                       "operands": {"A": _ROW16, "B": {"dtype": "uint4", "packing": "dg", "align": 16}, "C": _ROW},
                       "scales": {"B": {"per": "channel"}}, "zeros": {"B": {"dtype": "uint8", "layout": "row"}},
                       "plan": {"family": "wqtc"}}, "wqtc"),
    "tc_gptq": ({"name": "tc_gptq", "dtype": "f16", "gemm": {"m": 13, "n": 24, "k": 136},
                 "operands": {"A": _ROW16, "B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}, "C": _ROW},
                 "scales": {"B": {"block": {"k": 32}, "layout": "row"}},
                 "zeros": {"B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}}, "plan": {"family": "wqtc"}},
                "wqtc"),
    "tc_gptq_dyn": ({"name": "tc_gptq_dyn", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 16}, "n": 16, "k": 128},
                     "operands": {"A": _ROW16, "B": {"dtype": "int4", "packing": "gptq", "layout": "row"}, "C": _ROW},
                     "scales": {"B": {"block": {"k": 64}, "layout": "row"}}, "plan": {"family": "wqtc"}}, "wqtc"),
    "tc_gptq_pairs": ({"name": "tc_gptq_pairs", "dtype": "f16", "gemm": {"m": 24, "n": 20, "k": 128},
                       "operands": {"A": {"strides": [132, 1], "align": 8},
                                    "B": {"dtype": "uint4", "packing": "gptq", "layout": "row"}, "C": _ROW},
                       "scales": {"B": {"block": {"k": 64}, "layout": "row"}},
                       "zeros": {"B": {"dtype": "f16", "form": "prescaled", "layout": "row"}},
                       "plan": {"family": "wqtc"}}, "wqtc"),
    "tc_bytes_tails": ({"name": "tc_bytes_tails", "dtype": "f16", "gemm": {"m": 5, "n": 20, "k": 100},
                        "operands": {"A": _ROW, "B": {"dtype": "uint8", "strides": [1, 112], "align": 16}, "C": _ROW},
                        "scales": {"B": {"block": {"k": 32}, "layout": "row"}},
                        "zeros": {"B": {"dtype": "uint8", "layout": "row"}}, "plan": {"family": "wqtc"}}, "wqtc"),
    "tc_bytes_int8": ({"name": "tc_bytes_int8", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 16}, "n": 24, "k": 80},
                       "operands": {"A": {"strides": [83, 1]}, "B": {"dtype": "int8", "layout": "col", "align": 16},
                                    "C": _ROW},
                       "scales": {"B": {"per": "channel"}}, "plan": {"family": "wqtc"}}, "wqtc"),
}
WQ_CASES = [n for n, (_, f) in CASES.items() if f == "wq"]
TC_CASES = [n for n, (_, f) in CASES.items() if f == "wqtc"]


def _planned(name: str):
    doc, family = CASES[name]
    return plan_spec(parse_spec(doc, f"<{name}>"), ARCHES["sm_90a"], family)


def _plans(name: str):
    planned = _planned(name)
    family = CASES[name][1]
    return [(label, v, fp) for label, v, fp in kernel_plans(planned.plan, planned.views) if fp.family == family]


def _models(name: str):
    out = models_of_plans(_plans(name))
    assert out
    return out


def _obligations(views, model):
    return obligations(model, references(views), places(views))


def test_the_tc_cases_take_the_variants_they_name():
    plans = {n: [fp for _, _, fp in _plans(n)] for n in TC_CASES}
    dg = plans["tc_dg"][0]
    assert dg.layout == "dg" and dg.ns == 2 and dg.strips % dg.ns and dg.a_vec16 and dg.quant_loads == 1 and 200 % 64
    assert not plans["tc_dg_tails"][0].a_pairs and plans["tc_dg_tails"][0].mt == 2
    assert plans["tc_dg_channel"][0].quant_loads == 0
    gptq = plans["tc_gptq"][0]
    assert gptq.layout == "k_words" and gptq.a_vec16 and gptq.quant_loads == 1 and 136 % 64
    assert len(plans["tc_gptq_dyn"]) > 1
    pairs = plans["tc_gptq_pairs"][0]
    assert pairs.a_pairs and not pairs.a_vec16 and pairs.mt == 3
    k_tails, k_int8 = _plans("tc_bytes_tails")[0][1].k, _plans("tc_bytes_int8")[0][1].k
    assert plans["tc_bytes_tails"][0].layout == "k_bytes" and k_tails % 16 and plans["tc_bytes_tails"][0].quant_loads
    assert all(fp.layout == "k_bytes" for fp in plans["tc_bytes_int8"]) and k_int8 % 16 == 0 and k_int8 % 64


def test_k_bytes_models_have_the_16_byte_run_and_the_byte_tail():
    """K_BYTES as byte_run<T> does it: one 16-byte load of the lane's 16 k of a column (aligned, lane e at k + e)
    where the run lies below K, else byte loads up to K, zero past it; with K whole runs of 16 the byte loads move
    nothing (`b_runs_whole` in their place)."""
    views, fp, model = _models("tc_bytes_tails")[0]
    assert fp.layout == "k_bytes"
    b = {a.ident: a for a in model.accesses if a.operand == "B"}
    assert set(b) == {"b_bytes16", "b_byte"}
    run, tail = b["b_bytes16"], b["b_byte"]
    assert run.width == 16 and run.aligned == 16 and not run.zero_fill and run.place is None
    assert "lane_e" in {x.name for x in walk(run.logical["k"]) if isinstance(x, Var)}
    assert tail.width == 1 and tail.zero_fill and "j" in {r.var.name for r in tail.ranges}
    for a in (run, tail):
        names = {x.name for e in (a.count, a.address, *a.logical.values()) for x in walk(e) if isinstance(x, Let)}
        assert {"byte_k", "byte_n", "B_byte_offset"} <= names, a.ident
    assert {f.ident for f in model.facts} >= {"b_byte_slot_k"}
    # K = 100: lanes t = 2 of chunk 1 read k 96 .. 99 of their columns by bytes, nothing past: every in-view byte of a
    # run crossing K is moved (the zero fill's points are the moved ones).
    obs = {ob.ident: exhaust(ob) for ob in _obligations(views, model) if ob.ident.startswith("b_byte_")}
    assert obs["b_byte_element"].satisfying == obs["b_byte_zero_fill"].satisfying > 0
    for _, _, model in _models("tc_bytes_int8"):
        assert [a.ident for a in model.accesses if a.operand == "B"] == ["b_bytes16"]
        assert {"b_runs_whole", "b_byte_slot_k"} <= {f.ident for f in model.facts}


def test_the_cases_take_the_variants_they_name():
    packings = {n: _plans(n)[0][1].spec.B.packing for n in WQ_CASES}
    assert packings["wq_gptq"].order == "linear" and packings["wq_awq_dyn"].order == "awq"
    assert packings["wq_dg"].order == "dg" and packings["wq_int8"] is None
    dyn = [v.spec.run_time_letter for _, v, _ in _plans("wq_awq_dyn")]
    assert any(rt and rt[1] < rt[2] for rt in dyn)  # a kernel over a range of run-time rows
    assert quant_views(_plans("wq_gptq")[0][1])["B_zeros"].view.packing.along == "n"
    assert _plans("wq_views")[0][1].roles["m"].letters == ("b", "t")


# ---- the layouts: formal.packed's references against dgemm_cli/quant.py's definitions


def _layout_positions(q, k_size: int, n_size: int) -> tuple[np.ndarray, np.ndarray]:
    """([k, n] word, [k, n] nibble) of every value of B's view `q` (blocks of 1), from quant.py: dg_position for the
    dg layout; else the word of the letters' indices (the packed one / 8) and the nibble quant.py's order puts value
    index % 8 at."""
    if q.packing == "dg":
        return quant.dg_position(k_size, n_size)
    kk, nn = np.meshgrid(np.arange(k_size), np.arange(n_size), indexing="ij")
    along = q.view.packing.along
    idx = {"k": kk, "n": nn}
    word = sum((idx[x] // 8 if x == along else idx[x]) * q.view.stride_of(x) for x in q.view.letters)
    nibble = np.asarray([quant.AWQ_ORDER.index(v) if q.packing == "awq" else v for v in range(8)])[idx[along] % 8]
    return word, nibble


@pytest.mark.parametrize("name", ["wq_gptq", "wq_awq_dyn", "wq_dg"])
def test_packed_references_are_quant_layouts(name):
    views = _plans(name)[-1][1]
    q = quant_views(views)["B"]
    k_size, n_size = views.k, views.n
    word, nibble = _layout_positions(q, k_size, n_size)
    kk, nn = Var("k_ref", INDEX), Var("n_ref", INDEX)
    pts = enumerate_points((Range(kk, Const(0), Const(k_size)), Range(nn, Const(0), Const(n_size))))
    ref = at_points(quant_reference(views, q, {"k": kk, "n": nn}), pts)
    assert np.array_equal(ref, word[pts["k_ref"], pts["n_ref"]])
    for place in range(8):
        holds = at_points(value_place(views, q, {"k": kk, "n": nn}, Const(place)), pts)
        assert np.array_equal(holds, nibble[pts["k_ref"], pts["n_ref"]] == place), place


def test_place_formulas_are_quant_tables():
    """value_place's formulas for AWQ's order and the dg nibbles are quant.py's AWQ_ORDER and DG_NIBBLES."""
    assert [2 * (j % 4) + j // 4 for j in range(8)] == list(quant.AWQ_ORDER)
    assert [(8 * (j % 2), 8 * ((j // 2) % 2) + j // 4) for j in range(8)] == list(quant.DG_NIBBLES)


# ---- the models, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("name", list(CASES))
def test_every_obligation_holds_at_every_point(name):
    checked = 0
    for views, _, model in _models(name):
        for ob in _obligations(views, model):
            found = exhaust(ob)
            if found is None:
                continue  # too many points: Coq's alone
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            checked += 1
    assert checked > 20


def _fixed_rows(ranges, rows):
    return tuple(dataclasses.replace(r, lo=Const(rows), hi=Const(rows + 1)) if r.var.name == "mrows" else r
                 for r in ranges)


def _quant_view_words(views, name: str) -> np.ndarray:
    """Every element (word) offset of a weight-only view from its pointer: its word extents and strides, or the dg
    layout's dense run."""
    q = quant_views(views)[name]
    if q.packing == "dg":
        return np.arange(quant.dg_words(views.k, views.n))
    grids = np.meshgrid(*[np.arange(s) for s in q.view.word_sizes], indexing="ij")
    return sum(g.astype(np.int64) * st for g, st in zip(grids, q.view.strides)).ravel()


def _lanes(a, pts: dict) -> list[dict]:
    """The points of `a` once a lane of its vector (the lane variable set), each with its moved mask."""
    n = len(next(iter(pts.values())))
    count = at_points(a.count, pts)
    out = []
    for e in range(a.width):
        env = {**pts, "lane_e": np.full(n, e, dtype=np.int64)}
        out.append((env, count > e))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_maps_enumerated_read_the_layouts_values_and_store_each_output_once(name):
    """Every packed read is the word and nibble quant.py puts (k, n) at, each (k, n) of the view read once a row tile
    (wq) or once (wqtc: the strips below STRIPS); the other loads lie inside their views; the output's stores are its
    view's elements, each once."""
    for views, fp, model in _models(name):
        quant_names = quant_views(views)
        rows_range = [r for a in model.accesses for r in a.ranges if r.var.name == "mrows"][:1]
        sizes = range(int(rows_range[0].lo.value), int(rows_range[0].hi.value)) if rows_range else [None]
        for rows in sizes:
            b_reads = []
            for a in model.accesses:
                pts = enumerate_points(a.ranges if rows is None else _fixed_rows(a.ranges, rows))
                assert pts is not None
                lanes = _lanes(a, pts)
                address = np.concatenate([at_points(a.address, env)[moved] + e for e, (env, moved) in
                                          enumerate(lanes)])
                if a.operand in quant_names:
                    assert np.isin(address, _quant_view_words(views, a.operand)).all(), a.text
                    if a.operand == "B":
                        b_reads.append((a, lanes))
                    continue
                view = view_addresses(views, a.operand, rows)
                if a.kind == "store":
                    assert np.array_equal(np.sort(address), np.sort(view)), f"{model.kernel}: {a.text}"
                else:
                    assert np.isin(address, view).all(), f"{model.kernel}: {a.text}"
            assert b_reads, model.kernel
            _check_b_reads(views, fp, b_reads, quant_names["B"])


def _check_b_reads(views, fp, b_reads, q) -> None:
    """B's reads, over all of a kernel's B accesses ((access, lanes) each; K_BYTES: the 16-byte runs and the bytes
    of the run crossing K): the (word, place) of each in-view (k, n) is quant.py's (8-bit: the element at B's
    strides); each in-view (k, n) read once a
    row tile (wq: a block's rows) or once (wqtc, the strips below STRIPS: the last block's strip past them re-reads
    strip 0)."""
    if q.packing is not None:
        word, nibble = _layout_positions(q, views.k, views.n)
    else:  # whole elements (8-bit): the element at the letters' strides
        kk, nn = np.meshgrid(np.arange(views.k), np.arange(views.n), indexing="ij")
        word, nibble = kk * q.view.stride_of("k") + nn * q.view.stride_of("n"), None
    reads = []
    for a, lanes in b_reads:
        reads += _b_reads_of(views, fp, a, lanes, word, nibble)
    reads_all = np.concatenate(reads)
    tiles = len(np.unique(np.concatenate([r // (views.k * views.n) for r in reads])))
    assert len(np.unique(reads_all)) == len(reads_all) == tiles * views.k * views.n, "each (k, n) read once"


def _b_reads_of(views, fp, a, lanes, word, nibble) -> list[np.ndarray]:
    """The in-view (k, n) one B access reads ((tile K + k) N + n), each lane's; its words and places checked."""
    reads = []
    for e, (env, moved) in enumerate(lanes):
        k, n = (at_points(a.logical[r], env) for r in ("k", "n"))
        inside = moved & (k < views.k) & (n < views.n)
        assert np.array_equal(at_points(a.address, env)[inside] + e, word[k[inside], n[inside]]), a.text
        if nibble is not None:
            assert np.array_equal(at_points(a.place, env)[inside], nibble[k[inside], n[inside]]), a.text
        if fp.family == "wq":
            tile = env["block"] // fp.tiles_n
        else:
            inside &= env["block"] * fp.ns + env["s"] < fp.strips
            tile = np.zeros_like(k)
        reads.append(((tile * views.k + k) * views.n + n)[inside])
    return reads


# ---- Coq


@needs_coq
@pytest.mark.parametrize("name", ["wq_gptq", "wq_awq_dyn", "wq_dg", "wq_views", "tc_gptq", "tc_bytes_tails"])
def test_coq_proves_the_small_models(name, tmp_path):
    for views, _, model in _models(name):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)
        out = subprocess.run([find_coqc(), "-q", Path(r.script).name], cwd=tmp_path, capture_output=True, text=True)
        assert "Proof completed" in out.stdout


@needs_coq
# past the 10 s budget on 2 cores: tc_dg (two strips a warp, one clamped) 60 s, tc_dg_tails 15 s
@pytest.mark.slow(minutes=2)
@pytest.mark.parametrize("name", ["tc_dg", "tc_dg_tails"])
def test_coq_proves_the_slow_dg_models(name, tmp_path):
    for views, _, model in _models(name):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)


def _replace_let(e, name: str, new_value):
    node = next((x for x in walk(e) if isinstance(x, Let) and x.name == name), None)
    return e if node is None else replace(e, node, Let(node.name, new_value(node.value), node.ctype))


def _map_accesses(model, idents: tuple[str, ...], **fields):
    """`model` with each field of the accesses whose ident starts with `idents` mapped by fields[field]."""
    accesses = []
    for a in model.accesses:
        if a.ident.startswith(idents):
            a = dataclasses.replace(a, **{f: fn(getattr(a, f)) for f, fn in fields.items()})
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def _word_off_by_one(model):
    """B's word of k + 1 for k (the packed Role's k / 8 computed from k + 1): off by one word at each 8th k."""
    def shift(e):
        k = next(x for x in walk(e) if isinstance(x, Let) and x.name == "k")
        return replace(e, k, Let("k", k.value + Const(1, ctype=INDEX), k.ctype))
    return _map_accesses(model, ("b_weight",), address=shift)


def _wrong_scale_group(model):
    """The scales read in groups of 8 k where the spec's are 16: the group of k / 8."""
    def regroup(e):
        return _replace_let(e, "S_offset", lambda v: replace(v, Const(16, ctype=INDEX), Const(8, ctype=INDEX)))
    return _map_accesses(model, ("scale",), address=regroup)


def _awq_read_linear(model):
    """AWQ's words read in linear order: the place is the value's index, not the nibble AWQ puts it at."""
    def linear(e):
        return next(x for x in walk(e) if isinstance(x, Let) and x.name == "v")
    return _map_accesses(model, ("b_weight",), place=linear)


def _missing_m_guard(model):
    """T::store without its `gm >= M` test: the tile's rows past the run-time M are written."""
    def unguarded(e):
        return replace(e, next(x for x in walk(e) if isinstance(x, Cmp) and isinstance(x.a, Let) and x.a.name == "gm"),
                       Cmp("<=", Const(0), Const(0)))
    model = _map_accesses(model, ("c_store",), count=unguarded)
    bijections = tuple(dataclasses.replace(b, guard=unguarded(b.guard)) if b.ident == "store_once" else b
                       for b in model.bijections)
    return dataclasses.replace(model, bijections=bijections)


def _k_words_byte(model):
    """K_WORDS: the byte of a register's pair without tile kt's 2 (kt % 2): tiles 1 and 3 read tile 0's and 2's k."""
    def byte_jp(e):
        return _replace_let(e, "byte", lambda v: v.b)
    return _map_accesses(model, ("b_word",), place=byte_jp)


def _byte_run_off_by_one(model):
    """K_BYTES: the 16-byte run loaded from k + 1 (byte_run's p at Weights::k::offset(k + 1)): misaligned, and lane e
    reads k + e + 1."""
    return mutate_accesses(model, "b_bytes16", "address", let_named("byte_k"),
                           lambda x: Let(x.name, x.value + Const(1, ctype=INDEX), x.ctype))


def _byte_tail_through_k(model):
    """K_BYTES: the run crossing K loaded up to k + j <= K: the byte at k = K, past the view (into the column's
    padding, or past B's last column)."""
    accesses = []
    for a in model.accesses:
        if a.ident == "b_byte":
            hit = next(x for x in walk(a.count) if isinstance(x, Cmp) and x.op == "<"
                       and any(isinstance(v, Var) and v.name == "j" for v in walk(x.a)))
            a = dataclasses.replace(a, count=replace(a.count, hit, Cmp("<=", hit.a, hit.b)))
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def _unmasked_activation_row(model):
    """The activations without `if (m >= M) return;`: the row tile's rows past M read past A's view."""
    def unmasked(e):
        hit = next((x for x in walk(e) if isinstance(x, Cmp) and isinstance(x.a, Let) and x.a.name == "a_m"), None)
        return e if hit is None else replace(e, hit, Cmp("<=", Const(0), Const(0)))
    return _map_accesses(model, ("a_",), count=unmasked)


# name -> (mutation, case, the bucket's index among its models, the lemmas that must reject it)
MUTATIONS = {
    "word_off_by_one": (_word_off_by_one, "wq_gptq", 0, ("b_weight",)),
    "wrong_scale_group": (_wrong_scale_group, "wq_gptq", 0, ("scale",)),
    "awq_read_linear": (_awq_read_linear, "wq_awq_dyn", -1, ("b_weight",)),
    "missing_m_guard": (_missing_m_guard, "wq_awq_dyn", -1, ("c_store", "store_once")),
    "k_words_byte": (_k_words_byte, "tc_gptq", 0, ("b_word",)),
    "unmasked_activation_row": (_unmasked_activation_row, "tc_dg_tails", 0, ("a_",)),
    "byte_run_off_by_one": (_byte_run_off_by_one, "tc_bytes_tails", 0, ("b_bytes16",)),
    "byte_tail_through_k": (_byte_tail_through_k, "tc_bytes_tails", 0, ("b_byte_",)),
}


def _mutated(name: str):
    mutate, case, which, lemmas = MUTATIONS[name]
    views, _, model = _models(case)[which]
    return views, mutate(model), lemmas


test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(MUTATIONS, _mutated)


# ---- the models against the kernels' text


def _check_spelled(module, names: list[str]) -> set[str]:
    text = "\n".join((ROOT / "templates" / h).read_text() for h in module.HEADERS)
    spelled = [getattr(module, n) for n in dir(module) if n.startswith("SPELLED") and isinstance(getattr(module, n),
                                                                                                    dict)]
    seen: set[str] = set()
    for name in names:
        for _, _, model in _models(name):
            for a in model.accesses:
                exprs = (a.count, a.address, *a.logical.values(), *a.always, *((a.place,) if a.place else ()))
                for e in exprs:
                    for x in walk(e):
                        if not isinstance(x, Let) or x.name in seen:
                            continue
                        seen.add(x.name)
                        lines = [d[x.name] for d in spelled if x.name in d]
                        if lines:
                            assert any(line in text for line in lines), (x.name, lines)
                        else:
                            assert x.name.endswith("_offset") or cuda(x.value) in text, f"{x.name} = {cuda(x.value)}"
    for d in spelled:
        for line in d.values():
            assert line in text, line
    return seen


def test_wq_header_spells_each_intermediate_as_the_model():
    seen = _check_spelled(wq_index, WQ_CASES)
    assert {"k", "n", "n0", "m0", "col", "row", "at", "v", "lane", "dg_at", "t", "gm", "z_v", "z_at"} <= seen
    text = (ROOT / "templates" / "dg" / "wq.cuh").read_text()
    for line in wq_index.ROLE_LINES:
        assert line in text, line


def test_wqtc_header_spells_each_intermediate_as_the_model():
    seen = _check_spelled(wqtc_index, TC_CASES)
    assert {"chunk", "strip", "base", "word_k", "byte", "quant_k", "col", "a_m", "run_k0", "m", "n", "z_v", "byte_k",
            "byte_n", "B_byte_offset"} <= seen


def _declared_roles(cu: str) -> dict[tuple[str, str], set[str]]:
    """(struct, role) -> the dg::wq::Role types the rendered traits declare (one a kernel namespace)."""
    out: dict[tuple[str, str], set[str]] = {}
    for m in re.finditer(r"struct (Weights|Scales|Zeros) \{(.*?)\n  \};", cu, re.DOTALL):
        for u in re.finditer(r"using (k|n) = (dg::wq::Role<.*?>);", m.group(2), re.DOTALL):
            out.setdefault((m.group(1), u.group(1)), set()).add(re.sub(r"\s+", " ", u.group(2)))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_rendered_roles_are_the_models(name):
    """The Roles the .cu's traits declare for B, its scales and its zero points are the model's segments, and its
    dg::Views of A and C the ones the model's offsets are built from."""
    planned = _planned(name)
    spec = planned.views.spec
    cu = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)[f"{spec.name}.cu"]
    declared = _declared_roles(cu)
    views = _plans(name)[0][1]
    quant_names = quant_views(views)
    structs = {"Weights": "B", "Scales": "B_scales", "Zeros": "B_zeros"}
    expected = {(s, role): {wq_index.wq_role_type(wq_index.wq_segments(views, role, quant_names[q]))}
                for s, q in structs.items() if q in quant_names and quant_names[q].packing != "dg"
                for role in ("k", "n")}
    assert declared == expected
    views_decl = {m["op"]: re.sub(r"\s+", "", m["view"])
                  for m in re.finditer(r"using (?P<op>\w+)_view = (?P<view>dg::View<.*?>);", cu, re.DOTALL)}
    for op in ("A", "C", *(o.name for o in spec.extra_operands)):
        assert views_decl[op] == view_type(planned.views, op), op


# ---- verify --formal


@needs_coq
def test_verify_formal_proves_a_weight_only_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ROOT / "specs" / "weight_only" / "w4_awq_tails.yaml"
    result = CliRunner().invoke(main, ["verify", "--formal", "--jobs", "1", str(spec)])
    assert result.exit_code == 0, result.output
    assert "[wq: 32 columns" in result.output and "Proof completed" in result.output, result.output



@needs_coq
def test_verify_formal_proves_a_checked_8_bit_kernel_and_its_wq_fallback(tmp_path, monkeypatch):
    """int8 as nn.Linear keeps it without `align: 16`: the wqtc kernel behind the launcher's 16-byte check of B
    proves with that alignment known (its 16-byte loads are aligned), and the wq fallback proves with the spec's."""
    monkeypatch.chdir(tmp_path)
    spec = ROOT / "specs" / "weight_only" / "w8_int8_linear_bias_silu.yaml"
    result = CliRunner().invoke(main, ["verify", "--formal", "--jobs", "1", str(spec)])
    assert result.exit_code == 0, result.output
    assert "[wqtc k_bytes" in result.output and "fallback kernel [wq:" in result.output, result.output
    assert "2/2 proved" in result.output, result.output
