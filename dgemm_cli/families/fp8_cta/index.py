"""The `fp8_cta` family's index maps as data (pure): dg/fp8_cta.cuh's kernel, for one plan, as a
`formal.model.KernelModel` per loader instantiation the launcher can take.

The kernel is the cta family's block (dg/cta.cuh): its tile origin, loaders, k-tile loop and the mma m16n8 store
layout (fp8_cta::Math's row() and col() are cta::Math's for_each), so those maps are the cta model's
(families/cta/index.py), but for the gathers whose lanes walk the rows (LoadGather with AlongRows: element c of the
walk at row c % ROWS, column c / ROWS). Beside them, the scales: ScaleRows::locate and load, each thread's scale of
each of its rows (columns) at the k-tile it promotes (or once, for a scale constant along k), as an access and a fact
a scale view:

  <x>_scale_load      an access: every load the kernel issues (rows past the view clamped to its last) inside the
                      scale view, the view's element at the clamped row and the k-tile's first k;
  <x>_scale_applied   a fact: every product (m, n, k) a thread's accumulators sum with m < M (n < N) and k < K is
                      multiplied by the scale the thread loaded for that accumulator row (column) and k-tile, and
                      that scale is the view's element covering (m, k) ((n, k)): the k-tile lies inside one scale
                      block, and the clamp touches only rows past the view.

The reference of a scale is the spec's scale view (`scale_reference`, through `formal.packed.quant_reference`:
each letter's index divided by its block, times the view's stride of the letter), not the kernel's ScaleRoles. Each
intermediate is a `Let` named as the header declares it; tests/test_formal_fp8.py checks that dg/fp8_cta.cuh spells
each one as the model prints it or holds the lines of `SPELLED`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from dgemm_cli.families.cta import LoaderPlan
from dgemm_cli.families.cta.index import (
    TRUSTED as CTA_TRUSTED,
)
from dgemm_cli.families.cta.index import (
    KTiles,
    Origin,
    Rows,
    all_k_tiles,
    grid_fits,
    k_cover,
    loader_access,
    loader_pairs,
    rows_of,
    store_accesses,
    tile_origin,
)
from dgemm_cli.families.fp8_cta import Fp8CtaPlan
from dgemm_cli.families.fp8_cta.scales import MN_ROLE, ScaleRoles
from dgemm_cli.formal.expr import INDEX, Cmp, Const, Expr, Ite, Let, Var, all_of, replace, walk
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import THREAD, Access, Bijection, Fact, KernelModel, Range, Reach
from dgemm_cli.formal.packed import quant_reach_of, quant_reference, quant_views
from dgemm_cli.formal.views import operand_reach
from dgemm_cli.spec.model import ScaleView
from dgemm_cli.views import ProblemViews

HEADER = "dg/fp8_cta.cuh"

# The header's text of the intermediates the model states by the cta model's names or resolves for one plan (a
# constexpr branch taken, a lambda inlined, a ScaleRole's offset printed whole): a change to these lines is a change
# the model must follow. Each name's lines are all in dg/fp8_cta.cuh (or, for the AlongRows walk, dg/cta.cuh).
_LOCATE = ("sa.locate(SA::batch::offset(batch), t.m0, M - 1, [&](int i, int h) { return math.row(i, h); });",
           "sb.locate(SB::batch::offset(batch), t.n0, index_t(T::N) - 1, [&](int i, int h) { return math.col(i, h); "
           "});")
SPELLED: dict[str, tuple[str, ...]] = {
    # fp8_cta::Math: the accumulators' rows and columns, the cta model's store layout.
    "warp": ("const int warp = threadIdx.x / 32;",),
    "warp_m0": ("warp_m0 = (warp / T::WARPS_N) * WM;",),
    "warp_n0": ("warp_n0 = (warp % T::WARPS_N) * WN;",),
    "lane": ("__device__ __forceinline__ int row(int mi, int h) const { return warp_m0 + mi * 16 + (threadIdx.x % 32) "
             "/ 4 + 8 * h; }",),
    "g": ("__device__ __forceinline__ int row(int mi, int h) const { return warp_m0 + mi * 16 + (threadIdx.x % 32) "
          "/ 4 + 8 * h; }",),
    "q": ("__device__ __forceinline__ int col(int ni, int h) const { return warp_n0 + ni * 8 + 2 * (threadIdx.x % 4) "
          "+ h; }",),
    "row": ("__device__ __forceinline__ int row(int mi, int h) const { return warp_m0 + mi * 16 + (threadIdx.x % 32) "
            "/ 4 + 8 * h; }", "return AlongRows ? c % S::ROWS : c / S::INNER;"),
    "col": ("__device__ __forceinline__ int col(int ni, int h) const { return warp_n0 + ni * 8 + 2 * (threadIdx.x % 4) "
            "+ h; }", "return AlongRows ? c / S::ROWS : c % S::INNER;"),
    "gm": ("T::store(C, t.m0 + math.row(mi, e / 2), t.n0 + math.col(ni, e % 2), v, alpha, beta, M, ep);",),
    "gn": ("T::store(C, t.m0 + math.row(mi, e / 2), t.n0 + math.col(ni, e % 2), v, alpha, beta, M, ep);",),
    # The cta block the kernel runs: its tile origin, loaders and k-tiles (dg/cta.cuh, the cta model's SPELLED).
    "o0": ("load_a.issue(As + next_stage * A_TILE, A, t.m0, next, M);",
           "load_a.issue(As + s * A_TILE, A, t.m0, s, M);"),
    "extent": ("load_b.issue(Bs + next_stage * B_TILE, B, t.n0, next, T::N);",
               "load_b.issue(Bs + s * B_TILE, B, t.n0, s, T::N);"),
    "kt": ("for (int kt = 0; kt < K_TILES; ++kt) {",),
    "tile": ("const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x, M, A, B, C, ep);",),
    # The scales' batch, located once, and each row's (column's) scale offset.
    "batch": ("const index_t batch = index_t(blockIdx.x) / (index_t(cta::Shape<T>::TILES_N) * "
              "cta::Shape<T>::tiles_m(M));", "sa.locate(SA::batch::offset(batch), t.m0, M - 1, [&](int i, int h) "
              "{ return math.row(i, h); });"),
    "x": ("const index_t x = origin + first(i, h);", *_LOCATE),
    "last": _LOCATE,
    "at[i][h]": ("at[i][h] = base + S::mn::offset(x < last ? x : last);",),
    "kk": ("const index_t kk = S::k::offset(k);", "v[i][h] = __ldg(scales + at[i][h] + kk);",
           "if constexpr (SA::K_VARYING) sa.load(scales.a, index_t(kt) * T::BK);",
           "if constexpr (SB::K_VARYING) sb.load(scales.b, index_t(kt) * T::BK);",
           "if constexpr (!SA::K_VARYING) sa.load(scales.a, 0);",
           "if constexpr (!SB::K_VARYING) sb.load(scales.b, 0);"),
    # ScaleRole::offset, a ScaleSeg a letter: printed whole as the model's expression.
    "scale_offset": ("const I here = S::stride == 0 ? I(0) : ((sizeof...(Outer) ? i % I(S::size) : i) / I(S::block)) "
                     "* I(S::stride);", "return here + ScaleRole<I, Outer...>::offset(i / I(S::size));"),
    # The promotion: accumulator (mi, ni, e) is multiplied by its row's scale sa.v[mi][e / 2] and its column's
    # sb.v[ni][e % 2] (the k-tile's, or the constant ones before the store).
    "applied": ("const float s = (SA::K_VARYING ? sa.v[mi][e / 2] : 1.0f) * (SB::K_VARYING ? sb.v[ni][e % 2] : "
                "1.0f);", "if constexpr (!SA::K_VARYING) v *= sa.v[mi][e / 2];",
                "if constexpr (!SB::K_VARYING) v *= sb.v[ni][e % 2];"),
}


# ---- the scale views: the spec's reference, the reach, the kernel's ScaleRole offsets


def scale_view(views: ProblemViews, operand: str) -> ScaleView:
    return next(sc for sc in views.spec.scales if sc.operand == operand)


def scale_reference(views: ProblemViews, scale: ScaleView, index: Mapping[str, Expr]) -> Expr:
    """The element offset in `scale`'s view of the scale that covers the operand's element at role indices `index`:
    the spec's scale view through its blocks (`formal.packed.quant_reference`, the weight-only views' reference)."""
    return quant_reference(views, quant_views(views)[scale.view.name], index)


def scale_reach(views: ProblemViews, scale: ScaleView) -> Reach:
    """The scale view's reachable elements from the kernel's pointer (`formal.packed.quant_reach_of`); f32 elements,
    loaded one at a time."""
    return quant_reach_of(views, scale.view.name)


ScaleSegs = tuple[tuple[int, int, int], ...]


def scale_segs(scale: ScaleRoles, role: str) -> ScaleSegs:
    """(size, block, stride) of each letter of `role` (innermost first, size > 1): the ScaleRole's ScaleSegs as the
    traits declare them (fp8_cta/render.py)."""
    return tuple((x.size, x.block, x.stride) for x in scale.role(role) if x.size > 1)


def scale_role_type(segs: ScaleSegs) -> str:
    return ("dg::fp8_cta::ScaleRole<index_t" + "".join(f", dg::fp8_cta::ScaleSeg<{size}, {block}, {stride}>"
                                                       for size, block, stride in segs) + ">")


def scale_role_offset(segs: ScaleSegs, i: Expr) -> Expr:
    """ScaleRole<index_t, Segs...>::offset(i): a seg's (i % size, the outermost's i) / block x stride, 0 where the
    stride is, plus the outer segs' offset of i / size."""
    if not segs:
        return Const(0, ctype=INDEX)
    (size, block, stride), rest = segs[0], segs[1:]
    here: Expr = Const(0, ctype=INDEX)
    if stride != 0:
        digit = i % Const(size, ctype=INDEX) if rest else i
        here = (digit // Const(block, ctype=INDEX)) * Const(stride, ctype=INDEX)
    if not rest:
        return here
    return here + scale_role_offset(rest, i // Const(size, ctype=INDEX))


# ---- the loaders


def along_rows(views: ProblemViews, plan: Fp8CtaPlan, ld: LoaderPlan, rows: Rows, o: Origin,
               k_tiles: KTiles) -> tuple[Access, Bijection, tuple[Fact, ...]]:
    """LoadGather<T, X, true>: the cta model's gather with element c of the walk at row c % ROWS, column c / ROWS
    (row_of, col_of), and the walk's inverse c = column x ROWS + row."""
    access, walk_, facts = loader_access(views, plan, ld, rows, o, k_tiles)
    old_row = next(x for x in walk(access.address) if isinstance(x, Let) and x.name == "row")
    old_col = next(x for x in walk(access.address) if isinstance(x, Let) and x.name == "col")
    c = old_row.value.a  # the walk's element c = threadIdx.x + i x THREADS
    tile_rows = plan.block_m if ld.operand == "A" else plan.block_n
    new_row = Let("row", c % _c(tile_rows, "S::ROWS"))
    new_col = Let("col", c // _c(tile_rows, "S::ROWS"))

    def swap(e: Expr) -> Expr:
        return replace(replace(e, old_row, new_row), old_col, new_col)
    access = dataclasses.replace(
        access, ident=f"{access.ident}_rows", text=f"{access.text}, lanes along the view's rows",
        count=swap(access.count), address=swap(access.address),
        logical={r: swap(i) for r, i in access.logical.items()}, always=tuple(swap(e) for e in access.always))
    slot_r, slot_c = (t.var for t in walk_.target)
    inv_c = slot_c * tile_rows + slot_r
    walk_ = dataclasses.replace(
        walk_, ident=f"{walk_.ident}_rows", image=(new_row, new_col),
        inverse={"thread": inv_c % plan.threads, "i": inv_c // plan.threads, "lane_slot": _c(0)})
    return access, walk_, facts


# ---- the scales


def applied_fact(ident: str, text: str, ranges: tuple[Range, ...], address: Expr, logical: Mapping[str, Expr],
                 extents: Mapping[str, Expr], reference: Expr) -> Fact:
    """Where the logical index of a product lies inside the view, the scale loaded for it (at `address`) is the
    scale view's element `reference` at that index."""
    inside = all_of(*(all_of(Cmp("<=", Const(0), i), Cmp("<", i, extents[r])) for r, i in logical.items()))
    return Fact(ident, text=text, prop="full-k", ranges=ranges, hyps=inside, goal=Cmp("==", address, reference))


def scale_accesses(views: ProblemViews, plan: Fp8CtaPlan, rows: Rows,
                   o: Origin) -> tuple[tuple[Access, ...], tuple[Fact, ...], dict[str, Reach]]:
    """ScaleRows<T, S, MN>::locate and load, for A's scales (rows) and B's (columns): each load, and each product a
    loaded scale multiplies."""
    thread = THREAD
    threads = _c(plan.threads, "T::THREADS")
    wm, wn = plan.block_m // plan.warps_m, plan.block_n // plan.warps_n
    K = _c(views.k, "T::K", INDEX)
    bk = _c(plan.block_k, "T::BK", INDEX)
    k_tiles = all_k_tiles(views, plan)
    kt = k_tiles.kt
    warp = Let("warp", thread // _c(32))
    lane = Let("lane", thread % _c(32))
    tiles_n = _c(plan.tiles_n, "cta::Shape<T>::TILES_N", INDEX)
    out: list[Access] = []
    facts: list[Fact] = []
    reach: dict[str, Reach] = {}
    for s in plan.scales:
        x = s.operand
        spec_scale = scale_view(views, x)
        role = MN_ROLE[x]
        is_a = x == "A"
        i, h = Var("i"), Var("h")
        if is_a:
            warp0 = Let("warp_m0", (warp // _c(plan.warps_n, "T::WARPS_N")) * _c(wm, "WM"))
            first = Let("row", warp0 + i * _c(16) + Let("g", lane // _c(4)) + _c(8) * h)
            origin, extent = o.m0, rows.M
            per = _c(wm // 16, "M8::MI")
        else:
            warp0 = Let("warp_n0", (warp % _c(plan.warps_n, "T::WARPS_N")) * _c(wn, "WN"))
            first = Let("col", warp0 + i * _c(8) + _c(2) * Let("q", thread % _c(4)) + h)
            origin, extent = o.n0, _c(views.n, "T::N", INDEX)
            per = _c(wn // 8, "M8::NI")
        last = Let("last", extent - 1, INDEX)
        xi = Let("x", origin + first.as_(INDEX), INDEX)
        clamped = Ite(Cmp("<", xi, last), xi, last, INDEX)
        batch_segs = scale_segs(s, "batch")
        kernel_batch: Expr = Const(0, ctype=INDEX)
        if batch_segs:
            kernel_batch = Let("batch", o.block // (tiles_n * o.tiles_m), INDEX)
        at = Let("at[i][h]", Let("scale_offset", scale_role_offset(batch_segs, kernel_batch), INDEX)
                 + Let("scale_offset", scale_role_offset(scale_segs(s, role), clamped), INDEX), INDEX)
        k_index: Expr = kt.as_(INDEX) * bk if s.k_varying else Const(0, ctype=INDEX)
        kk = Let("kk", Let("scale_offset", scale_role_offset(scale_segs(s, "k"), k_index), INDEX), INDEX)
        address = at + kk
        batch_ix = {"batch": o.batch} if views.batch > 1 else {}
        extents = {"batch": _c(views.batch, "T::BATCH", INDEX), role: extent, "k": K}
        over = (*o.ranges, Range(thread, _c(0), threads), Range(i, _c(0), per), Range(h, _c(0), _c(2)))
        load_ranges = (*over, *k_tiles.ranges) if s.k_varying else over
        # Each load: the view's element at the clamped row (column) and the k-tile's first k (0: constant along k).
        load_logical = {**batch_ix, role: clamped, "k": k_index}
        what = "rows" if is_a else "columns"
        when = "at each k-tile" if s.k_varying else "once, before the store"
        out.append(Access(f"{x.lower()}_scale_load", f"{s.name}: each thread's scale of its {what} ({what} past the "
                          f"view clamped to the last), {when}", s.name, "load", load_ranges, _c(1), address, 1,
                          load_logical, {r: extents[r] for r in load_logical},
                          reference=scale_reference(views, spec_scale, load_logical), always=(xi,)))
        # Each product the loaded scale multiplies: (m or n, k) of the accumulator row (column) and the k-tile (all
        # of k for a scale constant along it), inside the view.
        if s.k_varying:
            k_in = Var("k_in")
            k_at: Expr = k_index + k_in.as_(INDEX)
            applied_ranges = (*over, *k_tiles.ranges, Range(k_in, _c(0), _c(plan.block_k)))
        else:
            k_all = Var("k_all", INDEX)
            k_at = k_all
            applied_ranges = (*over, Range(k_all, _c(0), K))
        product = origin + first.as_(INDEX)
        applied_logical = {**batch_ix, role: product, "k": k_at}
        facts.append(applied_fact(f"{x.lower()}_scale_applied", f"{s.name}: each product of a thread's {what} with "
                                  f"its index inside the view is multiplied by the scale the thread loaded {when}, "
                                  f"{s.name}'s element at the product's index", applied_ranges, address,
                                  applied_logical, {r: extents[r] for r in applied_logical},
                                  scale_reference(views, spec_scale, applied_logical)))
        reach[s.name] = scale_reach(views, spec_scale)
    return tuple(out), tuple(facts), reach


# ---- the kernels


def models(views: ProblemViews, plan: Fp8CtaPlan, name: str) -> list[KernelModel]:
    """A model per loader instantiation the launcher can take (the cta model's pairs: the plan's loaders with the
    pointers the dispatch checked, then the fallback pair where a check can fail), each with the scales' loads."""
    rows = rows_of(views)
    o = tile_origin(views, plan, rows)
    k_tiles = all_k_tiles(views, plan)
    stores, once = store_accesses(views, plan, rows, o)
    scales, scale_facts, scale_reaches = scale_accesses(views, plan, rows, o)
    out = []
    for variant, pair in enumerate(loader_pairs(plan)):
        accesses: list[Access] = []
        bijections: list[Bijection] = [once]
        facts: list[Fact] = [k_cover(views, plan), grid_fits(o, rows), *scale_facts]
        reach = dict(scale_reaches)
        names = []
        for ld, checked in pair:
            rowwise = ld.kind == "gather" and ld.operand in plan.gathers_along_rows
            build = along_rows if rowwise else loader_access
            acc, walk_, extra = build(views, plan, ld, rows, o, k_tiles)
            accesses.append(acc)
            bijections.append(walk_)
            facts.extend(extra)
            reach[ld.operand] = operand_reach(views, ld.operand, rows.rows, checked)
            vec = ld.vector_elems if ld.kind == "cp_async" else ""
            names.append(f"{ld.operand} {ld.kind}{vec}{' along rows' if rowwise else ''}")
        accesses.extend(stores)
        accesses.extend(scales)
        for a in stores:
            reach[a.operand] = operand_reach(views, a.operand, rows.rows)
        label = "fp8_cta" if variant == 0 else "fp8_cta, fallback loaders"
        out.append(KernelModel(f"{name} ({label}: {', '.join(names)})", "fp8_cta", plan.index_type, reach,
                               tuple(accesses), tuple(bijections), tuple(facts), trusted=TRUSTED))
    return out


TRUSTED = ("the PTX semantics of cp.async, ldmatrix and mma.sync m16n8k32 (e4m3), and its fragment layout (the "
           "m16n8 accumulators: lane g = lane / 4, q = lane % 4 holds rows g and g + 8, columns 2q and 2q + 1)",
           *CTA_TRUSTED[1:3],
           "the promotion's arithmetic: each k-tile's tensor-core sum times the scales the model names, added in f32",
           CTA_TRUSTED[3])
