"""The `splitk` family's index maps as data (pure): dg/splitk.cuh's kernel, which runs dg/cta.cuh's block tile
(families/cta/index.py: the tile origin and the loaders) over one K slice, then sums the cluster's partial tiles and
stores C (dg/reduce.cuh's store_partial_tile) or, with GROUPS > 1, writes the cluster's sum to its slot of the scratch
buffer, which the second kernel (finish) adds in group order and stores.

A model per kernel the launcher can take: the cluster kernel with the plan's loaders and with the fallback loaders
where a pointer check picks them, and with groups the finish kernel. The block index is blockIdx.x itself; the
output tile, the K slice's group and the cluster rank are the header's quotients and remainders of it.

Each intermediate is a `Let` named as the header declares it; `SPELLED` lists the header lines where the model
resolves a compile-time branch or a name the header spells otherwise (tests/test_formal_small.py checks them)."""

from __future__ import annotations

from dgemm_cli.families.cta import index as cta_index
from dgemm_cli.families.cta.index import KTiles, Origin, Rows, loader_access, rows_of
from dgemm_cli.families.splitk import SplitKPlan
from dgemm_cli.formal.expr import (
    INDEX,
    TRUE,
    Cmp,
    Const,
    Expr,
    Ite,
    Let,
    Min,
    Var,
    substitute,
)
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, THREAD, Access, Bijection, Fact, KernelModel, Range, Reach
from dgemm_cli.formal.reduce import TileWalk, tile_store, tile_walk, valid_extent, walk_facts
from dgemm_cli.formal.views import operand_reach
from dgemm_cli.views import ProblemViews, output_unit_role

HEADERS = ("dg/splitk.cuh", "dg/reduce.cuh", "dg/cta.cuh")
SCRATCH = "partials"  # the scratch buffer's operand name (GROUPS > 1)

SPELLED = {
    # The cluster rank: the block's place in its cluster of SPLITS blocks along x (trusted: the launch's cluster).
    "tile": "const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x / (SPLITS * GROUPS), M, A, B, C, ep);",
    "split": "const int split = int(cluster.block_rank());",
    "group": "const int group = GROUPS > 1 ? int((blockIdx.x / SPLITS) % GROUPS) : 0;",
    "kt": "load_a.template issue<(j + STAGES - 1) % DA>(As + next % STAGES * A_TILE, A, m0, kt0 + next, M);",
    "rows": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "cols": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "e": "for (int e = split * Threads + int(threadIdx.x); e < rows * cols; e += Splits * Threads) {",
    "r": "const int r = T::c_along_m ? e % rows : e / cols, c = T::c_along_m ? e / rows : e % cols;",
    "c": "const int r = T::c_along_m ? e % rows : e / cols, c = T::c_along_m ? e / rows : e % cols;",
    "gm": "T::store(C, m0 + r, n0 + c, sum, alpha, beta, M, ep);",
    "gn": "T::store(C, m0 + r, n0 + c, sum, alpha, beta, M, ep);",
    "slot": "float* const slot = partials + size_t(blockIdx.x / SPLITS) * T::TILE_ELEMS;",
    "in": "const float* const in = partials + size_t(blockIdx.x) * T::GROUPS * T::TILE_ELEMS;",
}
# The same names where the groups' kernels spell them (the cluster's sum into its slot; finish).
SPELLED_GROUPS = {
    "rows": "const int rows = int(min(index_t(T::BM), M - t.m0)), cols = int(min(index_t(T::BN), T::N - t.n0));",
    "cols": "const int rows = int(min(index_t(T::BM), M - t.m0)), cols = int(min(index_t(T::BN), T::N - t.n0));",
    "e": "for (int e = split * T::THREADS + int(threadIdx.x); e < rows * cols; e += SPLITS * T::THREADS) {",
    "r": "r = T::c_along_m ? e % rows : e / cols;",
    "c": "c = T::c_along_m ? e / rows : e % cols;",
    "gm": "T::store(C, t.m0 + r, t.n0 + c, sum, alpha, beta, T::M, ep);",
    "gn": "T::store(C, t.m0 + r, t.n0 + c, sum, alpha, beta, T::M, ep);",
}
SPELLED_FINISH = {
    "rows": SPELLED_GROUPS["rows"].replace(" M - t.m0", " T::M - t.m0"),
    "cols": SPELLED_GROUPS["cols"].replace(" M - t.m0", " T::M - t.m0"),
    "e": "for (int e = int(threadIdx.x); e < rows * cols; e += T::THREADS) {",
    "tile": "const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x, T::M, A, B, C, ep);",
}





