"""The `cta` family's index maps as data (pure): dg/cta.cuh's tile origin, loaders, k-tile loop and store, for one
plan, as a `formal.model.KernelModel` per kernel instantiation the launcher can take (the primary loaders, and the
fallback loaders where a pointer check picks them).

Each intermediate is a `Let` named as the header declares it. tests/test_formal.py checks that the header spells each
one's value as the model prints it, or, where the header picks a branch at compile time or names a view's offset
(`SPELLED`), that the header still holds those lines: the model and the kernel say the same thing."""

from __future__ import annotations

from dataclasses import dataclass

from dgemm_cli.families.cta import FFMA, MMA, LoaderPlan, TilePlan
from dgemm_cli.formal.expr import (
    INDEX,
    INT,
    TRUE,
    Cmp,
    Expr,
    Ite,
    Let,
    Min,
    Pred,
    Var,
    all_of,
    substitute,
)
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import LANE, THREAD, Access, Bijection, Fact, KernelModel, Range
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.views import ProblemViews

HEADER = "dg/cta.cuh"


# The header's text of the intermediates the model resolves for one plan (a constexpr branch taken, a Role's offset
# printed whole): a change to these lines is a change the model must follow.
SPELLED = {
    "tile": "tile /= Shape<T>::TILES_N;",
    "go": "const index_t go = S::K_INNER ? o0 + row : o0 + col, gk = S::K_INNER ? k0 + col : k0 + row;",
    "gk": "const index_t go = S::K_INNER ? o0 + row : o0 + col, gk = S::K_INNER ? k0 + col : k0 + row;",
    "left": "const index_t left = S::K_INNER ? T::K - gk : extent - go;",
    "o0": "load_a.template issue<s % DA>(As + s * A_TILE, A, m0, kt0 + s, M);",
    "extent": "load_b.template issue<s % DB>(Bs + s * B_TILE, B, n0, kt0 + s, T::N);",
    # A view's offset: the Role types (checked against the rendered traits) and dg/view.cuh's Role::offset.
    "A_offset": "S::Other::offset(go) + S::View::k::offset(gk)",
    "B_offset": "S::Other::offset(go) + S::View::k::offset(gk)",
    "gm": "T::store(C, t.m0 + r, t.n0 + c, v, alpha, beta, M, ep);",
    "gn": "T::store(C, t.m0 + r, t.n0 + c, v, alpha, beta, M, ep);",
}



@dataclass(frozen=True)
class Rows:
    """M: a constant, or `mrows` x M_UNIT for a run-time letter in lo..hi."""

    M: Expr
    param: tuple[Range, ...]  # the run-time letter's range, or nothing
    rows: Expr | None  # the run-time letter's size, for the reaches


def rows_of(views: ProblemViews) -> Rows:
    rt = views.spec.run_time_letter
    if rt is None or rt[1] == rt[2]:
        return Rows(_c(views.m, "M", INDEX), (), None)
    _, lo, hi = rt
    unit = views.m // hi
    m = Var("mrows", INDEX)
    M = Let("M", m * _c(unit, "T::M_UNIT", INDEX), INDEX)
    return Rows(M, (Range(m, _c(lo), _c(hi + 1), size=True),), m)


@dataclass(frozen=True)
class Origin:
    """tile_origin(): the block's output tile and batch product."""

    block: Var
    m0: Expr
    n0: Expr
    batch: Expr
    tiles_m: Expr
    tiles: Expr
    ranges: tuple[Range, ...]


