"""Formal verification of the hopper family's index maps (families/hopper/index.py): every obligation of each
variant's model by exhaustive enumeration at small sizes, the maps enumerated (stores onto the output's view, loads
inside their views), Coq's proofs, mutations Coq must reject, the model against the headers' text and the rendered
tensor maps, and `verify --formal` on the repository's specs that plan to hopper."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from dgemm_cli.arch import ARCHES
from dgemm_cli.families.hopper import index as hopper_index
from dgemm_cli.formal.check import FAILED, PROVED, kernel_plans, models_of, prove_model, references
from dgemm_cli.formal.expr import Const, Let, Var, cuda, evaluate, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import enumerate_points, exhaust, search
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec

from .formal_support import needs_coq, view_addresses

ROOT = Path(__file__).resolve().parent.parent


def _spec(name: str, **doc) -> dict:
    return {"name": name, "arch": "sm_90a", **doc}


_ROW16 = {"layout": "row", "align": 16}
_COL16 = {"layout": "col", "align": 16}

# Small problems the hopper family plans in each of its variants (`plan:` pins the family and the variant): tails in
# m, n and k, K-major and MN-major operands both ways, an m-contiguous output, a batch with a broadcast B, an NCHW
# view walked as flat rows, the K split, the A multicast, rows at run time, an epilogue with D, a bias and a scale.
SMALL = [
    _spec("tails_bf16", dtype="bf16", gemm={"m": 72, "n": 80, "k": 80},
          operands={"A": _ROW16, "B": _ROW16, "C": _ROW16}, plan={"family": "hopper"}),
    _spec("mn_major_a_c_col", dtype="f16", gemm={"m": 80, "n": 72, "k": 96},
          operands={"A": _COL16, "B": _COL16, "C": _COL16}, plan={"family": "hopper"}),
    _spec("batch_bcast", dtype="f16", gemm={"batch": 2, "m": 40, "n": 64, "k": 64},
          operands={"A": _ROW16, "B": {"strides": [0, 64, 1], "align": 16}, "C": _ROW16}, plan={"family": "hopper"}),
    _spec("nchw_flat_rows", dtype="bf16", contraction="nchw,kc->nkhw", sizes={"n": 3, "c": 64, "h": 8, "w": 8, "k": 64},
          operands={"A": {"strides": [4096, 64, 8, 1], "align": 16}, "B": {"strides": [64, 1], "align": 16},
                    "C": {"align": 16}}, plan={"family": "hopper", "block_m": 128}),
    _spec("k_split", dtype="bf16", gemm={"m": 40, "n": 128, "k": 256},
          operands={"A": _ROW16, "B": _COL16, "C": _ROW16}, plan={"family": "hopper", "k_splits": 2}),
    _spec("a_multicast", dtype="bf16", gemm={"m": 128, "n": 64, "k": 128},
          operands={"A": _ROW16, "B": _COL16, "C": _ROW16}, plan={"family": "hopper", "a_multicast": 2, "block_n": 32}),
    _spec("dyn_rows", dtype="bf16", gemm={"m": {"min": 9, "max": 40}, "n": 64, "k": 64},
          operands={"A": _ROW16, "B": _COL16, "C": _ROW16}, plan={"family": "hopper"}),
    _spec("epilogue_d", dtype="f16", gemm={"m": 72, "n": 64, "k": 64}, beta=0.5,
          operands={"A": _ROW16, "B": _COL16, "C": {"layout": "row"}, "D": _ROW16},
          epilogue=[{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}}],
          plan={"family": "hopper"}),
]
BY_NAME = {d["name"]: d for d in SMALL}

# What each small spec must plan to: the variant the test covers.
VARIANTS = {
    "tails_bf16": dict(k_splits=1, a_multicast=1, packed_store=True), "mn_major_a_c_col": dict(c_unit="m"),
    "batch_bcast": dict(tile_groups=2), "nchw_flat_rows": dict(flat_rows=True), "k_split": dict(k_splits=2),
    "a_multicast": dict(a_multicast=2), "dyn_rows": dict(packed_store=True), "epilogue_d": dict(packed_store=False),
}


def _planned(doc: dict):
    spec = parse_spec(doc, f"<{doc['name']}>")
    return spec, plan_spec(spec, ARCHES["sm_90a"])


def _models(doc: dict):
    _, planned = _planned(doc)
    out = []
    for label, views, fp in kernel_plans(planned.plan, planned.views):
        if fp.family != "hopper":
            continue
        found = models_of(views, fp, label)
        assert not isinstance(found, str), found
        out.extend((views, fp, m) for m in found)
    assert out, doc["name"]
    return out


@pytest.mark.parametrize("doc", SMALL, ids=list(BY_NAME))
def test_the_small_specs_plan_each_variant(doc):
    _, _, model = _models(doc)[0]
    fp = _models(doc)[0][1]
    for key, want in VARIANTS[doc["name"]].items():
        assert getattr(fp, key) == want, (doc["name"], key, getattr(fp, key))
    assert model.family == "hopper" and model.trusted


# ---- the models, by exhaustive enumeration at small sizes


@pytest.mark.parametrize("doc", SMALL, ids=list(BY_NAME))
def test_every_obligation_holds_at_every_point(doc):
    """Each obligation holds at every point of its ranges, and its hypotheses hold somewhere (none is vacuous)."""
    for views, _, model in _models(doc):
        obs = obligations(model, references(views))
        for ob in obs:
            found = exhaust(ob)
            assert found is not None, f"{model.kernel}: {ob.ident}: too many points to enumerate"
            assert found.failing is None, f"{model.kernel}: {ob.ident} fails at {found.failing}"
            assert found.satisfying, f"{model.kernel}: {ob.ident}: no point satisfies its hypotheses"
        idents = {ob.ident for ob in obs}
        assert {"a_tma_element", "a_tma_zero_fill", "b_tma_element", "b_tma_zero_fill", "a_tma_map_rules",
                "b_tma_map_extent", "k_tiles_cover_into", "tile_map_onto_domain"} <= idents
        assert any(i.startswith("store_once_") for i in idents)




@pytest.mark.parametrize("doc", SMALL, ids=list(BY_NAME))
def test_maps_enumerated_store_each_output_once_and_load_inside_views(doc):
    """The maps themselves, enumerated: each store path's addresses are the output view's, each exactly once, and
    every element a TMA box or an epilogue read moves is an element of its view (numpy, from the spec's letters)."""
    for views, _, model in _models(doc):
        rows_range = [r for a in model.accesses for r in a.ranges if r.var.name == "mrows"][:1]
        sizes = range(int(evaluate(rows_range[0].lo, {})), int(evaluate(rows_range[0].hi, {}))) if rows_range \
            else [None]
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
                    assert moved.size and np.isin(moved, view).all(), f"{model.kernel}: {a.text}"


# ---- Coq


@needs_coq
@pytest.mark.parametrize("name", ["k_split", "a_multicast", "nchw_flat_rows"])
def test_coq_proves_the_small_models(name, tmp_path):
    for views, _, model in _models(BY_NAME[name]):
        r = prove_model(views, model, tmp_path)
        assert r.status == PROVED, (r.failed, r.obligation, r.counterexample, r.reason)


# ---- mutations: each must be rejected, with a readable obligation and the values that break it


def _stride_off(operand: str):
    """The launcher's tensor map with its second dim's stride 16 bytes off."""
    original = hopper_index.tensor_map

    def mutated(views, plan, x, rows):
        dims = original(views, plan, x, rows)
        if x != operand:
            return dims
        return (dims[0], dataclasses.replace(dims[1], stride_bytes=dims[1].stride_bytes + 16), *dims[2:])
    return mutated


def _grid_stride_off(model):
    """The persistent loop stepping by gridDim.x + 1: tiles are skipped."""
    bijections = []
    for b in model.bijections:
        if b.ident == "schedule":
            g = next(x for x in walk(b.image[0]) if isinstance(x, Var) and x.name == "grid")
            step = b.ranges[0].var + b.ranges[1].var * (g + 1)
            b = dataclasses.replace(b, image=(step,), guard=step < b.target[0].hi)
        bijections.append(b)
    return dataclasses.replace(model, bijections=tuple(bijections))


def _slices_short(model):
    """The K split with slices one k-iteration short: the last k-iteration is never loaded."""
    bijections = []
    for b in model.bijections:
        if b.ident == "k_slices_cover":
            per = b.ranges[1].hi
            b = dataclasses.replace(b, ranges=(b.ranges[0], dataclasses.replace(b.ranges[1], hi=per - 1)))
        bijections.append(b)
    return dataclasses.replace(model, bijections=tuple(bijections))


MUTATIONS = {
    # B's map with a stride 16 bytes off: its boxes read the wrong elements (and past B's view).
    "tensor_map_stride_off": ("tails_bf16", ("b_tma_in_bounds", "b_tma_element", "b_tma_map_extent")),
    # A persistent grid stepping by gridDim.x + 1 skips tiles.
    "grid_stride_off": ("tails_bf16", ("schedule_",)),
    # K-split slices one k-iteration short leave a k-iteration to no block.
    "k_slices_short": ("k_split", ("k_slices_cover_",)),
}


def _mutated(name: str, monkeypatch):
    spec_name, _ = MUTATIONS[name]
    if name == "tensor_map_stride_off":
        monkeypatch.setattr(hopper_index, "tensor_map", _stride_off("B"))
    views, _, model = _models(BY_NAME[spec_name])[0]
    if name == "grid_stride_off":
        model = _grid_stride_off(model)
    if name == "k_slices_short":
        model = _slices_short(model)
    return views, model


@needs_coq
@pytest.mark.parametrize("name", ["tensor_map_stride_off", "grid_stride_off"])
def test_mutations_are_rejected_by_coq(name, tmp_path, monkeypatch):
    views, model = _mutated(name, monkeypatch)
    r = prove_model(views, model, tmp_path)
    assert r.status == FAILED
    assert r.failed.startswith(MUTATIONS[name][1]), r.failed
    assert r.obligation, r


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_the_search_finds_each_mutation(name, monkeypatch):
    views, model = _mutated(name, monkeypatch)
    broken = [ob for ob in obligations(model, references(views)) if ob.ident.startswith(MUTATIONS[name][1])]
    assert broken and any(search(ob, tries=5000) for ob in broken), name


# ---- the model against the kernel's text


def _headers() -> str:
    return "\n".join((ROOT / "templates" / h).read_text() for h in hopper_index.HEADERS)


def test_the_headers_spell_each_intermediate_as_the_model():
    """Each Let's value as the model prints it appears in the headers, or, where the header takes a compile-time
    branch or folds over the loops (SPELLED), the header still holds those lines."""
    text = _headers()
    for lines in hopper_index.SPELLED.values():
        for line in lines:
            assert line in text, line
    seen: set[tuple[str, str]] = set()
    for doc in SMALL:
        for _, _, model in _models(doc):
            bounds = [b for a in model.accesses for r in a.ranges for b in (r.lo, r.hi) if b is not None]
            for e in [x for a in model.accesses for x in (a.count, a.address, *a.logical.values(), *a.always)] + bounds:
                for x in walk(e):
                    if isinstance(x, Let) and (x.name, cuda(x.value)) not in seen:
                        seen.add((x.name, cuda(x.value)))
                        if x.name not in hopper_index.SPELLED:
                            assert cuda(x.value) in text, f"{x.name} = {cuda(x.value)}"
    names = {name for name, _ in seen}
    assert {"r", "band", "in_band", "rows", "tile.m0", "tile.n0", "k0", "gm", "gn", "v", "cv", "row0", "out_at",
            "c_tile", "flat0", "b.m0", "first", "end", "a_part", "a_box_rows"} <= names, names


def _rendered(doc: dict) -> str:
    spec, planned = _planned(doc)
    files = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)
    return files[f"{spec.name}.cu"]