def block_origin(views: ProblemViews, plan: SplitKPlan, rows: Rows, tile: Expr, blocks: Expr) -> Origin:
    """cta::tile_origin<T>(tile, ...) with `tile` an expression of blockIdx.x (the parameter `tile`), over `blocks`
    blocks."""
    base = cta_index.tile_origin(views, plan.tile, rows)
    env = {"tile": Let("tile", tile, INDEX)}
    return Origin(BLOCK, substitute(base.m0, env), substitute(base.n0, env), substitute(base.batch, env),
                  base.tiles_m, base.tiles, (*rows.param, Range(BLOCK, _c(0), blocks)))


def _k_slices(views: ProblemViews, plan: SplitKPlan, block: Expr) -> tuple[Expr, Expr, Expr, Expr]:
    """(split, group, kt0, kt_count) of a block."""
    S, G = _c(plan.splits, "SPLITS"), _c(plan.groups, "GROUPS")
    split = Let("split", block % S)
    group = Let("group", (block // S) % G) if plan.groups > 1 else _c(0, "group")
    kt0 = Let("kt0", (group * S + split) * _c(plan.k_tiles_per_split, "T::KT_PER_SPLIT"))
    k_tiles = _c(plan.k_tiles, "cta::Shape<T>::K_TILES")
    kt_count = Let("kt_count", Min(_c(plan.k_tiles_per_split, "T::KT_PER_SPLIT"), k_tiles - kt0))
    return split, group, kt0, kt_count


def k_facts(views: ProblemViews, plan: SplitKPlan, rows: Rows,
            o: Origin) -> tuple[tuple[Bijection, ...], tuple[Fact, ...]]:
    """Full K: the blocks of one output tile, (group, rank) x the k-tiles of their slice, cover the k-tiles once;
    no slice is empty (the header's kt_count >= 1)."""
    SG = plan.splits * plan.groups
    per = plan.k_tiles_per_split
    tt = Var("out_tile", INDEX)
    j, y_kt = Var("j"), Var("out_kt")
    split, group, kt0, kt_count = _k_slices(views, plan, BLOCK)
    params = (*rows.param, Range(tt, _c(0), o.tiles))
    cover = Bijection("k_slices_cover", f"the {SG} blocks of an output tile ({plan.groups} group(s) x {plan.splits} "
                      f"ranks) and the k-tiles of their slices cover the {plan.k_tiles} k-tiles of K once", "full-k",
                      (Range(BLOCK, tt * SG, tt * SG + SG), Range(j, _c(0), kt_count)), TRUE, (kt0 + j,),
                      (Range(y_kt, _c(0), _c(plan.k_tiles)),),
                      {"block": tt * SG + y_kt // per, "j": y_kt % per}, params=params)
    nonempty = Fact("k_slices_nonempty", "full-k", "every block's K slice holds a k-tile (kt_count >= 1)",
                    o.ranges, TRUE, Cmp("<=", _c(1), kt_count))
    return (cover,), (nonempty, cta_index.k_cover(views, plan.tile))


def _loaders(views: ProblemViews, plan: SplitKPlan, rows: Rows, o: Origin):
    """Each loader pair the launcher can take, with each operand's checked alignment: (label, [(loader, bytes)])."""
    tp = plan.tile
    pairs = [("primary", [(tp.a, tp.a.runtime_align), (tp.b, tp.b.runtime_align)])]
    if tp.runtime_dispatch:
        pairs.append(("fallback loaders (pointer check failed)",
                      [((tp.a.fallback or tp.a) if tp.a.runtime_align else tp.a, 0),
                       ((tp.b.fallback or tp.b) if tp.b.runtime_align else tp.b, 0)]))
    return pairs


def scratch_reach(plan: SplitKPlan, tiles: int) -> Reach:
    """The scratch buffer: [output tile][group][TILE_ELEMS floats], from cudaMallocAsync (256-byte aligned)."""
    return Reach(SCRATCH, Const(0, ctype=INDEX), Const(tiles * plan.groups * plan.tile_elems - 1, ctype=INDEX), 1, 0)


def slot_target(plan: SplitKPlan, views: ProblemViews, rows: Rows) -> tuple[tuple[Range, ...], Var, Var, Var]:
    """The scratch slots a launch fills: (output tile, group, element of the tile's valid rows x cols)."""
    tp = plan.tile
    y_t, y_g, y_e = Var("slot_tile", INDEX), Var("slot_group"), Var("slot_e")
    base = cta_index.tile_origin(views, tp, rows)
    m0, n0 = (substitute(x, {"tile": y_t}) for x in (base.m0, base.n0))
    valid = (valid_extent("rows", _c(tp.block_m, "T::BM", INDEX), rows.M, m0)
             * valid_extent("cols", _c(tp.block_n, "T::BN", INDEX), _c(views.n, "T::N", INDEX), n0))
    return ((Range(y_t, _c(0), base.tiles), Range(y_g, _c(0), _c(plan.groups)), Range(y_e, _c(0), valid)),
            y_t, y_g, y_e)


def models(views: ProblemViews, plan: SplitKPlan, name: str) -> list[KernelModel]:
    tp = plan.tile
    rows = rows_of(views)
    S, G, SG = plan.splits, plan.groups, plan.splits * plan.groups
    threads = _c(tp.threads, "T::THREADS")
    bm, bn = _c(tp.block_m, "T::BM", INDEX), _c(tp.block_n, "T::BN", INDEX)
    N = _c(views.n, "T::N", INDEX)
    along_m = output_unit_role(views) == "m"
    tile = BLOCK // (_c(S, "SPLITS") * _c(G, "GROUPS"))
    base = cta_index.tile_origin(views, tp, rows)
    o = block_origin(views, plan, rows, tile, base.tiles * SG)
    split, group, kt0, kt_count = _k_slices(views, plan, BLOCK)
    j = Var("j")
    k_tiles = KTiles(Let("kt", kt0 + j), (Range(j, _c(0), kt_count),))
    slices, k_facts_ = k_facts(views, plan, rows, o)

    # The cluster's sum: block `split` walks elements split * THREADS + thread + i * SPLITS * THREADS.
    it = Var("i")
    per_thread = -(-(tp.block_m * tp.block_n) // (S * tp.threads))
    ranges = (*o.ranges, Range(THREAD, _c(0), threads), Range(it, _c(0), _c(per_thread)))
    walk = tile_walk(bm, bn, rows.M, o.m0, o.n0, N, split * threads + THREAD + it * (_c(S, "SPLITS") * threads),
                     along_m)

    def thread_inverse(e: Expr) -> dict[str, Expr]:
        return {"thread": e % tp.threads, "i": e // (tp.threads * S)}

    reach: dict[str, Reach] = {}
    if G == 1:
        shape = (tp.block_m, tp.block_n, tp.tiles_n)
        outs, once = tile_store(views, shape, rows, o, ranges, walk, lambda t, e: t * S + (e // tp.threads) % S,
                                "store_once", f"the cluster's sum: (block, thread, i) onto {views.spec.output.name}'s "
                                f"{views.batch} x M x {views.n} elements, each once", thread_inverse)
        bijections: tuple[Bijection, ...] = (once, *slices)
        for a in outs:
            reach[a.operand] = operand_reach(views, a.operand, rows.rows)
    else:
        outs, bijections = _slot_store(views, plan, rows, o, ranges, walk, group), slices
        reach[SCRATCH] = scratch_reach(plan, tp.tiles)
        bijections = (*bijections, _slot_once(views, plan, rows, ranges, walk, o))
    out = []
    for label, pair in _loaders(views, plan, rows, o):
        accesses, walks, facts = [], [], list(k_facts_)
        r = dict(reach)
        for ld, checked in pair:
            acc, ld_walk, extra = loader_access(views, tp, ld, rows, o, k_tiles)
            accesses.append(acc)
            walks.append(ld_walk)
            facts.extend(extra)
            r[ld.operand] = operand_reach(views, ld.operand, rows.rows, checked)
        loaders = ", ".join(f"{ld.operand} {ld.kind}{ld.vector_elems if ld.kind in ('cp_async', 'transpose') else ''}"
                            for ld, _ in pair)
        facts.extend(walk_facts(walk, bm, bn, rows.M, o.m0, o.n0, N, o.ranges))
        out.append(KernelModel(f"{name} [{label}: {loaders}]", "splitk", tp.index_type, r, (*accesses, *outs),
                               (*bijections, *walks), tuple(facts), trusted=TRUSTED))
    if G > 1:
        out.append(_finish_model(views, plan, name))
    return out


def _slot_store(views: ProblemViews, plan: SplitKPlan, rows: Rows, o: Origin, ranges: tuple[Range, ...],
                walk: TileWalk, group: Expr) -> tuple[Access, ...]:
    """slot[e] = the cluster's sum: the scratch buffer at [output tile][group][e]."""
    tp = plan.tile
    tile = BLOCK // (_c(plan.splits, "SPLITS") * _c(plan.groups, "GROUPS"))
    elems = _c(plan.tile_elems, "T::TILE_ELEMS", INDEX)
    slot = Let("slot", (BLOCK // _c(plan.splits, "SPLITS")).as_(INDEX) * elems, INDEX)
    reference = (tile.as_(INDEX) * plan.groups + group) * plan.tile_elems + walk.e
    return (Access("slot_store", "the scratch buffer: the cluster's sum of element e into its group's slot", SCRATCH,
                   "store", ranges, Ite(walk.guard, _c(1), _c(0)), slot + walk.e, 1,
                   {"tile": tile, "group": group, "e": walk.e},
                   {"tile": _c(tp.tiles), "group": _c(plan.groups), "e": elems}, always=(walk.rows, walk.cols),
                   reference=reference),)


def _slot_once(views: ProblemViews, plan: SplitKPlan, rows: Rows, ranges: tuple[Range, ...], walk: TileWalk,
               o: Origin) -> Bijection:
    tp = plan.tile
    S, G = plan.splits, plan.groups
    target, y_t, y_g, y_e = slot_target(plan, views, rows)
    tile = BLOCK // (_c(S, "SPLITS") * _c(G, "GROUPS"))
    group = (BLOCK // _c(S, "SPLITS")) % _c(G, "GROUPS")
    return Bijection("slot_once", "the clusters' sums: (block, thread, i) onto the scratch slots (output tile, group, "
                     "element of the tile), each once", "written-once", ranges[len(rows.param):], walk.guard,
                     (tile, group, walk.e), target,
                     {"block": (y_t * G + y_g) * S + (y_e // tp.threads) % S, "thread": y_e % tp.threads,
                      "i": y_e // (tp.threads * S)}, params=rows.param)


def _finish_model(views: ProblemViews, plan: SplitKPlan, name: str) -> KernelModel:
    """finish<T>: block t adds the GROUPS slots of output tile t's elements and stores them."""
    tp = plan.tile
    rows = rows_of(views)  # fixed: a plan with groups has no run-time rows
    threads = _c(tp.threads, "T::THREADS")
    bm, bn = _c(tp.block_m, "T::BM", INDEX), _c(tp.block_n, "T::BN", INDEX)
    N = _c(views.n, "T::N", INDEX)
    along_m = output_unit_role(views) == "m"
    o = block_origin(views, plan, rows, BLOCK, _c(tp.tiles))
    it, g = Var("i"), Var("g")
    per_thread = -(-(tp.block_m * tp.block_n) // tp.threads)
    walk = tile_walk(bm, bn, rows.M, o.m0, o.n0, N, THREAD + it * threads, along_m)
    ranges = (*o.ranges, Range(THREAD, _c(0), threads), Range(it, _c(0), _c(per_thread)))
    elems = _c(plan.tile_elems, "T::TILE_ELEMS", INDEX)
    groups = _c(plan.groups, "T::GROUPS")
    read_ranges = (*ranges, Range(g, _c(0), groups))
    slot_in = Let("in", BLOCK.as_(INDEX) * groups * elems, INDEX)
    read = Access("slot_load", "the scratch buffer: finish reads group g's sum of element e", SCRATCH, "load",
                  read_ranges, Ite(walk.guard, _c(1), _c(0)), slot_in + g * elems + walk.e, 1,
                  {"tile": BLOCK, "group": g, "e": walk.e}, {"tile": _c(tp.tiles), "group": groups, "e": elems},
                  always=(walk.rows, walk.cols), reference=(BLOCK.as_(INDEX) * plan.groups + g) * plan.tile_elems
                  + walk.e)
    target, y_t, y_g, y_e = slot_target(plan, views, rows)
    read_once = Bijection("slot_read_once", "finish: (block, thread, i, g) onto the scratch slots (output tile, group, "
                          "element), each read once", "full-k", read_ranges, walk.guard, (BLOCK, g, walk.e), target,
                          {"block": y_t, "thread": y_e % tp.threads, "i": y_e // tp.threads, "g": y_g})
    shape = (tp.block_m, tp.block_n, tp.tiles_n)
    outs, once = tile_store(views, shape, rows, o, ranges, walk, lambda t, e: t, "store_once",
                            f"finish: (block, thread, i) onto {views.spec.output.name}'s {views.batch} x M x "
                            f"{views.n} elements, each once",
                            lambda e: {"thread": e % tp.threads, "i": e // tp.threads})
    reach = {SCRATCH: scratch_reach(plan, tp.tiles), **{a.operand: operand_reach(views, a.operand, rows.rows)
                                                        for a in outs}}
    return KernelModel(f"{name} [finish: the {plan.groups} groups' sums]", "splitk", tp.index_type, reach,
                       (read, *outs), (read_once, once), walk_facts(walk, bm, bn, rows.M, o.m0, o.n0, N, o.ranges),
                       trusted=TRUSTED)


TRUSTED = ("the PTX semantics of cp.async, ldmatrix and mma.sync, and the mma m16n8k16 fragment layout",
           "the shared-memory side: which stage a k-tile lands in, the fragments the math reads from it, and "
           "Math::park's layout of the partial tile",
           "the cluster: its rank is blockIdx.x % SPLITS (clusters of SPLITS blocks along x), and the DSMEM sum reads "
           "each rank's partial tile at (r, c) once, in rank order",
           "the scratch buffer's allocation (cudaMallocAsync of scratch_bytes) and the dependent launch: finish reads "
           "the slots after the cluster kernel has completed",
           "nvcc and ptxas")
