"""Formal verification of the FP8 families' index models (families/fp8_cta/index.py, families/fp8_hopper/index.py;
issue 44), as tests/test_formal_hopper.py checks the hopper family's: every obligation of each variant by exhaustive
enumeration at small sizes (none vacuous), the scale loads enumerated inside their views, Coq's proofs, mutations Coq
rejects with a readable obligation, the model against the headers' text and the rendered scale views, and
`verify --formal` on the repository's FP8 specs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dgemm_cli.arch import ARCHES
from dgemm_cli.cli import main
from dgemm_cli.families.cta import index as cta_index
from dgemm_cli.families.fp8_cta import index as fp8_cta_index
from dgemm_cli.families.fp8_hopper import index as fp8_hopper_index
from dgemm_cli.formal.check import PROVED, kernel_plans, prove_model, references
from dgemm_cli.formal.expr import Cmp, Const, Let, Mod, Var, cuda, replace, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import enumerate_points, exhaust
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import parse_spec

from .formal_support import at_points, models_of_plans, mutation_tests, needs_coq

ROOT = Path(__file__).resolve().parents[1]
_ROW16 = {"layout": "row", "align": 16}
_COL16 = {"layout": "col", "align": 16}


def _spec(name: str, **doc) -> dict:
    return {"name": name, "arch": "sm_90a", "dtype": "e4m3", **doc}


# Small problems each FP8 family plans in its variants (`plan:` pins the family). fp8_cta: a batch of mn-contiguous
# operands (both gathers walk the rows) with 1 x 64 and 16 x 64 scale blocks over the batch; k-contiguous cp.async
# loaders behind a pointer check (the fallback gathers beside them) with DeepGEMM's 1 x 128 and 128 x 128 blocks
# and tails in every role; an NCHW convolution (m over three letters) with scales constant along k. fp8_hopper: 1 x 128
# rows (a scale a row) and 128 x 128 blocks (one a tile) with tails; per-channel scales (constant along k, one a row
# and a column); per-tensor scales with beta; 128 x 128 blocks of A (one a tile) and a scale a column of B and 128 k,
# with the packed store; the K split over a cluster of 2 (3 k-iterations: slices of 2 and 1) with 1 x 128 and
# 128 x 128 blocks and tails.
SMALL = {
    "cta_batched_mn": _spec("cta_batched_mn", contraction="bkm,bkn->bmn", sizes={"b": 2, "m": 20, "n": 24, "k": 136},
                            operands={"A": {}, "B": {}, "C": {"dtype": "f16"}}, beta=0.5,
                            scales={"A": {"block": {"k": 64}, "layout": "col"}, "B": {"block": {"n": 16, "k": 64}}},
                            plan={"family": "fp8_cta"}),
    "cta_blocks_checked": _spec("cta_blocks_checked", gemm={"m": 40, "n": 24, "k": 200},
                                operands={"A": {"layout": "row"}, "B": {"layout": "col"},
                                          "C": {"layout": "row", "dtype": "bf16"}},
                                scales={"A": {"block": {"k": 128}, "layout": "col"},
                                        "B": {"block": {"n": 128, "k": 128}}}, plan={"family": "fp8_cta"}),
    "cta_nchw_per_channel": _spec("cta_nchw_per_channel", contraction="nchw,kc->nkhw",
                                  sizes={"n": 2, "c": 48, "h": 3, "w": 5, "k": 24},
                                  operands={"A": {}, "B": {}, "C": {"dtype": "f32"}},
                                  scales={"A": {"per": "tensor"}, "B": {"per": "channel"}}, plan={"family": "fp8_cta"}),
    "hopper_blocks_tails": _spec("hopper_blocks_tails", gemm={"m": 72, "n": 48, "k": 144},
                                 operands={"A": _ROW16, "B": _COL16, "C": {"layout": "row", "dtype": "bf16"}},
                                 scales={"A": {"block": {"k": 128}, "layout": "col"},
                                         "B": {"block": {"n": 128, "k": 128}}}, plan={"family": "fp8_hopper"}),
    "hopper_per_channel": _spec("hopper_per_channel", gemm={"m": 72, "n": 48, "k": 256},
                                operands={"A": _ROW16, "B": _COL16,
                                          "C": {"layout": "row", "dtype": "f32", "align": 16}},
                                scales={"A": {"per": "channel"}, "B": {"per": "channel"}},
                                plan={"family": "fp8_hopper"}),
    "hopper_per_tensor": _spec("hopper_per_tensor", gemm={"m": 72, "n": 48, "k": 144}, beta=0.5,
                               operands={"A": _ROW16, "B": _COL16, "C": {"layout": "row", "dtype": "f16"}},
                               scales={"A": {"per": "tensor"}, "B": {"per": "tensor"}}, plan={"family": "fp8_hopper"}),
    "hopper_column_scales": _spec("hopper_column_scales", gemm={"m": 64, "n": 96, "k": 256},
                                  operands={"A": _ROW16, "B": _COL16,
                                            "C": {"layout": "row", "dtype": "bf16", "align": 16}},
                                  scales={"A": {"block": {"m": 128, "k": 128}}, "B": {"block": {"k": 128}}},
                                  plan={"family": "fp8_hopper"}),
    "hopper_split": _spec("hopper_split", gemm={"m": 72, "n": 48, "k": 272},
                          operands={"A": _ROW16, "B": _COL16, "C": {"layout": "row", "dtype": "bf16", "align": 16}},
                          scales={"A": {"block": {"k": 128}, "layout": "col"}, "B": {"block": {"n": 128, "k": 128}}},
                          plan={"family": "fp8_hopper", "k_splits": 2}),
}
FAMILY = {name: doc["plan"]["family"] for name, doc in SMALL.items()}


def _planned(doc: dict):
    spec = parse_spec(doc, f"<{doc['name']}>")
    return spec, plan_spec(spec, ARCHES["sm_90a"])


def _models(name: str):
    _, planned = _planned(SMALL[name])
    out = models_of_plans(kernel_plans(planned.plan, planned.views), FAMILY[name])
    assert out, name
    return out


def test_the_small_specs_take_the_variants_they_name():
    plans = {name: [fp for _, fp, _ in _models(name)] for name in SMALL}
    batched = plans["cta_batched_mn"][0]
    assert batched.gathers_along_rows == ("A", "B") and all(s.k_varying for s in batched.scales)
    checked = plans["cta_blocks_checked"]
    assert checked[0].runtime_dispatch and len(checked) == 2 and checked[0].a.kind == "cp_async"
    assert not any(s.k_varying for s in plans["cta_nchw_per_channel"][0].scales)
    tails = plans["hopper_blocks_tails"][0]
    sa, sb = tails.scales
    assert not sa.uniform(tails.block_m) and sb.uniform(tails.block_n) and sa.along_k and sb.along_k
    channel = plans["hopper_per_channel"][0]
    assert not any(s.along_k or s.uniform(64) for s in channel.scales)
    assert all(s.mn_block == 0 for s in plans["hopper_per_tensor"][0].scales)
    columns = plans["hopper_column_scales"][0]
    assert columns.packed_store and columns.scales[0].uniform(columns.block_m)
    assert not columns.scales[1].uniform(columns.block_n)
    split = plans["hopper_split"][0]
    assert (split.k_splits, split.kt_per_split, split.k_iters) == (2, 2, 3)


# ---- the models, by exhaustive enumeration at small sizes


SCALE_OBLIGATIONS = ("a_scale_load_in_bounds", "a_scale_load_element", "a_scale_applied", "b_scale_load_in_bounds",
                     "b_scale_load_element", "b_scale_applied")


@pytest.mark.parametrize("name", list(SMALL))
def test_every_obligation_holds_at_every_point(name):
    """Each obligation holds at every point of its ranges and its hypotheses hold somewhere (none is vacuous); the
    scales' obligations are all enumerated."""
    for views, _, model in _models(name):
        obs = obligations(model, references(views))
        enumerated = set()
        for ob in obs:
            found = exhaust(ob)
            if found is None:
                continue  # too many points: Coq's alone
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
            enumerated.add(ob.ident)
        assert set(SCALE_OBLIGATIONS) <= enumerated, set(SCALE_OBLIGATIONS) - enumerated
        assert len(enumerated) > 40
        if FAMILY[name] == "fp8_hopper":
            assert {"a_scale_index", "b_scale_index", "a_tma_element", "k_tiles_cover_into"} <= enumerated