def tile_origin(views: ProblemViews, plan: TilePlan, rows: Rows) -> Origin:
    block = Var("tile", INDEX, "tile")
    tiles_n = _c(plan.tiles_n, "Shape<T>::TILES_N", INDEX)
    bm, bn = _c(plan.block_m, "T::BM", INDEX), _c(plan.block_n, "T::BN", INDEX)
    tiles_m = Let("tiles_m", (rows.M + bm - 1) // bm, INDEX)
    n0 = Let("n0", (block % tiles_n) * bn, INDEX)
    t1 = Let("tile", block // tiles_n, INDEX)  # `tile /= Shape<T>::TILES_N`
    m0 = Let("m0", (t1 % tiles_m) * bm, INDEX)
    batch = Let("batch", t1 // tiles_m, INDEX) if views.batch > 1 else _c(0, ctype=INDEX)
    tiles = tiles_m * (plan.tiles_n * views.batch)
    return Origin(block, m0, n0, batch, tiles_m, tiles, (*rows.param, Range(block, _c(0), tiles)))


def _batch_offset(views: ProblemViews, operand: str, batch: Expr) -> Expr:
    return role_offset(segments(views, operand, "batch"), batch)


@dataclass(frozen=True)
class KTiles:
    """The k-tiles a block's main loop issues: `kt` (issue()'s argument) over `ranges` (after the block's)."""

    kt: Expr
    ranges: tuple[Range, ...]


def all_k_tiles(views: ProblemViews, plan: TilePlan) -> KTiles:
    """cta's main loop: k-tiles 0 .. K_TILES - 1."""
    kt = Var("kt", INT)
    return KTiles(kt, (Range(kt, _c(0), _c(-(-views.k // plan.block_k), "Shape<T>::K_TILES")),))


def loader_access(views: ProblemViews, plan: TilePlan, ld: LoaderPlan, rows: Rows,
                  o: Origin, k_tiles: KTiles | None = None) -> tuple[Access, Bijection, tuple[Fact, ...]]:
    """One loader's global loads (issue()), the walk of its shared tile, and its facts; `k_tiles`: the k-tiles the
    block issues (all of K unless given: the splitk family's K slice)."""
    k_tiles = k_tiles or all_k_tiles(views, plan)
    x = ld.operand
    is_a = x == "A"
    k_inner = ld.smem_inner == "k"
    extent_n = plan.block_m if is_a else plan.block_n
    rows_n, inner_n = (extent_n, plan.block_k) if k_inner else (plan.block_k, extent_n)
    threads = _c(plan.threads, "T::THREADS")
    thread = THREAD
    it = Var("i", INT)
    kt = k_tiles.kt
    K = _c(views.k, "T::K", INDEX)
    extent = Let("extent", rows.M if is_a else _c(views.n, "T::N", INDEX), INDEX)  # issue()'s: M or N
    o0 = Let("o0", o.m0 if is_a else o.n0, INDEX)  # issue()'s argument: the tile's origin along `other`
    other = "m" if is_a else "n"
    vec = ld.vector_elems
    V = _c(vec, "VEC")
    k0 = Let("k0", kt.as_(INDEX) * _c(plan.block_k, "T::BK", INDEX), INDEX)
    c = Let("c", thread + it * threads, INT)
    if ld.kind == "cp_async":
        per_row = _c(inner_n // vec, "kPerRow")
        chunks = rows_n * inner_n // vec
        row, col = Let("row", c // per_row), Let("col", (c % per_row) * V)
    elif ld.kind in ("gather", "gather_direct"):
        inner = _c(inner_n, "S::INNER")
        chunks = rows_n * inner_n
        row, col = Let("row", c // inner), Let("col", c % inner)
    else:  # transpose: rows along `other`, vectors along k
        assert ld.kind == "transpose" and not k_inner
        per_row = _c(plan.block_k // vec, "kChunksPerRow")
        chunks = inner_n * (plan.block_k // vec)
        row, col = Let("row", c // per_row), Let("col", (c % per_row) * V)
    per_thread = -(-chunks // plan.threads)
    walk_guard: Pred = Cmp("<", c, _c(chunks, "kChunks"))
    if ld.kind == "transpose":
        go: Expr = Let("go", Min(o0 + row, extent - 1, INDEX), INDEX)
        gk: Expr = Let("gk", k0 + col, INDEX)
    else:
        go = Let("go", o0 + row if k_inner else o0 + col, INDEX)
        gk = Let("gk", k0 + col if k_inner else k0 + row, INDEX)
    in_view = all_of(Cmp("<", go, extent), Cmp("<", gk, K))
    if ld.kind == "cp_async":
        if vec > 1:
            left = Let("left", K - gk if k_inner else extent - go, INDEX)
            count: Expr = Ite(in_view, Min(left, V, INDEX), _c(0))
        else:
            count = Ite(in_view, _c(1), _c(0))
    elif ld.kind in ("gather", "gather_direct"):
        count = Ite(in_view, _c(1), _c(0))
    elif views.k % plan.block_k == 0:
        count = _c(vec)
    else:
        count = Ite(Cmp("<", gk, K), Min(K - gk, V, INDEX), _c(0)) if vec > 1 else Ite(Cmp("<", gk, K), _c(1), _c(0))
    # The view offset: the batch's, then the role beside k's and k's (S::Other::offset(go) + S::View::k::offset(gk)).
    address = Let(f"{x}_offset", _batch_offset(views, x, o.batch) + role_offset(segments(views, x, other), go)
                  + role_offset(segments(views, x, "k"), gk), INDEX)
    along_k = k_inner or ld.kind == "transpose"
    logical = {"m" if is_a else "n": go if along_k else go + LANE, "k": gk + LANE if along_k else gk}
    if views.batch > 1:
        logical = {"batch": o.batch, **logical}
    extents = {"batch": _c(views.batch, "T::BATCH", INDEX), "m" if is_a else "n": extent, "k": K}
    ranges = (*o.ranges, Range(thread, _c(0), threads), Range(it, _c(0), _c(per_thread, "kPerThread")),
              *k_tiles.ranges)
    kinds = {"cp_async": f"{vec * ld_bytes(views, x)}-byte cp.async ({vec} element{'s' if vec > 1 else ''})",
             "gather": "element gather staged in registers", "gather_direct": "element gather",
             "transpose": f"{vec * ld_bytes(views, x)}-byte loads along k, stored transposed"}
    ident = f"{x.lower()}_{ld.kind}{vec}"
    access = Access(ident, f"{x}: {kinds[ld.kind]}", x, "load", ranges, Ite(walk_guard, count, _c(0)), address,
                    vec, logical, {r: extents[r] for r in logical}, aligned=vec if vec > 1 else 1,
                    align_always=ld.kind == "cp_async", zero_fill=True, slot=walk_guard, always=(go, gk))
    # The walk: (thread, i, lane) onto the tile's ROWS x INNER slots (for transposing loads, `other` x k).
    e = Var("lane_slot", INT)
    slot_r, slot_c = Var("slot_row"), Var("slot_col")
    if ld.kind in ("gather", "gather_direct"):
        image = (row, col)
        inv_c = slot_r * inner_n + slot_c
        inverse = {"thread": inv_c % plan.threads, "i": inv_c // plan.threads, "lane_slot": _c(0)}
        lanes = 1
    else:
        image = (row, col + e)
        per = inner_n // vec if ld.kind == "cp_async" else plan.block_k // vec
        inv_c = slot_r * per + slot_c // vec
        inverse = {"thread": inv_c % plan.threads, "i": inv_c // plan.threads, "lane_slot": slot_c % vec}
        lanes = vec
    target_rows, target_inner = (inner_n, plan.block_k) if ld.kind == "transpose" else (rows_n, inner_n)
    walk = Bijection(f"{ident}_walk", f"{x}'s loader: (thread, i, lane) covers each slot of its {target_rows} x "
                     f"{target_inner} shared tile once", "full-k",
                     (Range(thread, _c(0), threads), Range(it, _c(0), _c(per_thread)), Range(e, _c(0), _c(lanes))),
                     walk_guard, image, (Range(slot_r, _c(0), _c(target_rows)), Range(slot_c, _c(0), _c(target_inner))),
                     inverse)
    facts: tuple[Fact, ...] = ()
    if ld.kind == "transpose":
        facts = (Fact(f"{ident}_rows", "full-k", f"{x}'s transposing loads: a tile row inside the view loads that row "
                      "(the clamp to the last row touches only rows past the view, whose outputs are never stored)",
                      ranges, all_of(walk_guard, Cmp("<", o0 + row, extent)), Cmp("==", go, o0 + row)),)
    return access, walk, facts


def ld_bytes(views: ProblemViews, operand: str) -> int:
    return views.operands[operand].elem_bytes


def store_accesses(views: ProblemViews, plan: TilePlan, rows: Rows, o: Origin) -> tuple[tuple[Access, ...], Bijection]:
    """T::store at each accumulator (Math::for_each): the output's store, C's read for beta where the spec writes D,
    and the epilogue's reads; and the map of (block, thread, fragment) onto the output's elements."""
    thread = THREAD
    threads = _c(plan.threads, "T::THREADS")
    N = _c(views.n, "T::N", INDEX)
    if plan.instruction == MMA:
        wm, wn = plan.block_m // plan.warps_m, plan.block_n // plan.warps_n
        mi, ni, fe = Var("mi"), Var("ni"), Var("acc_e")
        warp = Let("warp", thread // _c(32))
        lane = Let("lane", thread % _c(32))
        g, q = Let("g", lane // _c(4)), Let("q", lane % _c(4))
        warp_m0 = Let("warp_m0", (warp // _c(plan.warps_n, "T::WARPS_N")) * _c(wm, "WM"))
        warp_n0 = Let("warp_n0", (warp % _c(plan.warps_n, "T::WARPS_N")) * _c(wn, "WN"))
        # at(row, col), at(row, col + 1), at(row + 8, col), at(row + 8, col + 1): accumulator acc_e.
        r = Let("row", warp_m0 + mi * _c(16) + g) + (fe // _c(2)) * _c(8)
        cc = Let("col", warp_n0 + ni * _c(8) + _c(2) * q) + fe % _c(2)
        frag = (Range(mi, _c(0), _c(wm // 16, "MI")), Range(ni, _c(0), _c(wn // 8, "NI")), Range(fe, _c(0), _c(4)))

        def inverse_frag(y_r: Expr, y_c: Expr) -> dict[str, Expr]:
            rr, cr = y_r % wm, y_c % wn
            warp_ = (y_r // wm) * plan.warps_n + y_c // wn
            return {"thread": warp_ * 32 + (rr % 8) * 4 + (cr % 8) // 2, "mi": rr // 16, "ni": cr // 8,
                    "acc_e": ((rr % 16) // 8) * 2 + cr % 2}
    else:
        assert plan.instruction == FFMA
        tm, tn = plan.thread_m, plan.thread_n
        vm, vn = plan.frag_m, plan.frag_n
        across_n = plan.block_n // tn
        fi, fj = Var("fi", INT, "i"), Var("fj", INT, "j")
        tx = Let("tx", thread % _c(across_n, "(T::BN / TN)"))
        ty = Let("ty", thread // _c(across_n, "(T::BN / TN)"))
        step_m, step_n = plan.block_m // tm * vm, plan.block_n // tn * vn
        r = Let("row(i)", (fi // _c(vm, "VM")) * _c(step_m, "(T::BM / TM * VM)") + ty * _c(vm, "VM")
                + fi % _c(vm, "VM"))
        cc = Let("col(j)", (fj // _c(vn, "VN")) * _c(step_n, "(T::BN / TN * VN)") + tx * _c(vn, "VN")
                 + fj % _c(vn, "VN"))
        frag = (Range(fi, _c(0), _c(tm, "TM")), Range(fj, _c(0), _c(tn, "TN")))

        def inverse_frag(y_r: Expr, y_c: Expr) -> dict[str, Expr]:
            rr, cr = y_r % plan.block_m, y_c % plan.block_n
            return {"thread": ((rr % step_m) // vm) * across_n + (cr % step_n) // vn,
                    "fi": (rr // step_m) * vm + rr % vm, "fj": (cr // step_n) * vn + cr % vn}
    gm = Let("gm", o.m0 + r.as_(INDEX), INDEX)
    gn = Let("gn", o.n0 + cc.as_(INDEX), INDEX)
    ranges = (*o.ranges, Range(thread, _c(0), threads), *frag)
    stored = all_of(Cmp("<", gm, rows.M), Cmp("<", gn, N))
    accesses = epilogue_accesses(views, rows, o.batch, ranges, gm, gn, Ite(stored, _c(1), _c(0)))
    out = views.spec.output.name
    y_b, y_m, y_n = Var("out_batch", INDEX), Var("out_m", INDEX), Var("out_n", INDEX)
    inverse = {"tile": (y_b * o.tiles_m + y_m // plan.block_m) * plan.tiles_n + y_n // plan.block_n,
               **inverse_frag(y_m % plan.block_m, y_n % plan.block_n)}
    image: tuple[Expr, ...] = (gm, gn)
    target = (Range(y_m, _c(0), rows.M), Range(y_n, _c(0), N))
    if views.batch > 1:
        image, target = (o.batch, *image), (Range(y_b, _c(0), _c(views.batch)), *target)
    else:
        inverse = {k: _drop_batch(v, y_b) for k, v in inverse.items()}
    once = Bijection("store_once", f"the store: (block, thread, fragment) onto {out}'s {views.batch} x M x "
                     f"{views.n} elements, each once", "written-once", ranges[len(rows.param):], stored, image, target,
                     inverse, params=rows.param)
    return tuple(accesses), once


def epilogue_accesses(views: ProblemViews, rows: Rows, batch: Expr, ranges: tuple[Range, ...], gm: Expr, gn: Expr,
                      count: Expr, always: tuple[Expr, ...] | None = None) -> tuple[Access, ...]:
    """T::store(C, gm, gn, ...) over `ranges` where `count` is 1: the output's store, C's read for beta where the spec
    writes D, and the epilogue's reads, each at (batch, gm, gn)."""
    N = _c(views.n, "T::N", INDEX)
    logical: dict[str, Expr] = {"m": gm, "n": gn}
    extents: dict[str, Expr] = {"m": rows.M, "n": N}
    if views.batch > 1:
        logical = {"batch": batch, **logical}
        extents = {"batch": _c(views.batch, "T::BATCH", INDEX), **extents}
    spec = views.spec
    out = spec.output.name
    accesses = []
    touched = [("C", "load" if out == "D" else "store")] + [(op.name, "store" if op.name == out else "load")
                                                             for op in spec.extra_operands]
    for name, kind in touched:
        at_mn = role_offset(segments(views, name, "m"), gm) + role_offset(segments(views, name, "n"), gn)
        address = Let(f"{name}_offset", _batch_offset(views, name, batch) + at_mn, INDEX)
        what = "store" if kind == "store" else ("read for beta" if name == "C" else "read by the epilogue")
        accesses.append(Access(f"{name.lower()}_{kind}", f"{name}: the epilogue's element {what}", name, kind, ranges,
                               count, address, 1, logical, extents, always=(gm, gn) if always is None else always))
    return tuple(accesses)


def _drop_batch(e: Expr, y_b: Var) -> Expr:
    return substitute(e, {y_b.name: _c(0, ctype=INDEX)})


def k_cover(views: ProblemViews, plan: TilePlan) -> Fact:
    """The k-tiles: K_TILES tiles of BK cover 0..K-1, none of them empty (the loads zero what lies past K)."""
    k_tiles = -(-views.k // plan.block_k)
    return Fact("k_tiles_cover", "full-k", f"{k_tiles} k-tiles of {plan.block_k} cover K = {views.k} once, none empty",
                (), TRUE, all_of(Cmp("<=", _c(views.k), _c(k_tiles * plan.block_k)),
                                 Cmp("<", _c((k_tiles - 1) * plan.block_k), _c(views.k))))


def grid_fits(o: Origin, rows: Rows) -> Fact:
    """Shape::tiles(M), the launch's block count, is computed in int: it fits, for every run-time row count."""
    return Fact("grid_fits_int", "64-bit", "the grid's block count (Shape<T>::tiles(M), an int) fits 32 bits",
                rows.param, TRUE, all_of(Cmp("<=", _c(1), o.tiles), Cmp("<=", o.tiles, _c(2**31 - 1))))


def loader_pairs(plan: TilePlan) -> list[tuple[tuple[LoaderPlan, int], tuple[LoaderPlan, int]]]:
    """The (loader, pointer alignment it was checked for) of A and of B in each instantiation the launcher can
    take: the plan's loaders, then, where a pointer check can fail, the fallback pair (a checked loader's fallback,
    unchecked)."""
    pairs = [((plan.a, plan.a.runtime_align), (plan.b, plan.b.runtime_align))]
    if plan.runtime_dispatch:
        pairs.append(((plan.a.fallback or plan.a, 0) if plan.a.runtime_align else (plan.a, 0),
                      (plan.b.fallback or plan.b, 0) if plan.b.runtime_align else (plan.b, 0)))
    return pairs


def models(views: ProblemViews, plan: TilePlan, name: str) -> list[KernelModel]:
    """A model per loader instantiation the launcher can take: the plan's loaders (with the pointers the dispatch
    checked, where it checks), then the fallback pair where a check can fail."""
    rows = rows_of(views)
    o = tile_origin(views, plan, rows)
    stores, once = store_accesses(views, plan, rows, o)
    out = []
    for variant, pair in enumerate(loader_pairs(plan)):
        accesses, bijections, facts = [], [once], [k_cover(views, plan), grid_fits(o, rows)]
        reach = {}
        for ld, checked in pair:
            acc, walk, extra = loader_access(views, plan, ld, rows, o)
            accesses.append(acc)
            bijections.append(walk)
            facts.extend(extra)
            reach[ld.operand] = operand_reach(views, ld.operand, rows.rows, checked)
        accesses.extend(stores)
        for a in stores:
            reach[a.operand] = operand_reach(views, a.operand, rows.rows)
        loaders = ", ".join(f"{ld.operand} {ld.kind}{ld.vector_elems if ld.kind in ('cp_async', 'transpose') else ''}"
                            for ld, _ in pair)
        label = "cta" if variant == 0 else "cta, fallback loaders"
        out.append(KernelModel(f"{name} ({label}: {loaders})", "cta", plan.index_type, reach, tuple(accesses),
                               tuple(bijections), tuple(facts), trusted=TRUSTED))
    return out


TRUSTED = ("the PTX semantics of cp.async, ldmatrix and mma.sync, and the mma m16n8k16 fragment layout",
           "the shared-memory side: which stage a k-tile lands in and the fragments the math reads from it",
           "the entry point's dispatch: a run-time row count reaches a kernel only inside its bucket's range, and the "
           "pointer check picks the loaders whose alignment it checked",
           "nvcc and ptxas")
