"""The `hopper` family's index maps as data (pure): dg/hopper_common.cuh's tile map (tile_at, granule_at), the
tensor maps the launcher encodes (encode(), from the traits' A_map / B_map DIMS) and the boxes the producer issues
through them (issue_stage, coordinate), the persistent, K-split and A-multicast grids (dg/hopper_persistent.cuh,
hopper_split.cuh, hopper_multicast.cuh) and their store phases (staged_store, packed_store, the split's reduce), as
a `formal.model.KernelModel` per kernel.

A TMA load is modelled element by element: a box element at (tile origin + box offset) in every coordinate is, where
each coordinate lies inside its dim, the element at sum(coordinate x stride) of the map (TMA's semantics, trusted),
else zero (TMA's zero fill, trusted). The obligations say that element is the view's element at the logical index
the stage's slot stands for (the tile's rows, the k-iteration's k), and that a zero stands only for an index outside
the view. A role is indexed by its segments' digits (a tile never straddles a segment): the tile loops' indices and
the tiled segment's row; a digit past its segment's size is outside the view (`Access.inside`).

Each intermediate is a `Let` named as the header declares it; tests/test_formal_hopper.py checks that the headers
spell each one's value as the model prints it, or, where a header picks a branch at compile time, that the lines in
`SPELLED` are still there."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dgemm_cli.families.hopper import HopperPlan
from dgemm_cli.families.hopper.tma import tma_context
from dgemm_cli.families.hopper.views import SWIZZLE_BYTES, TMA_MAX_RANK, TMA_MAX_STRIDE, TMA_STRIDE_ALIGN
from dgemm_cli.formal.expr import (
    INDEX,
    INT,
    TRUE,
    Cmp,
    Const,
    Expr,
    Ite,
    Let,
    Min,
    Pred,
    Var,
    all_of,
    evaluate,
)
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import LANE, THREAD, Access, Bijection, Fact, KernelModel, Range
from dgemm_cli.formal.views import operand_reach
from dgemm_cli.views import ProblemViews, inner_stride

HEADERS = ("dg/hopper_common.cuh", "dg/hopper_persistent.cuh", "dg/hopper_split.cuh", "dg/hopper_multicast.cuh")

# The headers' text of the intermediates the model resolves for one plan (a constexpr branch taken, a fold over the
# loops, a loop's induction variable): a change to these lines is a change the model must follow.
SPELLED: dict[str, tuple[str, ...]] = {
    "M_INNER": ("const int M_INNER = T::rows_at_run_time ? m_inner_arg : T::M_INNER;",
                "if constexpr (T::rows_at_run_time) return int(m) * T::M_UNIT;"),
    "TILES_M": ("const int TILES_M = T::rows_at_run_time ? (M_INNER + T::BM - 1) / T::BM : T::TILES_M;",
                "if constexpr (T::rows_at_run_time) return T::TILE_GROUPS * ((m_inner + T::BM - 1) / T::BM) * "
                "T::TILES_N;"),
    "TILES": ("const int TILES = T::rows_at_run_time ? T::TILE_GROUPS * TILES_M * T::TILES_N : T::TILES;",),
    "rows": ("const int rows = min(tiles_m - band * RASTER, RASTER);",),
    "tiles_m": ("const TileOf<T> tile = tile_at<T>(t, TILES_M);", "tile_at<T>(int(blockIdx.x) / SPLITS, TILES_M)",
                "const TileOf<T> tile = tile_at<T>(t, T::TILES_M);"),
    "t": ("for (int t = blockIdx.x; t < TILES; t += gridDim.x) {",),
    # loop_indices: innermost loop first, the remainder by its size, the outermost walked loop the whole quotient.
    "q": ("loop_indices<T, false, FIRST>(tile, t / (tiles_m * TILES_N), std::make_index_sequence<T::TILE_LOOPS>{});",
          "const int q = flat / T::M_INNER;", "q /= l.size;"),
    "tile.loop[i]": ("tile.loop[I] = q % l.size;", "tile.loop[I] = q;", "if constexpr (is_m) tile.loop[I] = 0;"),
    "ko[i]": ("ko[I] = kq % size;", "ko[I] = kq;"),
    "kq": ("outer_k<T>(ko, kt / T::K_INNER_TILES, std::make_index_sequence<T::K_LOOPS>{});", "kq /= size;"),
    "c_tile": ("if constexpr (stride != 0) return static_cast<long long>(tile.loop[I]) * stride;",
               "const long long c_tile = T::FLAT_ROWS ? 0 : c_tile_offset<T>(tile);",
               "c_tile = c_tile_offset<T>(blk);", "const long long c_tile = c_tile_offset<T>(tile);"),
    "out_at": ("return T::out(C, ep) + c_tile + static_cast<long long>(gm) * T::C_SM + static_cast<long long>(gn) * "
               "T::C_SN;",),
    "flat": ("blk = granule_at<T>(flat0, tile);",),
    "row0": ("row0 = blk.m0;", "row0 = tile.m0 + wg * T::WG_M + mi * 64;"),
    "v": ("constexpr int VECTORS = 64 * EPI_COLS / VEC, PER_THREAD = (VECTORS + 127) / 128;",
          "const int u = u0 + i, v = tid + u * 128;",
          "if (u < PER_THREAD && v < VECTORS && vector_at(v, gm, gn, src))",
          "const int v = tid + u * 128;",
          "for (int v = first + int(threadIdx.x) - 128; v < end; v += T::CONSUMERS * 128) {"),
    "a_part": ("const int a_part = int(cluster_rank());",
               "else if constexpr (Config<T>::MULTICAST) return tile.m0 + a_part * Config<T>::A_PART_ROWS + shift;"),
    "a_box_rows": ("return m_inner < T::BM ? (m_inner + 7) / 8 * 8 : T::BM;",),
    "kt0": ("const int kt0 = int(cluster.block_rank()) * T::KT_PER_SPLIT;",),
    "first": ("const int first = int(cluster.block_rank()) * SHARE, end = min(VECS, first + SHARE);",),
    "tile (split)": ("const TileOf<T> tile = tile_at<T>(int(blockIdx.x) / SPLITS, TILES_M);",),
    # The box coordinates (coordinate()) by the dim's source, and a box's shift along the innermost dim.
    "coordinate": ("return k0 + shift;", "if constexpr (!Op::IS_A) return tile.n0 + shift;",
                   "else return tile.m0 + shift;", "return tile.loop[d.index] + shift;", "return ko[d.index] + shift;",
                   "issue_box<T, Op, How>(Dims{}, dst + j * Op::BOX_BYTES, map, bar, tile, k0, ko, a_part, j * 64);",
                   "issue_box<T, Op, How>(Dims{}, dst + j * Op::BOX_BYTES, map, bar, blocks[j], k0, ko, a_part, 0);",
                   "for (int j = 0; j < T::BM / 64; ++j) blocks[j] = granule_at<T>(tile.m0 + j * 64, tile);"),
    # encode(): a dim of size 0 is M_INNER, a box of 0 a_box_rows(M_INNER); strides are the dims' past the first.
    "encode": ("dims[d] = Op::DIMS[d].size != 0 ? Op::DIMS[d].size : m_inner;",
               "box[d] = Op::DIMS[d].box != 0 ? Op::DIMS[d].box : cuuint32_t(a_box_rows<T>(int(m_inner)));",
               "if (d > 0) strides[d - 1] = Op::DIMS[d].stride;", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"),
}


# The tile a block runs (tile_at's argument t).
TILE_T = Var("tile_t", INT, "t")



def _mixed(digits: list[tuple[Expr, Expr]]) -> Expr:
    """The role index of its segments' digits (outer first), each (digit, segment size): the mixed-radix number, in
    index_t (the model's, not a value the kernel forms)."""
    total: Expr = _c(0, ctype=INDEX)
    for d, size in digits:
        total = total * size + d.as_(INDEX) if not (isinstance(total, Const) and total.value == 0) else d.as_(INDEX)
    return total


def _digits_inside(digits: list[tuple[Expr, Expr]]) -> Pred:
    return all_of(*(all_of(Cmp("<=", _c(0), d), Cmp("<", d, size)) for d, size in digits))


@dataclass(frozen=True)
class Rows:
    """M_INNER, the tile counts and the run-time rows' range (the kernels' prologue)."""

    M_INNER: Expr
    TILES_M: Expr
    TILES: Expr
    params: tuple[Range, ...]
    rows: Expr | None  # the run-time letter's size, for the reaches
    run_time: bool


def rows_of(views: ProblemViews, plan: HopperPlan) -> list[Rows]:
    """The kernel's rows: fixed, or at run time one Rows a tile-row count the range of m gives (TILES_M constant in
    each, the rows' range cut where it changes: fact tiles_m_of_rows), so that every division the tile map makes is
    by a constant."""
    rt = views.spec.run_time_letter
    groups_n = plan.tile_groups * _tiles_n_grid(plan)
    if rt is None or rt[1] == rt[2]:
        M = _c(plan.m_inner, "T::M_INNER")
        return [Rows(M, _c(plan.tiles_m, "T::TILES_M"), _c(groups_n * plan.tiles_m, "T::TILES"), (), None, False)]
    _, lo, hi = rt
    unit = views.m // hi
    m = Var("mrows", INT, "m")
    M = Let("M_INNER", m * _c(unit, "T::M_UNIT"))
    out = []
    for tiles_m in range(-(-lo * unit // plan.block_m), -(-hi * unit // plan.block_m) + 1):
        first = max(lo, ((tiles_m - 1) * plan.block_m) // unit + 1)
        last = min(hi, tiles_m * plan.block_m // unit)
        if first > last:
            continue
        tm = Let("TILES_M", _c(tiles_m))
        rows = (Range(m, _c(first), _c(last + 1), size=True),)
        out.append(Rows(M, tm, Let("TILES", _c(groups_n * tiles_m)), rows, m, True))
    return out


def tiles_m_fact(plan: HopperPlan, rows: Rows) -> Fact:
    """With rows at run time: the kernel's TILES_M, (M_INNER + BM - 1) / BM, is the model's over its rows' range."""
    bm = _c(plan.block_m, "T::BM")
    return Fact("tiles_m_of_rows", "written-once", f"TILES_M = (M_INNER + BM - 1) / BM is "
                f"{evaluate_const(rows.TILES_M)} for every run-time row count of this range", rows.params, TRUE,
                Cmp("==", (rows.M_INNER + bm - 1) // bm, rows.TILES_M))


def evaluate_const(e: Expr) -> int:
    return int(evaluate(e, {}))


def _tiles_n_grid(plan: HopperPlan) -> int:
    return -(-plan.tiles_n // plan.a_multicast) * plan.a_multicast


@dataclass(frozen=True)
class Tile:
    """TileOf<T>: the origin in the tiled m and n segments and each tile loop's index (None: not set, the m loops of
    a flat-rows tile, which granule_at sets a 64-row block at a time)."""

    m0: Expr
    n0: Expr
    loop: tuple[Expr | None, ...]


def _loop_indices(plan: HopperPlan, q: Expr, m_walk: bool) -> dict[int, Expr]:
    """loop_indices<T, M, First>: the walked loops' indices from the quotient q, the innermost (highest index) first,
    each the remainder by its size, the outermost walked loop the whole rest."""
    walked = [i for i, x in enumerate(plan.tile_loops)
              if (x.role == "m" if m_walk else not (plan.flat_rows and x.role == "m"))]
    out: dict[int, Expr] = {}
    for i in reversed(walked):
        if i == walked[0]:
            out[i] = Let("tile.loop[i]", q)
        else:
            size = _c(plan.tile_loops[i].size, "l.size")
            out[i] = Let("tile.loop[i]", q % size)
            q = Let("q", q // size)
    return out


def tile_at(plan: HopperPlan, rows: Rows, t: Expr) -> Tile:
    """dg::hopper::tile_at(t, tiles_m)."""
    multicast = plan.a_multicast > 1
    tiles_m = Let("tiles_m", rows.TILES_M)
    tiles_n = _c(_tiles_n_grid(plan) if multicast else plan.tiles_n, "TILES_N")
    bm, bn = _c(plan.block_m, "T::BM"), _c(plan.block_n, "T::BN")
    r = Let("r", t % (tiles_m * tiles_n))
    if multicast:
        m0: Expr = Let("tile.m0", (r // tiles_n) * bm)
        n0: Expr = Let("tile.n0", (r % tiles_n) * bn)
    else:
        raster = _c(plan.raster_group, "RASTER")
        band = Let("band", r // (raster * tiles_n))
        in_band = Let("in_band", r % (raster * tiles_n))
        rows_ = Let("rows", raster_rows(plan, rows, band))
        m0 = Let("tile.m0", (band * raster + in_band % rows_) * bm)
        n0 = Let("tile.n0", (in_band // rows_) * bn)
    q = Let("q", t // (tiles_m * tiles_n))
    found = _loop_indices(plan, q, False)
    loops = tuple(None if (plan.flat_rows and x.role == "m") else found[i] for i, x in enumerate(plan.tile_loops))
    return Tile(m0, n0, loops)


def raster_rows(plan: HopperPlan, rows: Rows, band: Expr) -> Expr:
    """tile_at's `rows = min(tiles_m - band * RASTER, RASTER)`: the tile rows of band `band`, RASTER but in the last
    band, as a conditional on the band (fact raster_rows: the two agree on every band), so that each case divides
    by a constant where the tile counts are."""
    raster = _c(plan.raster_group, "RASTER")
    last = (rows.TILES_M - 1) // raster
    if evaluate_const(rows.TILES_M) <= plan.raster_group:
        return rows.TILES_M  # one band
    return Ite(Cmp("<", band, last), raster, rows.TILES_M - last * raster)


def raster_rows_fact(plan: HopperPlan, rows: Rows) -> Fact:
    band = Var("band")
    raster = _c(plan.raster_group, "RASTER")
    bands = (rows.TILES_M + raster - 1) // raster
    return Fact("raster_rows", "written-once", "tile_at's rows of a band, min(tiles_m - band * RASTER, RASTER), are "
                "the model's: RASTER but in the last band", (*rows.params, Range(band, _c(0), bands)), TRUE,
                Cmp("==", Min(rows.TILES_M - band * raster, raster), raster_rows(plan, rows, band)))


def granule_at(plan: HopperPlan, flat: Expr, tile: Tile) -> Tile:
    """dg::hopper::granule_at(flat, tile): row `flat` of the M_ROWS run -> its M_INNER index and the m loops'."""
    flat = Let("flat", flat)
    q = Let("q", flat // _c(plan.m_inner, "T::M_INNER"))
    m0 = Let("b.m0", flat - q * _c(plan.m_inner, "T::M_INNER"))
    found = _loop_indices(plan, q, True)
    return Tile(m0, tile.n0, tuple(found.get(i, x) for i, x in enumerate(tile.loop)))


def _loops_of(plan: HopperPlan, tile: Tile, role: str) -> list[tuple[Expr, Expr]]:
    out = []
    for i, x in enumerate(plan.tile_loops):
        if x.role == role:
            index = tile.loop[i]
            assert index is not None, "a flat-rows tile's m loops are its blocks'"
            out.append((index, _c(x.size)))
    return out


@dataclass(frozen=True)
class KIter:
    """issue_stage's k-iteration kt: k0 in the tiled k segment and the outer k loops' indices."""

    k0: Expr
    ko: tuple[Expr, ...]


def k_iteration(plan: HopperPlan, kt: Expr) -> KIter:
    k_tiles = _c(-(-plan.k_inner // plan.block_k), "T::K_INNER_TILES")
    k0 = Let("k0", (kt % k_tiles) * _c(plan.block_k, "T::BK"))
    n = len(plan.k_loops)
    ko: list[Expr] = [_c(0)] * n
    kq: Expr = Let("kq", kt // k_tiles)
    for i in reversed(range(n)):
        if i == 0:
            ko[i] = Let("ko[i]", kq)
        else:
            size = _c(plan.k_loops[i].size, "size")
            ko[i] = Let("ko[i]", kq % size)
            kq = Let("kq", kq // size)
    return KIter(k0, tuple(ko))


def _k_digits(plan: HopperPlan, it: KIter, c: Expr) -> list[tuple[Expr, Expr]]:
    return [*((k, _c(x.size)) for k, x in zip(it.ko, plan.k_loops)), (it.k0 + c, _c(plan.k_inner, "T::K_INNER"))]


# ---- the tensor maps and the producer's boxes


@dataclass(frozen=True)
class MapDim:
    """One dim of a tensor map as encode() passes it: size and box (run-time where the traits say 0), stride in
    bytes (the innermost's is the element), and its coordinate's source (dg::hopper::Source) and loop index."""

    label: str
    size: Expr
    stride_bytes: int
    box: Expr
    source: str
    index: int


def tensor_map(views: ProblemViews, plan: HopperPlan, operand: str, rows: Rows) -> tuple[MapDim, ...]:
    """The operand's map from the rendered traits (tma.tma_context: what the .cu declares), through encode()."""
    t = plan.a if operand == "A" else plan.b
    ctx = tma_context(t, rows.run_time, plan.a_rows_follow_m)
    elem = views.operands[operand].elem_bytes
    out = []
    for i, d in enumerate(ctx["dims"]):
        size = _c(d["size"]) if d["size"] else rows.M_INNER
        if d["box"]:
            box: Expr = _c(d["box"])
        else:
            box = Let("a_box_rows", Ite(Cmp("<", rows.M_INNER, _c(plan.block_m, "T::BM")),
                                        ((rows.M_INNER + 7) // 8) * 8, _c(plan.block_m, "T::BM")))
        out.append(MapDim(d["label"], size, elem if i == 0 else int(d["stride"]), box, d["source"], int(d["index"])))
    return tuple(out)


def _coordinate(d: MapDim, operand: str, tile: Tile, it: KIter, part_row0: Expr | None, shift: Expr) -> Expr:
    """coordinate<T, Op, D>(tile, k0, ko, a_part, shift); `part_row0`: a_part x A_PART_ROWS with A multicast."""
    if d.source == "AT_K":
        return it.k0 + shift
    if d.source == "AT_MN":
        if operand == "B":
            return tile.n0 + shift
        return tile.m0 + shift if part_row0 is None else tile.m0 + part_row0 + shift
    if d.source == "AT_LOOP":
        index = tile.loop[d.index]
        assert index is not None
        return index + shift
    return it.ko[d.index] + shift


def tma_load(views: ProblemViews, plan: HopperPlan, operand: str, rows: Rows, t: Var, kt: Var,
             multicast_rank: Var | None) -> tuple[Access, Bijection, tuple[Fact, ...]]:
    """One operand's boxes of a k-iteration of tile t, element by element; the boxes' cover of the stage's tile;
    the map's facts (TMA's stride rule, the box, the extent inside the view)."""
    is_a = operand == "A"
    elem = views.operands[operand].elem_bytes
    dims = tensor_map(views, plan, operand, rows)
    top = plan.a if is_a else plan.b
    k_major = top.major == "k"
    boxes = top.boxes_per_stage
    flat = is_a and plan.flat_rows
    parts = plan.a_multicast if is_a else 1
    tile = tile_at(plan, rows, t)
    it = k_iteration(plan, kt)
    # The box element (e0 innermost, e1) and box j of the stage; with A multicast the loading block's part p.
    e0, e1 = Var("e0"), Var("e1")
    j = Var("j")
    part_rows = plan.block_m // parts
    a_part: Expr | None = None
    ranges: list[Range] = [*rows.params, Range(t, _c(0), rows.TILES), Range(kt, _c(0), _c(plan.k_iters, "T::K_ITERS"))]
    dest = tile
    if parts > 1:
        assert multicast_rank is not None
        # The loading block's rank is its tile's (the grid strides by whole clusters: fact cluster_rank); the
        # receiving block of rank q runs tile t - a_part + q of the same tile row.
        a_part = Let("a_part", t % _c(parts, "T::A_PARTS"))
        ranges.append(Range(multicast_rank, _c(0), _c(parts, "T::A_PARTS")))
        dest = tile_at(plan, rows, Let("t", t - a_part + multicast_rank))  # the receiving block's t
    if boxes > 1:
        ranges.append(Range(j, _c(0), _c(boxes, "Op::BOXES")))
    ranges += [Range(e0, _c(0), dims[0].box), Range(e1, _c(0), dims[1].box)]
    shift: Expr = _c(0)
    block = tile
    if flat:
        block = granule_at(plan, tile.m0 + j * 64, tile)
    elif boxes > 1:
        shift = j * 64
    # The coordinates of box element (e0, e1): the tiled dims' origin plus the element's offset in the box (the
    # box's shift on the innermost), every other dim's box is 1.
    part_row0 = a_part * _c(part_rows, "Config<T>::A_PART_ROWS") if a_part is not None else None
    coords: list[Expr] = []
    for i, d in enumerate(dims):
        base = _coordinate(d, operand, block, it, part_row0, shift if i == 0 else _c(0))
        coords.append(base + (e0 if i == 0 else e1 if i == 1 else _c(0)))
    inside_map = all_of(*(all_of(Cmp("<=", _c(0), c), Cmp("<", c, d.size)) for c, d in zip(coords, dims)))
    count = Ite(inside_map, _c(1), _c(0))
    address: Expr = _c(0, ctype=INDEX)
    for c, d in zip(coords, dims):
        assert d.stride_bytes % elem == 0
        step = d.stride_bytes // elem
        term = c.as_(INDEX) if step == 1 else c.as_(INDEX) * _c(step, ctype=INDEX)
        address = term if isinstance(address, Const) else address + term
    # The stage's slot the element lands in: row R of the tile (m or n) and column c of k.
    mn_e, k_e = (e1, e0) if k_major else (e0, e1)
    row: Expr = mn_e + j * 64 if (boxes > 1) else mn_e
    if part_row0 is not None:
        row = part_row0 + mn_e
    # The logical index the slot stands for: the receiving tile's rows (or columns), the k-iteration's k.
    if is_a and plan.flat_rows:
        m_digits = [(dest.m0 + row, _c(plan.m_loop_rows, "T::M_ROWS"))]
    elif is_a:
        m_digits = [*_loops_of(plan, dest, "m"), (dest.m0 + row, rows.M_INNER)]
    else:
        m_digits = []
    n_digits = [*_loops_of(plan, dest, "n"), (dest.n0 + row, _c(plan.n_inner, "T::N_INNER"))] if not is_a else []
    b_digits = _loops_of(plan, dest, "batch")
    k_digits = _k_digits(plan, it, k_e)
    other, digits = ("m", m_digits) if is_a else ("n", n_digits)
    logical = {"k": _mixed(k_digits), other: _mixed(digits)}
    if b_digits:
        logical = {"batch": _mixed(b_digits), **logical}
    inside = _digits_inside([*b_digits, *digits, *k_digits])
    ident = f"{operand.lower()}_tma"
    how = (f"{parts} parts multicast over the cluster, each block's into every block" if parts > 1 else
           f"{boxes} boxes a stage" if boxes > 1 else "one box a stage")
    access = Access(ident, f"{operand}: TMA box elements through its {len(dims)}-d tensor map ({top.major}-major, "
                    f"{how})", operand, "load", tuple(ranges), count, address, 1, logical, {}, zero_fill=True,
                    always=tuple(coords), inside=inside)
    # The boxes' cover of the stage's tile: (part, box, e) onto the tile's rows (those the box holds) x BK.
    rows_loaded = dims[1].box if (is_a and k_major and parts == 1 and not flat) else None
    tile_rows = plan.block_m if is_a else plan.block_n
    y_r, y_c = Var("slot_row"), Var("slot_k")
    walk_ranges = [*rows.params]
    inverse: dict[str, Expr] = {}
    if parts > 1:
        p = Var("p")
        walk_ranges.append(Range(p, _c(0), _c(parts)))
        inverse["p"] = y_r // part_rows
        walk_row: Expr = p * part_rows + e1
        inverse["e1"], inverse["e0"] = y_r % part_rows, y_c
    elif boxes > 1:
        walk_ranges.append(Range(j, _c(0), _c(boxes)))
        walk_row = j * 64 + mn_e
        inverse["j"] = y_r // 64
        inverse[mn_e.name], inverse[k_e.name] = y_r % 64, y_c
    else:
        walk_row = mn_e
        inverse[mn_e.name], inverse[k_e.name] = y_r, y_c
    walk_ranges += [Range(e0, _c(0), dims[0].box), Range(e1, _c(0), dims[1].box)]
    target_rows = rows_loaded if rows_loaded is not None else _c(tile_rows)
    walk = Bijection(f"{ident}_boxes", f"{operand}'s boxes of a stage: each slot of the {tile_rows} x {plan.block_k} "
                     "tile (the rows the box holds) is one box element", "full-k",
                     tuple(walk_ranges[len(rows.params):]), TRUE, (walk_row, k_e),
                     (Range(y_r, _c(0), target_rows), Range(y_c, _c(0), _c(plan.block_k))), inverse,
                     params=rows.params)
    facts = list(map_facts(views, plan, operand, dims, rows))
    if rows_loaded is not None and not (isinstance(rows_loaded, Const) and rows_loaded.value == plan.block_m):
        rr = Var("stale_row")
        facts.append(Fact(f"{ident}_rows_cut", "full-k", f"{operand}'s box holds fewer rows than the tile: a row past "
                          "the box (stale shared memory) is past M in every tile, so its outputs are never stored",
                          (*rows.params, Range(t, _c(0), rows.TILES), Range(rr, rows_loaded, _c(plan.block_m))),
                          TRUE, Cmp("<=", rows.M_INNER, tile.m0 + rr)))
    return access, walk, tuple(facts)


def map_facts(views: ProblemViews, plan: HopperPlan, operand: str, dims: tuple[MapDim, ...],
              rows: Rows) -> tuple[Fact, ...]:
    """What cuTensorMapEncodeTiled requires of the map and what the view requires of it: strides 16-byte multiples
    below 2^40, at most 5 dims, the innermost box one 128-byte swizzle row at most, boxes of 1..256; and the
    extent it describes (every coordinate inside its dim) inside the view's reach."""
    elem = views.operands[operand].elem_bytes
    consts = [Cmp("<=", _c(len(dims)), _c(TMA_MAX_RANK))]
    for d in dims[1:]:
        consts += [Cmp("==", _c(d.stride_bytes % TMA_STRIDE_ALIGN), _c(0)), Cmp("<", _c(0), _c(d.stride_bytes)),
                   Cmp("<", _c(d.stride_bytes, ctype=INDEX), _c(TMA_MAX_STRIDE, ctype=INDEX))]
    ident = f"{operand.lower()}_tma_map"
    box_ok = [Cmp("<=", dims[0].box * elem, _c(SWIZZLE_BYTES))]
    for d in dims:
        box_ok += [Cmp("<=", _c(1), d.box), Cmp("<=", d.box, _c(256)), Cmp("<=", _c(1), d.size)]
    reach = operand_reach(views, operand, rows.rows)
    top: Expr = _c(0, ctype=INDEX)
    for d in dims:
        top = top + (d.size - 1).as_(INDEX) * _c(d.stride_bytes // elem, ctype=INDEX)
    return (Fact(f"{ident}_rules", "in-bounds", f"{operand}'s tensor map: strides 16-byte multiples below 2^40, at "
                 f"most {TMA_MAX_RANK} dims, boxes of 1..256 with the innermost one 128-byte swizzle row at most",
                 rows.params, TRUE, all_of(*consts, *box_ok)),
            Fact(f"{ident}_extent", "in-bounds", f"{operand}'s tensor map: every element it describes (each "
                 f"coordinate inside its dim) lies inside {operand}'s view", rows.params, TRUE,
                 all_of(Cmp("<=", reach.lo, _c(0, ctype=INDEX)), Cmp("<=", top, reach.hi))))


def k_cover(plan: HopperPlan) -> Bijection:
    """The k-iterations: (kt, column of the stage) onto K, the tiled segment's k-tiles under the outer k loops;
    the columns past the segment hold TMA's zero fill (the loads' zero_fill obligations)."""
    kt, c = Var("kt"), Var("k_col")
    it = k_iteration(plan, kt)
    digits = _k_digits(plan, it, c)
    k_total = math.prod(x.size for x in plan.k_loops) * plan.k_inner
    yk = Var("out_k", INDEX)
    k_tiles = -(-plan.k_inner // plan.block_k)
    inner = yk % plan.k_inner
    return Bijection("k_tiles_cover", f"the {plan.k_iters} k-iterations x {plan.block_k} columns cover K = {k_total} "
                     "once (a column past the tiled k segment is zero fill)", "full-k",
                     (Range(kt, _c(0), _c(plan.k_iters)), Range(c, _c(0), _c(plan.block_k))), _digits_inside(digits),
                     (_mixed(digits),), (Range(yk, _c(0), _c(k_total)),),
                     {"kt": (yk // plan.k_inner) * k_tiles + inner // plan.block_k, "k_col": inner % plan.block_k})


# ---- the grids


def schedule(plan: HopperPlan, rows: Rows) -> tuple[Bijection, ...]:
    """The persistent grid (persistent and multicast kernels): block b's iteration i runs tile t = b + i x gridDim,
    for any grid size the launcher picks (min(tiles, resident blocks), whole clusters with A multicast)."""
    b, i, t = Var("block", INT, "blockIdx.x"), Var("iter"), TILE_T
    parts = plan.a_multicast
    if parts > 1:
        gc = Var("clusters")
        grid: Expr = _c(parts, "T::A_PARTS") * gc
        params = (*rows.params, Range(gc, _c(1), rows.TILES // parts + 1))
    else:
        g = Var("grid", INT, "gridDim.x")
        grid = g
        params = (*rows.params, Range(g, _c(1), rows.TILES + 1))
    out = [Bijection("schedule", "the persistent grid: (block, iteration) -> tile block + iteration x gridDim is "
                     "one-to-one onto the tiles, for every grid size", "written-once",
                     (Range(b, _c(0), grid), Range(i, _c(0), rows.TILES)), Cmp("<", b + i * grid, rows.TILES),
                     (b + i * grid,), (Range(t, _c(0), rows.TILES),), {"block": t % grid, "iter": t // grid},
                     params=params)]
    return tuple(out)


def cluster_rank_fact(plan: HopperPlan, rows: Rows) -> Fact:
    """A multicast block's cluster rank (blockIdx.x mod A_PARTS) is its every tile's t mod A_PARTS: the grid is whole
    clusters, so the blocks of a cluster run tiles A_PARTS j .. A_PARTS j + A_PARTS - 1 together."""
    b, i, gc = Var("block", INT, "blockIdx.x"), Var("iter"), Var("clusters")
    parts = plan.a_multicast
    grid = _c(parts, "T::A_PARTS") * gc
    ranges = (*rows.params, Range(gc, _c(1), rows.TILES // parts + 1), Range(b, _c(0), grid),
              Range(i, _c(0), rows.TILES))
    t = b + i * grid
    return Fact("cluster_rank", "full-k", "the multicast grid: every tile a block runs has the block's cluster rank "
                "(t mod A_PARTS = blockIdx.x mod A_PARTS)", ranges, Cmp("<", t, rows.TILES),
                Cmp("==", t % parts, b % parts))


def tile_map(plan: HopperPlan, rows: Rows) -> Bijection:
    """tile_at: tile t -> (tile group, tile row, tile column) is one-to-one onto the grid's tiles."""
    t = TILE_T
    tile = tile_at(plan, rows, t)
    tn_grid = _tiles_n_grid(plan)
    groups = plan.tile_groups
    g, tm, tn = Var("group"), Var("tile_row"), Var("tile_col")
    q = Let("q", t // (Let("tiles_m", rows.TILES_M) * _c(tn_grid, "TILES_N")))
    image = (q, tile.m0 // plan.block_m, tile.n0 // plan.block_n)
    per_group = rows.TILES_M * tn_grid
    if plan.a_multicast > 1:
        t_of = g * per_group + tm * tn_grid + tn
    else:
        rr = plan.raster_group
        band = tm // rr
        rows_ = raster_rows(plan, rows, band)
        t_of = g * per_group + band * (rr * tn_grid) + tn * rows_ + tm % rr
    return Bijection("tile_map", f"tile_at: tile t -> (tile group, tile row, tile column) onto the {groups} x "
                     f"TILES_M x {tn_grid} tiles", "written-once", (Range(t, _c(0), rows.TILES),), TRUE, image,
                     (Range(g, _c(0), _c(groups)), Range(tm, _c(0), rows.TILES_M), Range(tn, _c(0), _c(tn_grid))),
                     {"tile_t": t_of}, params=rows.params)


def _group_tile(plan: HopperPlan, rows: Rows, g: Expr, tm: Expr, tn: Expr) -> Tile:
    """The tile at (tile group, tile row, tile column): the loops' digits of the group (the walked loops, outer
    first), the origins. The store's bijection runs over these, composed with tile_map (tile_at onto them)."""
    found = _loop_indices(plan, g, False)
    loops = tuple(None if (plan.flat_rows and x.role == "m") else found[i] for i, x in enumerate(plan.tile_loops))
    return Tile(tm * plan.block_m, tn * plan.block_n, loops)


# ---- the store phase


@dataclass(frozen=True)
class Store:
    """One store path: its ranges (over the tile t, and over (group, row, column) for the bijection), the vector's
    (gm, gn), guard, count, and the 64-row block's tile (flat rows)."""

    name: str
    text: str
    ranges: tuple[Range, ...]
    gm: Expr
    gn: Expr
    blk: Tile
    guard: Pred
    count: Expr
    lanes: Var | None


def _out_at(views: ProblemViews, plan: HopperPlan, blk: Tile, gm: Expr, gn: Expr, operand: str) -> Expr:
    """out_at (the output) and _view_at's `at` (the epilogue's views): the loop indices' offset plus gm, gn along
    the tiled segments' strides, in long long."""
    total: Expr = _c(0, ctype=INDEX)
    for i, x in enumerate(plan.tile_loops):
        s = x.stride.get(operand, 0)
        if s and blk.loop[i] is not None:
            total = total + blk.loop[i].as_(INDEX) * _c(s, ctype=INDEX)  # type: ignore[union-attr]
    c_tile = Let("c_tile", total, INDEX) if operand == plan.c_operand else total
    sm, sn = inner_stride(views, "m", operand), inner_stride(views, "n", operand)
    at: Expr = c_tile
    if sm:
        at = at + gm.as_(INDEX) * _c(sm, "T::C_SM", INDEX)
    if sn:
        at = at + gn.as_(INDEX) * _c(sn, "T::C_SN", INDEX)
    return Let("out_at", at, INDEX) if operand == plan.c_operand else at


def _block_rows(plan: HopperPlan, tile: Tile, wg: Expr, mi: Expr) -> tuple[Expr, Tile, Pred]:
    """block_rows: a warpgroup's 64-row block's first row, its tile (flat rows: the block's own loop indices), and
    whether it is stored (flat rows: below M_ROWS)."""
    first = tile.m0 + wg * _c(plan.wg_m, "T::WG_M") + mi * 64
    if plan.flat_rows:
        flat0 = Let("flat0", first)
        blk = granule_at(plan, flat0, tile)
        return Let("row0", blk.m0), blk, Cmp("<", flat0, _c(plan.m_loop_rows, "T::M_ROWS"))
    return Let("row0", first), tile, TRUE


def staged_store(plan: HopperPlan, rows: Rows, tile: Tile, outer: tuple[Range, ...], packed: bool) -> Store:
    """staged_store (f32 staging, every beta) or packed_store (beta == 0): a consumer warpgroup's vectors of C_VEC
    outputs along the output's contiguous role."""
    wg, mi, nc, u = Var("wg"), Var("mi"), Var("nc"), Var("u")
    tid = Var("tid", INT, "tid")
    vec = plan.c_vec
    V = _c(vec, "VEC")
    along_m = plan.c_unit == "m"
    cols = plan.pack_cols if packed else plan.epi_cols
    COLS = _c(cols, "PACK_COLS" if packed else "EPI_COLS")
    row0, blk, stored = _block_rows(plan, tile, wg, mi)
    if packed:
        per_line = _c((64 if along_m else cols) // vec, "PER_LINE")
        limit = 64 * cols // vec
        v = Let("v", tid + u * 128)
        guard_v: Pred = TRUE
        iters = limit // 128
        if along_m:
            gm = Let("gm", row0 + (v % per_line) * V)
            gn = Let("gn", tile.n0 + nc * COLS + v // per_line)
        else:
            gm = Let("gm", row0 + v // per_line)
            gn = Let("gn", tile.n0 + nc * COLS + (v % per_line) * V)
    else:
        limit = 64 * cols // vec
        iters = -(-limit // 128)
        v = Let("v", tid + u * 128)
        guard_v = Cmp("<", v, _c(limit))
        if along_m:
            per = _c(64 // vec, "(64 / VEC)")
            gm = Let("gm", row0 + Let("rv", (v % per) * V))
            gn = Let("gn", tile.n0 + nc * COLS + Let("col", v // per))
        else:
            per = _c(cols // vec, "(EPI_COLS / VEC)")
            gm = Let("gm", row0 + Let("r", v // per))
            gn = Let("gn", tile.n0 + nc * COLS + Let("cv", (v % per) * V))
    m_inner, n_inner = rows.M_INNER, _c(plan.n_inner, "T::N_INNER")
    guard = all_of(stored, guard_v, Cmp("<", gm, m_inner), Cmp("<", gn, n_inner))
    lanes = None
    if vec > 1:
        left = (m_inner - gm) if along_m else (n_inner - gn)
        count: Expr = Ite(guard, Min(left, V), _c(0))
    else:
        count = Ite(guard, _c(1), _c(0))
    ranges = (*outer, Range(wg, _c(0), _c(plan.consumers, "T::CONSUMERS")), Range(mi, _c(0), _c(plan.wg_m // 64, "MI")),
              Range(nc, _c(0), _c(plan.block_n // cols)), Range(u, _c(0), _c(max(1, iters))),
              Range(tid, _c(0), _c(128)))
    name = "packed" if packed else "staged"
    text = ("the packed store (beta == 0: stmatrix staging, vectors copied out)" if packed
            else "the f32 staging store (store_vector)")
    return Store(name, text, ranges, gm, gn, blk, guard, count, lanes)


def split_store(plan: HopperPlan, rows: Rows, tile: Tile, outer: tuple[Range, ...]) -> Store:
    """The K split's reduce: block `rank` of the cluster stores its share of the tile's vectors."""
    rank, u = Var("rank", INT, "cluster.block_rank()"), Var("u")
    thread = THREAD
    vec = plan.c_vec
    V = _c(vec, "VEC")
    vecs = plan.block_m * plan.block_n // vec
    share = -(-vecs // plan.k_splits)
    step = plan.consumers * 128
    first = Let("first", rank * _c(share, "SHARE"))
    end = Let("end", Min(_c(vecs, "VECS"), first + _c(share, "SHARE")))
    v = Let("v", first + thread - 128 + u * _c(step, "T::CONSUMERS * 128"))
    if plan.c_unit == "m":
        per = _c(plan.block_m // vec, "(T::BM / VEC)")
        gm = Let("gm", tile.m0 + Let("rv", (v % per) * V))
        gn = Let("gn", tile.n0 + Let("col", v // per))
    else:
        per = _c(plan.block_n // vec, "(T::BN / VEC)")
        gm = Let("gm", tile.m0 + Let("r", v // per))
        gn = Let("gn", tile.n0 + Let("cv", (v % per) * V))
    m_inner, n_inner = rows.M_INNER, _c(plan.n_inner, "T::N_INNER")
    guard = all_of(Cmp("<", v, end), Cmp("<", gm, m_inner), Cmp("<", gn, n_inner))
    if vec > 1:
        left = (m_inner - gm) if plan.c_unit == "m" else (n_inner - gn)
        count: Expr = Ite(guard, Min(left, V), _c(0))
    else:
        count = Ite(guard, _c(1), _c(0))
    ranges = (*outer, Range(rank, _c(0), _c(plan.k_splits, "SPLITS")),
              Range(thread, _c(128), _c(plan.threads, "Config<T>::THREADS")), Range(u, _c(0), _c(-(-share // step))))
    return Store("split", "the K split's reduce (each block's share of the summed tile)", ranges, gm, gn, tile, guard,
                 count, None)


def _out_digits(plan: HopperPlan, rows: Rows, blk: Tile, gm: Expr, gn: Expr) -> dict[str, list[tuple[Expr, Expr]]]:
    """The output element's digits per role: the loops' indices and (gm, gn) in the tiled segments."""
    m_inner = rows.M_INNER if not plan.flat_rows else _c(plan.m_inner, "T::M_INNER")
    return {"batch": _loops_of(plan, blk, "batch"), "m": [*_loops_of(plan, blk, "m"), (gm, m_inner)],
            "n": [*_loops_of(plan, blk, "n"), (gn, _c(plan.n_inner, "T::N_INNER"))]}


def store_accesses(views: ProblemViews, plan: HopperPlan, rows: Rows, st: Store) -> tuple[Access, ...]:
    """The output's vector store and each view the epilogue reads beside it (C for beta where the spec writes D,
    the epilogue's views), at (gm, gn) of the vector's block."""
    out = plan.c_operand
    vec = plan.c_vec
    along_m = plan.c_unit == "m"
    digits = _out_digits(plan, rows, st.blk, st.gm + LANE if along_m else st.gm, st.gn if along_m else st.gn + LANE)
    digits = {r: d for r, d in digits.items() if d}
    logical = {r: _mixed(d) for r, d in digits.items()}
    inside = _digits_inside([x for d in digits.values() for x in d])
    accesses = [Access(f"{out.lower()}_{st.name}_store", f"{out}: {st.text}, {vec}-element vectors", out, "store",
                       st.ranges, st.count, _out_at(views, plan, st.blk, st.gm, st.gn, out), vec, logical, {},
                       aligned=vec if vec > 1 else 1, always=(st.gm, st.gn), inside=inside)]
    spec = views.spec
    reads = (["C"] if spec.D is not None else []) + [op.name for op in spec.extra_operands if op.name != "D"]
    loads = {x: n for x, n, _ in plan.ep_vectors}
    for name in reads:
        at = _out_at(views, plan, st.blk, st.gm, st.gn, name)
        unit = inner_stride(views, plan.c_unit, name) if plan.c_unit else 0
        ident = f"{name.lower()}_{st.name}_read"
        what = "read for beta" if name == "C" else "read by the epilogue"
        if name in loads:  # contiguous along the vector: vector loads of loads[name] elements
            accesses.append(Access(ident, f"{name}: {what} in {st.text}, {loads[name]}-element vector loads", name,
                                   "load", st.ranges, st.count, at, vec, logical, {}, aligned=loads[name],
                                   always=(st.gm, st.gn), inside=inside))
            continue
        # element by element: lane e at at + e x (the view's stride along the vector)
        e = Var("ep_e")
        ranges = (*st.ranges, Range(e, _c(0), _c(vec)))
        one = Ite(Cmp("<", e, st.count), _c(1), _c(0))
        lane_digits = _out_digits(plan, rows, st.blk, st.gm + e if along_m else st.gm,
                                  st.gn if along_m else st.gn + e)
        lane_digits = {r: d for r, d in lane_digits.items() if d}
        accesses.append(Access(ident, f"{name}: {what} in {st.text}, element by element", name, "load", ranges, one,
                               at + e.as_(INDEX) * unit if unit else at, 1,
                               {r: _mixed(d) for r, d in lane_digits.items()}, {}, always=(st.gm, st.gn),
                               inside=_digits_inside([x for d in lane_digits.values() for x in d])))
    return tuple(accesses)


def store_once(plan: HopperPlan, rows: Rows, st_of, name: str, text: str) -> Bijection:
    """(tile group, tile row, tile column, the store's thread and vector, lane) onto the output's elements, each
    once: the store path `st_of(tile, outer ranges)` over the tile at (group, row, column), composed with tile_map
    (tile_at is one-to-one onto those)."""
    g, tm, tn = Var("group"), Var("tile_row"), Var("tile_col")
    tile = _group_tile(plan, rows, g, tm, tn)
    tiles = (Range(g, _c(0), _c(plan.tile_groups)), Range(tm, _c(0), rows.TILES_M),
             Range(tn, _c(0), _c(_tiles_n_grid(plan))))
    st: Store = st_of(tile, (*rows.params, *tiles))
    e = Var("lane_v")
    along_m = plan.c_unit == "m"
    digits = _out_digits(plan, rows, st.blk, st.gm + e if along_m else st.gm, st.gn if along_m else st.gn + e)
    loops = {r: d for r, d in digits.items() if d and r != "k"}
    image: list[Expr] = []
    target: list[Range] = []
    outs = {"batch": Var("out_batch", INDEX), "m": Var("out_m", INDEX), "n": Var("out_n", INDEX)}
    totals = {"batch": _c(math.prod(x.size for x in plan.tile_loops if x.role == "batch")),
              "m": _c(math.prod(x.size for x in plan.tile_loops if x.role == "m")) * rows.M_INNER
              if not plan.flat_rows else _c(plan.m_loop_rows),
              "n": _c(math.prod(x.size for x in plan.tile_loops if x.role == "n") * plan.n_inner)}
    for r in ("batch", "m", "n"):
        if r in loops:
            image.append(_mixed(loops[r]))
            target.append(Range(outs[r], _c(0), totals[r]))
    # The inverse: the output element's digits, its tile and the place in the tile, the store's thread and vector.
    y = {r: outs[r] for r in loops}
    loop_digit: dict[int, Expr] = {}
    for r in ("batch", "m", "n"):
        if r not in y:
            continue
        inner_size = {"batch": None, "m": rows.M_INNER, "n": _c(plan.n_inner)}[r]
        rest: Expr = y[r]
        if inner_size is not None and not (r == "m" and plan.flat_rows):
            rest = y[r] // inner_size
        idx = [i for i, x in enumerate(plan.tile_loops) if x.role == r]
        if r == "m" and plan.flat_rows:
            idx = []
        for i in reversed(idx):
            size = plan.tile_loops[i].size
            loop_digit[i] = rest % size if i != idx[0] else rest
            rest = rest // size
    walked = [i for i, x in enumerate(plan.tile_loops) if not (plan.flat_rows and x.role == "m")]
    group: Expr = _c(0)
    for i in walked:
        group = group * plan.tile_loops[i].size + loop_digit[i]
    if plan.flat_rows:
        m_in = y["m"]
    else:
        m_in = y["m"] % rows.M_INNER if "m" in y else _c(0)
    n_in = y["n"] % plan.n_inner if "n" in y else _c(0)
    R, Col = m_in % plan.block_m, n_in % plan.block_n
    inverse: dict[str, Expr] = {"group": group, "tile_row": m_in // plan.block_m, "tile_col": n_in // plan.block_n}
    vec = plan.c_vec
    lane_of = (R % vec) if along_m else (Col % vec)
    inverse["lane_v"] = lane_of
    if st.name == "split":
        per = plan.block_m // vec if along_m else plan.block_n // vec
        vv = Col * per + R // vec if along_m else R * per + Col // vec
        share = -(-(plan.block_m * plan.block_n // vec) // plan.k_splits)
        step = plan.consumers * 128
        inverse.update({"rank": vv // share, "thread": (vv % share) % step + 128, "u": (vv % share) // step})
    else:
        cols = plan.pack_cols if st.name == "packed" else plan.epi_cols
        rr = R % 64
        inverse.update({"wg": R // plan.wg_m, "mi": (R % plan.wg_m) // 64, "nc": Col // cols})
        cc = Col % cols
        if st.name == "packed":
            per_line = (64 if along_m else cols) // vec
            vv = cc * per_line + rr // vec if along_m else rr * per_line + cc // vec
        else:
            vv = cc * (64 // vec) + rr // vec if along_m else rr * (cols // vec) + cc // vec
        inverse.update({"tid": vv % 128, "u": vv // 128})
    domain = (*st.ranges[len(rows.params):], Range(e, _c(0), _c(vec)))
    return Bijection(name, text, "written-once", domain, all_of(st.guard, Cmp("<", e, st.count)), tuple(image),
                     tuple(target), inverse, params=rows.params)


def split_slices(plan: HopperPlan) -> tuple[Bijection, Fact]:
    """The K split: (rank, k-iteration of its slice) onto the tile's k-iterations, each once; no slice empty."""
    rank, s, kt = Var("rank", INT, "cluster.block_rank()"), Var("slice_kt"), Var("kt")
    per = _c(plan.kt_per_split, "T::KT_PER_SPLIT")
    kt0 = Let("kt0", rank * per)
    kt_end = Let("kt_end", Min(_c(plan.k_iters, "T::K_ITERS"), kt0 + per))
    cover = Bijection("k_slices_cover", f"the K split: the {plan.k_splits} blocks' slices [kt0, kt_end) cover the "
                      f"{plan.k_iters} k-iterations once", "full-k",
                      (Range(rank, _c(0), _c(plan.k_splits)), Range(s, _c(0), per)), Cmp("<", kt0 + s, kt_end),
                      (kt0 + s,), (Range(kt, _c(0), _c(plan.k_iters)),),
                      {"rank": kt // plan.kt_per_split, "slice_kt": kt % plan.kt_per_split})
    nonempty = Fact("k_slices_nonempty", "full-k", "the K split: every block's slice has a k-iteration (kt0 < kt_end)",
                    (Range(rank, _c(0), _c(plan.k_splits)),), TRUE, Cmp("<", kt0, kt_end))
    return cover, nonempty


def split_grid(plan: HopperPlan, rows: Rows) -> Bijection:
    """The K split's grid: block b -> (tile b / SPLITS, rank b mod SPLITS) onto tiles x ranks."""
    b = Var("block", INT, "blockIdx.x")
    t, r = TILE_T, Var("rank")
    splits = plan.k_splits
    return Bijection("split_grid", "the K split's grid: block -> (its cluster's tile, its rank) onto the tiles x "
                     f"{splits} ranks", "written-once", (Range(b, _c(0), rows.TILES * splits),), TRUE,
                     (b // splits, b % splits), (Range(t, _c(0), rows.TILES), Range(r, _c(0), _c(splits))),
                     {"block": t * splits + r}, params=rows.params)


# ---- the kernels


TRUSTED = ("the PTX semantics of cp.async.bulk.tensor (a box element inside every dim is the element at the sum of "
           "coordinate x stride, one outside a dim is zero: FLOAT_OOB_FILL_NONE) and of its multicast, "
           "cuTensorMapEncodeTiled encoding what encode() passes, stmatrix, wgmma and the m64nNk16 fragment layout",
           "the shared-memory side: the 128B swizzle and descriptors, which stage a k-iteration lands in, the mbarrier "
           "protocol (full/empty phases, expect_tx bytes, the cluster's remote releases), the staging buffers' and "
           "the parked partial tile's round trip, DSMEM",
           "the launcher's grid: min(tiles, resident blocks), whole clusters (every grid size is proved)",
           "nvcc and ptxas")


def _loads(views: ProblemViews, plan: HopperPlan, rows: Rows) -> tuple[list[Access], list[Bijection], list[Fact]]:
    t, kt = TILE_T, Var("kt")
    rank = Var("dest_rank") if plan.a_multicast > 1 else None
    accesses, bijections, facts = [], [], []
    for x in ("A", "B"):
        acc, walk, extra = tma_load(views, plan, x, rows, t, kt, rank if x == "A" else None)
        accesses.append(acc)
        bijections.append(walk)
        facts.extend(extra)
    bijections.append(k_cover(plan))
    return accesses, bijections, facts


def models(views: ProblemViews, plan: HopperPlan, name: str) -> list[KernelModel]:
    """The kernel of dg/hopper_<variant>.cuh the plan renders: its loads, grid and store phase(s); with rows at run
    time, a model per tile-row count of the range."""
    return [model(views, plan, name, rows) for rows in rows_of(views, plan)]


def model(views: ProblemViews, plan: HopperPlan, name: str, rows: Rows) -> KernelModel:
    accesses, bijections, facts = _loads(views, plan, rows)
    t = TILE_T
    over_t = (*rows.params, Range(t, _c(0), rows.TILES))
    if plan.k_splits > 1:
        variant = "split"
        bijections.append(split_grid(plan, rows))
        cover, nonempty = split_slices(plan)
        bijections.append(cover)
        facts.append(nonempty)
        paths = [("split", lambda tile, outer: split_store(plan, rows, tile, outer))]
    else:
        variant = "multicast" if plan.a_multicast > 1 else "persistent"
        bijections.extend(schedule(plan, rows))
        if plan.a_multicast > 1:
            facts.append(cluster_rank_fact(plan, rows))
        paths = [("staged", lambda tile, outer: staged_store(plan, rows, tile, outer, False))]
        if plan.packed_store:
            paths.append(("packed", lambda tile, outer: staged_store(plan, rows, tile, outer, True)))
    bijections.append(tile_map(plan, rows))
    if plan.a_multicast == 1:
        facts.append(raster_rows_fact(plan, rows))
    for path, st_of in paths:
        st = st_of(tile_at(plan, rows, t), over_t)
        accesses.extend(store_accesses(views, plan, rows, st))
        bijections.append(store_once(plan, rows, st_of, f"store_once_{path}",
                                     f"{st.text}: (tile, thread, vector, lane) onto {plan.c_operand}'s elements, "
                                     "each once"))
    reach = {x: operand_reach(views, x, rows.rows, plan.runtime_align.get(x, 0))
             for x in {a.operand for a in accesses}}
    label = {"persistent": "persistent grid", "split": f"K split over clusters of {plan.k_splits}",
             "multicast": f"A multicast over clusters of {plan.a_multicast}"}[variant]
    span = ""
    if rows.run_time:
        facts.append(tiles_m_fact(plan, rows))
        lo, hi = evaluate_const(rows.params[0].lo), evaluate_const(rows.params[0].hi) - 1
        span = f"rows at run time: m {lo}..{hi}, {evaluate_const(rows.TILES_M)} tile row(s)"
    extras = [w for w, on in (("flat rows", plan.flat_rows), ("packed store", plan.packed_store), (span, span)) if on]
    kernel = f"{name} [hopper {label}{''.join(', ' + w for w in extras)}]"
    return KernelModel(kernel, "hopper", "long long", reach, tuple(accesses), tuple(bijections), tuple(facts),
                       trusted=TRUSTED)