def _scale_addresses(views, operand: str) -> np.ndarray:
    """Every element offset of `operand`'s scale view from its first element, from the spec's scale view."""
    view = next(sc.view for sc in views.spec.scales if sc.operand == operand)
    if not view.sizes:
        return np.zeros(1, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(s) for s in view.sizes], indexing="ij")
    return sum(g.astype(np.int64) * st for g, st in zip(grids, view.strides)).ravel()


@pytest.mark.parametrize("name", list(SMALL))
def test_scale_loads_enumerated_lie_inside_the_scale_views_and_reach_each_scale(name):
    """Every scale the kernel loads is an element of its view (numpy, from the spec's scale view), and every element
    of the view some product needs is loaded."""
    for views, _, model in _models(name):
        for a in model.accesses:
            if not a.ident.endswith("_scale_load"):
                continue
            pts = enumerate_points(a.ranges)
            assert pts is not None
            count, address = at_points(a.count, pts), at_points(a.address, pts)
            loaded = np.unique(address[count > 0])
            view = _scale_addresses(views, a.operand[0])
            assert loaded.size and np.isin(loaded, view).all(), f"{model.kernel}: {a.text}"
            assert np.array_equal(loaded, np.unique(view)), f"{model.kernel}: {a.text} misses scales"


# ---- Coq


