"""Formal verification of the host's `cpu` family (families/cpu/index.py, dg/cpu_gemm.hpp), as
tests/test_formal_small.py checks the small-M families: every obligation of each model by exhaustive enumeration at
small sizes (every tail residue, none vacuous), the engine's dispatch replayed over the models' own expressions (each
output stored once at its own element, every load inside its view), Coq's proofs of a few specs, mutations the search
and Coq reject, and the model against the header's and the rendered traits' text."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dgemm_cli.arch import CPU
from dgemm_cli.cli import main
from dgemm_cli.families.cpu import SMALL_M, engine_paths, lead_slot, rows_ranges
from dgemm_cli.families.cpu import index as cpu_index
from dgemm_cli.families.cpu.cost import MICRO_TILES
from dgemm_cli.formal.check import PROVED, kernel_plans, prove_model, references
from dgemm_cli.formal.expr import Const, Ite, Let, Min, evaluate, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import enumerate_points, exhaust, search
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.render import render_sources
from dgemm_cli.renderers.host import SLOTS
from dgemm_cli.spec import parse_spec

from .formal_support import models_of_plans, mutate_accesses, mutation_tests, needs_coq, view_addresses

ROOT = Path(__file__).resolve().parents[1]
HEADERS = "\n".join((ROOT / "templates" / h).read_text() for h in cpu_index.HEADERS)
_ROW = {"layout": "row"}

# Small problems, each through a path of the engine: tails along m, n and k on every micro-tile; C column-major (the
# product C^T = B^T A^T); every role two segments in some operand; rows at run time with a batch, D, beta, a bias and
# a residual at an offset (small-M streaming B's rows up to 4 rows, blocked past them); rows at run time with C
# contiguous along m and B along neither n nor k (blocked A B at one row, C^T = B^T A^T past it); decode through
# nn.Linear's weight (small-M dot products); pinned block sizes.
CASES = {
    "dense": {"name": "dense", "dtype": "f32", "gemm": {"m": 9, "n": 20, "k": 5}},
    "ccol": {"name": "ccol", "dtype": "bf16", "gemm": {"m": 10, "n": 6, "k": 3},
             "operands": {"A": _ROW, "B": _ROW, "C": {"layout": "col"}}},
    "permuted": {"name": "permuted", "dtype": "f16", "contraction": "abcd,dbef->aecf",
                 "sizes": {"a": 2, "b": 2, "c": 3, "d": 2, "e": 2, "f": 3}},
    "dyn_batch": {"name": "dyn_batch", "dtype": "f32", "contraction": "mbk,bkn->mbn",
                  "sizes": {"m": {"min": 1, "max": 7}, "b": 2, "k": 4, "n": 6}, "beta": 0.5,
                  "operands": {"C": {"offset": 3}, "D": {}},
                  "epilogue": [{"bias": {"letters": "n"}}, {"residual": {"letters": "mbn"}}]},
    "dyn_ccol": {"name": "dyn_ccol", "dtype": "f32", "contraction": "mk,kn->mn",
                 "sizes": {"m": {"min": 1, "max": 9}, "k": 4, "n": 5},
                 "operands": {"A": {"strides": [4, 1]}, "B": {"strides": [2, 20]}, "C": {"strides": [1, 9]}}},
    "dots": {"name": "dots", "dtype": "f16", "contraction": "ti,oi->to", "sizes": {"t": 2, "i": 9, "o": 5}},
    "pinned": {"name": "pinned", "dtype": "f32", "gemm": {"m": 6, "n": 40, "k": 5},
               "plan": {"kc": 64, "mc": 48, "nc": 256}},
}
# Obligations no point reaches at a case's sizes.
UNREACHED: dict[str, tuple[str, ...]] = {}


def _plans(name: str):
    spec = parse_spec({"arch": "cpu", **CASES[name]}, f"<{name}>")
    planned = plan_spec(spec, CPU, "cpu")
    return kernel_plans(planned.plan, planned.views)


def _models(name: str):
    return models_of_plans(_plans(name), "cpu")


def _model(name: str, label: str):
    return next((v, m) for v, _, m in _models(name) if label in m.kernel)


def test_the_cases_take_the_paths_they_name():
    paths = {name: engine_paths(_plans(name)[0][1]) for name in CASES}
    assert paths["dense"].blocked == ((False, 9, 9),) and paths["dense"].small is None
    assert paths["ccol"].blocked == ((True, 10, 10),)
    assert paths["dyn_batch"].small == "n" and paths["dyn_batch"].small_rows == (1, 4)
    assert paths["dyn_batch"].blocked == ((False, 5, 7),)
    assert paths["dyn_ccol"].small is None and paths["dyn_ccol"].blocked == ((False, 1, 1), (True, 2, 9))
    assert paths["dots"].small == "k" and not paths["dots"].blocked
    kernels = [m.kernel for _, _, m in _models("permuted")]
    assert any("scatter tables" in k for k in kernels) and sum("blocked" in k for k in kernels) == len(MICRO_TILES)


# ---- the models, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("name", list(CASES))
def test_every_obligation_holds_at_every_point(name):
    """Each obligation holds at every point of its ranges (every residue of the tails, every block size and panel
    origin), and its hypotheses hold somewhere (none is vacuous)."""
    checked = 0
    for views, _, model in _models(name):
        for ob in obligations(model, references(views)):
            found = exhaust(ob)
            assert found is not None, f"{model.kernel}: {ob.ident}: too many points to enumerate"
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            if not ob.ident.startswith(UNREACHED.get(name, ("-",))):
                assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            checked += 1
    assert checked > 40


def _table(views, operand: str, role: str, extent: int) -> np.ndarray:
    i = np.arange(extent, dtype=np.int64)
    return np.broadcast_to(np.asarray(evaluate(cpu_index._at(views, operand, role, cpu_index._ix("i")), {"i": i})),
                           (extent,))


def _fix(ranges, values: dict) -> tuple:
    return tuple(dataclasses.replace(r, lo=Const(values[r.var.name]), hi=Const(values[r.var.name] + 1))
                 if r.var.name in values else r for r in ranges)


@dataclasses.dataclass(frozen=True)
class Moves:
    """An address over ranges where `count` > 0: an access's, or a run's (its fact `*_is_one`: the address and, as
    the count, its hypotheses, the is_contiguous instances the engine's unit_steps checks)."""

    operand: str
    ranges: tuple
    count: object
    address: object


def _finish_moves(model, tag: str) -> tuple[dict[str, Moves], dict[str, Moves]]:
    """The runs' and the one-output walk's moves of each out slot in walk order `tag`."""
    runs = {a.operand: Moves(a.operand, a.ranges, a.count, a.address) for a in model.accesses
            if a.ident.endswith(f"_run_{tag}")}
    for f in model.facts:
        if f.ident.endswith(f"_run_{tag}_is_one"):
            x = next(o for o in cpu_index.SLOT if f.ident.startswith(f"{o.lower()}_"))
            runs[x] = Moves(x, f.ranges, Ite(f.hyps, Const(1), Const(0)), f.goal.parts[1].a)
    ones = {a.operand: Moves(a.operand, a.ranges, a.count, a.address) for a in model.accesses
            if a.ident.endswith(f"_one_{tag}")}
    return runs, ones


def _moved(a, values: dict) -> np.ndarray:
    pts = enumerate_points(_fix(a.ranges, values))
    assert pts is not None
    n = len(next(iter(pts.values())))
    count = np.broadcast_to(np.asarray(evaluate(a.count, pts)), (n,))
    address = np.broadcast_to(np.asarray(evaluate(a.address, pts)), (n,))
    return address[count > 0], bool((count > 0).all())


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _blocks(views, paths, m: int):
    """The blocks (b, i0, rows, j0, cols) the engine hands finish_block at row extent m, in the untransposed names:
    the blocked path's tiles for each micro-tile and a few NC blocks, or small-M's column shares for teams of 1..3."""
    n = views.n
    if paths.small and m <= SMALL_M:
        for team in (1, 2, 3):
            share = _ceil(_ceil(n, team), cpu_index.UNIT) * cpu_index.UNIT
            for tid in range(team):
                j_lo = min(n, share * tid)
                j_hi = min(n, j_lo + share)
                if j_hi > j_lo:
                    yield f"small team {team}", (0, m, j_lo, j_hi - j_lo)
        return
    transposed = next(t for t, lo, hi in paths.blocked if lo <= m <= hi)
    p_m, p_n = (n, m) if transposed else (m, n)
    for isa, (mr, nr) in MICRO_TILES.items():
        for nc_tiles in sorted({1, -(-p_n // nr)}):
            tiles = []
            for jc in range(0, p_n, nc_tiles * nr):
                nc = min(nc_tiles * nr, p_n - jc)
                for jt in range(-(-nc // nr)):
                    j = jc + jt * nr
                    for it in range(-(-p_m // mr)):
                        i = it * mr
                        block = (i, min(mr, p_m - i), j, min(nr, p_n - j))
                        tiles.append((j, block[3], i, block[1]) if transposed else block)
            for t in tiles:
                yield f"{isa} nc_tiles {nc_tiles}", t


@pytest.mark.parametrize("name", list(CASES))
def test_the_engines_dispatch_stores_each_output_once_and_loads_inside_views(name):
    """The engine's own choices replayed over the models' expressions: for every row extent, every block the blocked
    path (each micro-tile, a few NC) or small-M hands finish_block, the walk order and the run/one variant the engine's
    is_contiguous checks pick; the stores land on the output view's elements, each exactly once, and every read lies
    inside its view. The packing reads and small-M's reads lie inside their views too."""
    found = _models(name)
    views = found[0][0]
    paths = engine_paths(views)
    finish = next(m for _, _, m in found if "finish_block" in m.kernel)
    first = lead_slot(views)
    out = views.spec.output.name
    rt = rows_ranges(views)
    extents = [views.m] if rt is None else [r * rt[2] for r in range(rt[0], rt[1] + 1)]
    for m in extents:
        rows_of = None if rt is None else m // rt[2]
        rows_value = {} if rt is None else {"mrows": rows_of}
        m_at, n_at = _table(views, first, "m", m), _table(views, first, "n", views.n)
        per_round: dict[str, list] = {}
        for label, (i0, rows, j0, cols) in _blocks(views, paths, m):
            along_m = (rows > 1 and np.array_equal(m_at[i0:i0 + rows], m_at[i0] + np.arange(rows))
                       and not np.array_equal(n_at[j0:j0 + cols], n_at[j0] + np.arange(cols)))
            tag = "n" if along_m else "m"
            values = {**rows_value, "i0": i0, "rows": rows, "j0": j0, "cols": cols}
            for b in range(views.batch):
                if views.batch > 1:
                    values["b"] = b
                run, one = _finish_moves(finish, tag)
                unit = all(ok for _, ok in (_moved(a, values) for a in run.values()))
                for x, a in (run if unit else one).items():
                    moved, _ = _moved(a, values)
                    assert len(moved) == rows * cols, (label, x, unit)
                    if x == out:
                        per_round.setdefault(label, []).append(moved)
                    else:
                        assert np.isin(moved, view_addresses(views, x, rows_of) + views.spec.operand(x).offset
                                       ).all(), (label, x, unit)
        expected = np.sort(view_addresses(views, out, rows_of) + views.spec.operand(out).offset)
        assert per_round
        for label, parts in per_round.items():
            assert np.array_equal(np.sort(np.concatenate(parts)), expected), (m, label)
    for v, _, model in found:
        for a in model.accesses:
            if "finish_block" in model.kernel:
                continue
            pts = enumerate_points(a.ranges)
            assert pts is not None
            n = len(next(iter(pts.values())))
            count = np.broadcast_to(np.asarray(evaluate(a.count, pts)), (n,))
            address = np.broadcast_to(np.asarray(evaluate(a.address, pts)), (n,))
            mrows = pts.get("mrows")
            if mrows is None:
                view = view_addresses(v, a.operand) + v.spec.operand(a.operand).offset
                assert np.isin(address[count > 0], view).all(), (model.kernel, a.ident)
            else:
                for r in np.unique(mrows):
                    view = view_addresses(v, a.operand, int(r)) + v.spec.operand(a.operand).offset
                    assert np.isin(address[(count > 0) & (mrows == r)], view).all(), (model.kernel, a.ident)


# ---- Coq


# (Coq's other proof here is verify --formal's of "dots": its finish_block and small-M models.)
PROVED_CASES = [("dense", "pack_panel"), ("permuted", "scatter tables")]


@needs_coq
@pytest.mark.parametrize("name,label", PROVED_CASES)
def test_coq_proves_the_small_models(name, label, tmp_path):
    for views, _, model in _models(name):
        if label in model.kernel:
            r = prove_model(views, model, tmp_path)
            assert r.status == PROVED, (model.kernel, r.failed, r.obligation, r.counterexample, r.reason)


@needs_coq
def test_verify_formal_proves_a_host_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "dots.yaml"
    spec.write_text(repr({"arch": "cpu", **CASES["dots"]}).replace("'", '"'))
    result = CliRunner().invoke(main, ["verify", "--formal", "--jobs", "1", str(spec)])
    assert result.exit_code == 0, result.output
    assert "(cpu: small-M, dot products with B's columns)" in result.output and "Proof completed" in result.output


# ---- mutations: each rejected by the search and by Coq, with the obligation and values that break it


def _kc_off_by_one(model):
    """kc = min(bl.kc, p.k - pc + 1): the k loop of the last kc block runs one step past K."""
    def wider(a):
        if not a.ident.startswith("a_pack"):
            return a
        ranges = tuple(dataclasses.replace(r, hi=Let("kc", Min(r.hi.value.a, r.hi.value.b + 1, r.hi.value.ctype),
                                                     r.hi.ctype)) if r.var.name == "k" else r for r in a.ranges)
        return dataclasses.replace(a, ranges=ranges)
    return dataclasses.replace(model, accesses=tuple(wider(a) for a in model.accesses))


def _wrong_stride(model):
    """A's m scatter vector with the stride of m one too large (p.m_at[kA][i] = i x (K + 1))."""
    return mutate_accesses(model, "a_pack", "address",
                           lambda x: isinstance(x, Const) and x.value == 5 and x.ctype == "index",
                           lambda x: Const(6, x.name, x.ctype))


def _no_tail_mask(model):
    """pack_panel's gather reads every line of the panel: no `l < lines` past the role's end."""
    return dataclasses.replace(model, accesses=tuple(dataclasses.replace(a, count=Const(1)) if a.ident == "a_pack"
                                                     else a for a in model.accesses))


def _no_run_clamp(model):
    """finish_block's last run of a line takes kRun outputs, not min(kRun, steps - q0): q's bound `run` unclamped."""
    def unclamped(f):
        if not f.ident.startswith("c_store_run"):
            return f
        return dataclasses.replace(f, ranges=tuple(dataclasses.replace(r, hi=r.hi.value.a) if r.var.name == "q"
                                                   else r for r in f.ranges))
    return dataclasses.replace(model, facts=tuple(unclamped(f) for f in model.facts))


MUTATIONS = {
    "kc_off_by_one": ("dense", "pack_panel", _kc_off_by_one, "a_pack"),
    "wrong_stride": ("dense", "pack_panel", _wrong_stride, "a_pack"),
    "no_tail_mask": ("dense", "pack_panel", _no_tail_mask, "a_pack"),
    "no_run_clamp": ("dense", "finish_block", _no_run_clamp, "c_store_run"),
}


def _mutated(name: str):
    case, label, mutate, lemmas = MUTATIONS[name]
    views, model = _model(case, label)
    return views, mutate(model), lemmas


test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(MUTATIONS, _mutated)


def _c_beside_d_with_beta_0():
    doc = {"name": "d_beta0", "arch": "cpu", "dtype": "f32", "gemm": {"m": 6, "n": 5, "k": 3},
           "operands": {"A": _ROW, "B": _ROW, "C": {"layout": "col"}, "D": _ROW}}
    spec = parse_spec(doc, "<d_beta0>")
    planned = plan_spec(spec, CPU, "cpu")
    return next((v, m) for v, _, m in models_of_plans(kernel_plans(planned.plan, planned.views), "cpu")
                if "finish_block" in m.kernel)


def test_c_beside_d_is_read_at_its_element_for_any_beta():
    """A spec with D and beta 0 still gives C its out slot: the C API takes beta at run time, and finish_run reads C
    at start[kC] + q wherever beta != 0 (without the slot, start[kC] stayed 0: C's first elements, its offset
    ignored)."""
    views, model = _c_beside_d_with_beta_0()
    broken = [ob for ob in obligations(model, references(views)) if ob.ident.startswith("c_load")]
    assert broken and not any(search(ob, tries=2000) for ob in broken)


# ---- the model against the header's and the rendered traits' text


def test_header_holds_the_models_lines():
    text = HEADERS
    for name, line in cpu_index.SPELLED.items():
        assert line in text, name
    for line in cpu_index.ADDRESS_LINES:
        assert line in text, line
    assert f"constexpr int64_t kRun = {cpu_index.K_RUN};" in text
    assert f"constexpr int64_t chunk = {cpu_index.CHUNK};" in text
    assert f"constexpr int64_t unit = {cpu_index.UNIT};" in text
    assert f"constexpr int64_t kSmallM = {SMALL_M};" in text
    for mr, nr in MICRO_TILES.values():
        assert re.search(rf"constexpr int kMR = {mr};.*\n(.*\n)?constexpr int kNR = {nr};", text), (mr, nr)


def test_every_intermediate_is_spelled():
    """Each Let the models name has its header line in SPELLED."""
    seen = set()
    for name in CASES:
        for _, _, model in _models(name):
            exprs = [e for a in model.accesses for e in (a.count, a.address, *a.logical.values(), *a.always)]
            exprs += [e for b in model.bijections for e in (*b.image, *(r.hi for r in b.ranges if r.hi is not None))]
            exprs += [f.goal for f in model.facts]
            for e in exprs:
                seen |= {x.name for x in walk(e) if isinstance(x, Let)}
    assert seen and seen <= set(cpu_index.SPELLED), sorted(seen - set(cpu_index.SPELLED))


def _shape(cpp: str) -> tuple[dict[str, list], list[int], str]:
    """The traits' kShape (role -> [(size, strides per slot)], outer -> inner), offsets and kOutSlots."""
    roles = {}
    for role in ("batch", "m", "n", "k"):
        line = re.search(rf"/\* {role} \*/ (.*),\n", cpp).group(1)
        roles[role] = [(int(s), [int(x) for x in st.split(",")])
                       for s, st in re.findall(r"\{(\d+), \{([-\d, ]+)\}\}", line)]
    offsets = [int(x) for x in re.search(r"/\* offset \*/ \{ ([-\d, ]+) \}", cpp).group(1).split(",")]
    return roles, offsets, re.search(r"kOutSlots = (.*);", cpp).group(1)


@pytest.mark.parametrize("name", list(CASES))
def test_rendered_traits_are_the_models(name):
    """The traits' Shape holds the segments (sizes, and each slot's strides) the model indexes by, each slot's offset
    the model's, and kOutSlots the model's out slots."""
    spec = parse_spec({"arch": "cpu", **CASES[name]}, f"<{name}>")
    planned = plan_spec(spec, CPU, "cpu")
    cpp = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)[f"{spec.name}.cpp"]
    roles, offsets, out = _shape(cpp)
    views = planned.views
    present = {"A", "B", "C", *(op.name for op in spec.extra_operands)}
    for role, segs in roles.items():
        for s, slot in enumerate(SLOTS):
            if slot not in present:
                continue
            model = list(reversed(cpu_index._segs_inner_first(views, slot, role)))
            assert [(size, st[s]) for size, st in segs] == model, (role, slot)
    assert offsets == [spec.operand(x).offset if x in present else 0 for x in SLOTS]
    assert out == " | ".join(f"(1u << dg::cpu::{cpu_index.SLOT[x]})" for x in cpu_index.out_slots(views))