@pytest.mark.parametrize("doc", SMALL, ids=list(BY_NAME))
def test_rendered_tensor_maps_and_output_strides_are_the_models(doc):
    """The traits' A_map / B_map DIMS (what encode() passes to cuTensorMapEncodeTiled) are the dims the model's
    boxes go through, and the output's strides C_SM, C_SN and the loops' are those the model stores by."""
    cu = _rendered(doc)
    for views, fp, model in _models(doc)[:1]:
        rows = hopper_index.rows_of(views, fp)[0]
        for x in ("A", "B"):
            block = re.search(rf"struct {x}_map \{{(.*?)\n  \}};", cu, re.DOTALL)
            assert block, x
            rendered = [tuple(int(v) if v.isdigit() else v for v in (m[1], m[2], m[3], m[4], m[5]))
                        for m in re.finditer(r"\{ (\d+), (\d+), (\d+), dg::hopper::(\w+), (\d+) \}", block.group(1))]
            dims = hopper_index.tensor_map(views, fp, x, rows)
            elem = views.operands[x].elem_bytes
            assert len(rendered) == len(dims)
            for (size, stride, box, source, index), d in zip(rendered, dims):
                assert (source, index) == (d.source, d.index)
                assert size == 0 or evaluate(d.size, {}) == size
                assert box == 0 or evaluate(d.box, {}) == box
                assert d.stride_bytes == (stride if stride else elem)
        csm = re.search(r"C_SM = (-?\d+), C_SN = (-?\d+);", cu)
        out = fp.c_operand
        store = next(a for a in model.accesses if a.kind == "store")
        consts = {x.name: x.value for x in walk(store.address) if isinstance(x, Const) and x.name}
        assert consts.get("T::C_SM", 0) == int(csm[1]) and consts.get("T::C_SN", 0) == int(csm[2]), out
        for i, loop in enumerate(fp.tile_loops):
            assert f"{{ {loop.size}, {'true' if loop.role == 'm' else 'false'}, {loop.stride[out]} }}" in cu, i