@needs_coq
@pytest.mark.parametrize("name", ["cta_batched_mn", "cta_blocks_checked", "hopper_blocks_tails",
                                  "hopper_column_scales", "hopper_split"])
def test_coq_proves_the_small_models(name, tmp_path):
    for views, _, model in _models(name):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (model.kernel, r.failed, r.obligation, r.counterexample, r.reason)


# ---- mutations: each must be rejected, with a readable obligation and the values that break it


def _scale_clamp_past_the_view(model):
    """ScaleRows::locate clamping a tile's rows to M, not M - 1: a tail row past the view reads past A_scales."""
    accesses = []
    for a in model.accesses:
        if a.ident == "a_scale_load":
            last = next(x for x in walk(a.address) if isinstance(x, Let) and x.name == "last")
            wrong = Let("last", last.value.a, last.ctype)  # M - 1 -> M
            a = dataclasses.replace(a, address=replace(a.address, last, wrong),
                                    logical={r: replace(i, last, wrong) for r, i in a.logical.items()})
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def _factor_drops_the_column_parity(model):
    """factor() taking fb[(i / 4) * 2] for accumulator i, not fb[(i / 4) * 2 + i % 2]: odd columns are multiplied
    by their even neighbour's scale."""
    facts = []
    for f in model.facts:
        if f.ident == "b_scale_applied":
            assert isinstance(f.goal, Cmp)
            parity = next(x for x in walk(f.goal.a) if isinstance(x, Mod) and isinstance(x.a, Var)
                          and x.a.name == "acc_i" and isinstance(x.b, Const) and x.b.value == 2)
            f = dataclasses.replace(f, goal=Cmp(f.goal.op, replace(f.goal.a, parity, Const(0)), f.goal.b))
        facts.append(f)
    return dataclasses.replace(model, facts=tuple(facts))


def _k_tile_scale_one_ahead(model):
    """The k-tile's scales loaded at index_t(kt + 1) * T::BK: each promotion takes the next k block's scale (and
    the last k-tile reads past B_scales' k blocks)."""
    accesses = []
    for a in model.accesses:
        if a.ident == "b_scale_load":
            kt = next(x for x in walk(a.address) if isinstance(x, Var) and x.name == "kt")
            a = dataclasses.replace(a, address=replace(a.address, kt, kt + 1))
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


MUTATIONS = {
    # m = 40 is no multiple of the 16-row tile: a clamp to M loads A_scales' row 40.
    "scale_clamp_past_the_view": ("cta_blocks_checked", _scale_clamp_past_the_view,
                                  ("a_scale_load_in_bounds", "a_scale_load_element")),
    # B's scales one a column: the odd columns of each 8-column group take the even ones' scale.
    "factor_drops_the_column_parity": ("hopper_column_scales", _factor_drops_the_column_parity, ("b_scale_applied",)),
    # k-tiles of 64 under B's k blocks of 64: the next block's scale is another scale.
    "k_tile_scale_one_ahead": ("cta_batched_mn", _k_tile_scale_one_ahead,
                               ("b_scale_load_in_bounds", "b_scale_load_element")),
}


def _mutated(name: str):
    spec_name, mutate, lemmas = MUTATIONS[name]
    views, _, model = _models(spec_name)[0]
    return views, mutate(model), lemmas


test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(MUTATIONS, _mutated)


# ---- the model against the kernel's text


def _text(*headers: str) -> str:
    return "\n".join((ROOT / "templates" / h).read_text() for h in headers)


def _lets(model, idents: tuple[str, ...] | None = None):
    """The Lets of the model's accesses (those whose ident starts with one of `idents`), by (name, value)."""
    seen = {}
    for a in model.accesses:
        if idents is not None and not a.ident.startswith(idents):
            continue
        for e in (a.count, a.address, *a.logical.values(), *a.always):
            for x in walk(e):
                if isinstance(x, Let):
                    seen.setdefault((x.name, cuda(x.value)), x)
    return seen


