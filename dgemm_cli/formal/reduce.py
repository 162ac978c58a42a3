"""dg/reduce.cuh's end of the small-M kernels as data (pure): the walk of a block's partial tile over its valid rows x
cols (consecutive elements along C's contiguous role, a share of them a block of the cluster) and T::store at each,
with the map of (block, thread, iteration) onto the output's elements. The splitk family's slot and finish loops
(dg/splitk.cuh), gemv's and tcgemv's stores walk the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dgemm_cli.families.cta.index import Origin, Rows, epilogue_accesses
from dgemm_cli.formal.expr import INDEX, INT, TRUE, Cmp, Const, Expr, Ite, Let, Min, Pred, Var, all_of, readable
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import Access, Bijection, Fact, Range
from dgemm_cli.views import ProblemViews, output_unit_role


@dataclass(frozen=True)
class TileWalk:
    """dg/reduce.cuh's walk of a partial tile's valid elements (store_partial_tile; splitk's slot and finish loops):
    element e of rows x cols, consecutive e along C's contiguous role, at (r, c) of the tile."""

    rows: Expr
    cols: Expr
    e: Expr
    r: Expr
    c: Expr
    guard: Pred  # e < rows * cols


def valid_extent(name: str, size: Const, total: Expr, origin: Expr) -> Let:
    """`min(size, total - origin)`, the valid rows (columns) of the tile at `origin`, in the form the proof takes: the
    whole tile, or at the last tile (the only one past which `total` ends) its constant remainder, where `total` is
    a constant; the min itself where it is a run-time size. `extent_facts` proves the form equal to the header's
    min."""
    if not isinstance(total, Const):
        return Let(name, Min(size, total - origin, INDEX), INT)
    b, t = size.value, total.value
    if t % b == 0:
        return Let(name, Const(b, size.name), INT)
    return Let(name, Ite(Cmp("<=", origin + size, total), Const(b, size.name), Const(t % b)), INT)


def extent_fact(ident: str, extent: Let, size: Const, total: Expr, origin: Expr, ranges: tuple[Range, ...]) -> Fact:
    return Fact(ident, "written-once", f"{extent.name} = min({size.name}, {readable(total)} - {readable(origin)}): "
                f"the tile's valid {extent.name}, as the header computes them", ranges, TRUE,
                Cmp("==", extent, Min(size, total - origin, INDEX)))


def tile_walk(bm: Const, bn: Const, M: Expr, m0: Expr, n0: Expr, N: Const, e_value: Expr, along_m: bool) -> TileWalk:
    rows = valid_extent("rows", bm, M, m0)
    cols = valid_extent("cols", bn, N, n0)
    e = Let("e", e_value, INT)
    r = Let("r", e % rows if along_m else e // cols, INT)
    c = Let("c", e // rows if along_m else e % cols, INT)
    return TileWalk(rows, cols, e, r, c, Cmp("<", e, rows * cols))


def walk_facts(walk: TileWalk, bm: Const, bn: Const, M: Expr, m0: Expr, n0: Expr, N: Const,
               ranges: tuple[Range, ...]) -> tuple[Fact, ...]:
    """The walk's rows and cols are the header's mins."""
    return (extent_fact("rows_is_min", walk.rows, bm, M, m0, ranges),  # type: ignore[arg-type]
            extent_fact("cols_is_min", walk.cols, bn, N, n0, ranges))  # type: ignore[arg-type]


def walk_inverse(bm: Const, bn: Const, M: Expr, N: Const, y_m: Expr, y_n: Expr, along_m: bool) -> Expr:
    """The element e of its tile's walk that lands at output (y_m, y_n)."""
    r, c = y_m % bm.value, y_n % bn.value
    rows = valid_extent("rows", bm, M, (y_m // bm.value) * bm.value)
    cols = valid_extent("cols", bn, N, (y_n // bn.value) * bn.value)
    return r + c * rows if along_m else r * cols + c


def output_target(views: ProblemViews, M: Expr) -> tuple[tuple[Range, ...], Var, Var, Var]:
    y_b, y_m, y_n = Var("out_batch", INDEX), Var("out_m", INDEX), Var("out_n", INDEX)
    target = (Range(y_m, _c(0), M), Range(y_n, _c(0), _c(views.n, "T::N", INDEX)))
    if views.batch > 1:
        target = (Range(y_b, _c(0), _c(views.batch)), *target)
    return target, y_b, y_m, y_n


def tile_of(plan_tiles_n: int, bm: int, bn: int, tiles_m: Expr, y_b: Expr, y_m: Expr, y_n: Expr,
            batched: bool) -> Expr:
    """The output tile (cta's numbering: n fastest, then m, then batch) that holds (y_b, y_m, y_n)."""
    b = y_b if batched else _c(0, ctype=INDEX)
    return (b * tiles_m + y_m // bm) * plan_tiles_n + y_n // bn


def tile_store(views: ProblemViews, shape: tuple[int, int, int], rows: Rows, o: Origin, ranges: tuple[Range, ...],
               walk: TileWalk, block_inverse: Callable[[Expr, Expr], Expr], ident: str, text: str,
               thread_inverse: Callable[[Expr], dict[str, Expr]]) -> tuple[tuple[Access, ...], Bijection]:
    """T::store(C, m0 + r, n0 + c, ...) of a walk of the tile's elements, and the map of (block, thread, iteration)
    onto the output's elements. `shape`: (BM, BN, tiles along n) of the output tiles (numbered as cta's: n fastest,
    then m, then batch); `block_inverse(tile, e)` and `thread_inverse(e)` give the domain back."""
    block_m, block_n, tiles_n = shape
    N = _c(views.n, "T::N", INDEX)
    gm = Let("gm", o.m0 + walk.r.as_(INDEX), INDEX)
    gn = Let("gn", o.n0 + walk.c.as_(INDEX), INDEX)
    stored = all_of(walk.guard, Cmp("<", gm, rows.M), Cmp("<", gn, N))
    accesses = epilogue_accesses(views, rows, o.batch, ranges, gm, gn, Ite(stored, _c(1), _c(0)),
                                 always=(walk.rows, walk.cols))
    target, y_b, y_m, y_n = output_target(views, rows.M)
    along_m = output_unit_role(views) == "m"
    tile = tile_of(tiles_n, block_m, block_n, o.tiles_m, y_b, y_m, y_n, views.batch > 1)
    bm, bn = _c(block_m, "T::BM", INDEX), _c(block_n, "T::BN", INDEX)
    e = walk_inverse(bm, bn, rows.M, N, y_m, y_n, along_m)
    inverse = {"block": block_inverse(tile, e), **thread_inverse(e)}
    image: tuple[Expr, ...] = (gm, gn) if views.batch == 1 else (o.batch, gm, gn)
    once = Bijection(ident, text, "written-once", ranges[len(rows.param):], walk.guard, image, target, inverse,
                     params=rows.param)
    return accesses, once