# ---- verify --formal


HOPPER_SPECS = ["square_bf16", "batched_broadcast", "moe_up", "conv1x1_nchw", "decode_swapped_multicast"]


def test_the_repository_specs_the_sweep_proves_on_hopper_plan_to_hopper():
    """tests/test_formal_repository.py proves every kernel of specs/ through `verify --formal`; these specs are its
    hopper variants (batched, NCHW, multicast, the swapped decode), so they must keep planning to hopper."""
    for name in HOPPER_SPECS:
        planned = plan_spec(load_spec(ROOT / "specs" / f"{name}.yaml"), ARCHES["sm_90a"])
        assert "hopper" in {fp.family for _, _, fp in kernel_plans(planned.plan, planned.views)}, name


@needs_coq
def test_coq_proves_the_hopper_bucket_of_a_run_time_spec(tmp_path):
    """decode_dynamic's 9..64 bucket runs hopper with rows at run time (its other buckets' families: gemv, tcgemv,
    and cta's fallbacks, proved by tests/test_formal.py's kind)."""
    from dgemm_cli.arch import TARGETS
    from dgemm_cli.spec import load_spec

    spec = load_spec(ROOT / "specs" / "decode_dynamic.yaml")
    planned = plan_spec(spec, TARGETS[spec.arch])
    hopper = [(v, fp, label) for label, v, fp in kernel_plans(planned.plan, planned.views) if fp.family == "hopper"]
    assert hopper
    for views, fp, label in hopper:
        for model in models_of(views, fp, label):
            r = prove_model(views, model, tmp_path)
            assert r.status == PROVED, (model.kernel, r.failed, r.reason)