def test_the_cta_headers_spell_each_intermediate_as_the_model():
    """Each Let of an fp8_cta model is spelled in dg/fp8_cta.cuh (or dg/cta.cuh, whose block the kernel runs) as the
    model prints its value, or the lines SPELLED names (the fp8 model's, then the cta model's) are there."""
    fp8, cta = _text(fp8_cta_index.HEADER), _text(cta_index.HEADER)
    for lines in fp8_cta_index.SPELLED.values():
        for line in lines:
            assert line in fp8 or line in cta, line
    names = set()
    for name in SMALL:
        if FAMILY[name] != "fp8_cta":
            continue
        for _, _, model in _models(name):
            for (let_name, value), _ in _lets(model).items():
                names.add(let_name)
                if let_name in fp8_cta_index.SPELLED:
                    continue
                if let_name in cta_index.SPELLED:
                    assert cta_index.SPELLED[let_name] in cta, let_name
                elif not let_name.endswith("_offset") and let_name != "M":
                    assert value in fp8 or value in cta, f"{let_name} = {value}"
    assert {"x", "last", "at[i][h]", "kk", "batch", "scale_offset", "row", "col", "c", "go", "gk"} <= names, names


def test_the_hopper_header_spells_each_scale_intermediate_as_the_model():
    """Each Let of the fp8_hopper scale loads is spelled in dg/fp8_hopper.cuh as the model prints it, or its SPELLED
    lines are there (the loads, grid and store are the hopper model's, checked by tests/test_formal_hopper.py)."""
    text = _text(fp8_hopper_index.HEADER, "dg/hopper_common.cuh")
    for lines in fp8_hopper_index.SPELLED.values():
        for line in lines:
            assert line in text, line
    names = set()
    for name in SMALL:
        if FAMILY[name] != "fp8_hopper":
            continue
        for _, _, model in _models(name):
            for (let_name, value), _ in _lets(model, ("a_scale", "b_scale")).items():
                names.add(let_name)
                if let_name not in fp8_hopper_index.SPELLED and not let_name.startswith("tile."):
                    assert value in text, f"{let_name} = {value}"
    assert {"row", "col", "mn", "at", "warp", "lane"} <= names, names


def _rendered(name: str) -> str:
    spec, planned = _planned(SMALL[name])
    files = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)
    return files[f"{spec.name}.cu"]


@pytest.mark.parametrize("name", [n for n in SMALL if FAMILY[n] == "fp8_cta"])
def test_rendered_scale_roles_are_the_models(name):
    """The traits' ScaleRoles (what dg/fp8_cta.cuh's offsets walk) are the ScaleSegs the model's offsets are built
    from, and K_VARYING says which scales the model loads a k-tile."""
    cu = re.sub(r"\s+", " ", _rendered(name))
    for _, fp, _ in _models(name)[:1]:
        for s in fp.scales:
            block = re.search(rf"struct {s.name} {{(.*?)}};", cu)
            assert block, s.name
            for role in ("batch", "mn", "k"):
                segs = fp8_cta_index.scale_segs(s, role if role != "mn" else ("m" if s.operand == "A" else "n"))
                assert f"using {role} = {fp8_cta_index.scale_role_type(segs)};" in block.group(1), (s.name, role)
            assert f"K_VARYING = {'true' if s.k_varying else 'false'};" in block.group(1)


@pytest.mark.parametrize("name", [n for n in SMALL if FAMILY[n] == "fp8_hopper"])
def test_rendered_scale_constants_are_the_models(name):
    """The traits' A_scales / B_scales constants are those the model's scale_at is built from."""
    cu = _rendered(name)
    for _, _, model in _models(name)[:1]:
        for x in ("A", "B"):
            load = next(a for a in model.accesses if a.ident == f"{x.lower()}_scale_load")
            consts = {c.name: c.value for c in walk(load.address) if isinstance(c, Const) and c.name}
            block = re.search(rf"struct {x}_scales \{{(.*?)\}};", cu, re.DOTALL)
            assert block, x
            declared = {k: int(v) for k, v in re.findall(r"(MN_BLOCK|MN_LAST|K_ITERS_PER|MN_STRIDE|K_STRIDE) = "
                                                         r"(-?\d+)", block.group(1))}
            for key, value in consts.items():
                if key.startswith("S::"):
                    assert declared[key[3:]] == value, (x, key)
            # A constant the model leaves out is one the header's `if constexpr` skips: 0.
            if "S::MN_BLOCK" not in consts:
                assert declared["MN_BLOCK"] == 0
            if "S::K_ITERS_PER" not in consts:
                assert declared["K_ITERS_PER"] == 0


# ---- verify --formal


@needs_coq
def test_verify_formal_proves_fp8_specs_of_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = ["fp8_misaligned_rows", "fp8_blocks_tails"]
    paths = [str(ROOT / "specs" / "fp8" / f"{n}.yaml") for n in names]
    r = CliRunner().invoke(main, ["verify", "--formal", *paths, "--jobs", "1", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert {x["family"] for x in rows} == {"fp8_cta", "fp8_hopper"}
    assert {x["spec"] for x in rows} == set(names)
    assert all(x["status"] == PROVED for x in rows), [(x["kernel"], x["failed"], x["reason"]) for x in rows]
