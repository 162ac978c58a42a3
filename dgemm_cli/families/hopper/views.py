"""The `hopper` family's view analysis (pure): what TMA can load of each operand (the tensor maps), the tile and
k loops a tile walks, the store phase's vectors and staging, and the tile grid of a tiling.

TMA takes up to 5 dims with any 16-byte-multiple strides, so an operand is loaded straight from the user's memory.
Per input, its tensor map has two tiled dims (the innermost segment of k and of its other role, m for A / n for B)
and one dim for every other segment it has a non-zero stride on (batch, outer m/n segments, outer k segments); a
tile never straddles a segment, so each outer segment is a loop index of the tile or k-iteration. The tiled dim with
stride 1 is the tensor map's innermost dim: k (K-major) or m/n (MN-major, wgmma's transpose mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dgemm_cli.spec import DTYPE_BYTES
from dgemm_cli.views import ProblemViews, ViewSegment, output_unit_role

SWIZZLE_BYTES = 128  # a 128B-swizzled row: the k extent of a stage
BLOCK_K = SWIZZLE_BYTES // 2  # k a stage for 16-bit inputs
BOX_MN = 64  # MN-major boxes are one 128-byte row of m (or n) wide
TMA_MAX_RANK = 5
TMA_STRIDE_ALIGN = 16
TMA_BASE_ALIGN = 16
TMA_MAX_STRIDE = 1 << 40
TMA_MAX_DIM = 1 << 32
# Output columns a consumer warpgroup stages through shared memory at a time (epi_cols: 16 where 32 does not divide
# the tile's width).
EPI_COLS = 32
EPI_ROW_PITCH = EPI_COLS + 8  # floats: [row][col] staging, conflict-free float2 writes
EPI_COL_PITCH = 64 + 4  # floats: [col][row] staging for m-contiguous C, 16-byte aligned columns
# The packed store (16-bit output, nothing read beside the accumulators, beta == 0 at run time): the epilogue
# runs on the accumulators in registers, stmatrix writes 16-bit pairs into a staging tile of PACK_COLS columns
# by 64 rows, PACK_PAD elements of padding a line (so that stmatrix's eight 16-byte rows hit distinct banks).
# Why: on short-K convs the f32 staging store's shared-memory round trips hold most of the consumer warps' stall
# samples (measured on the H200).
PACK_COLS = 64  # at most; a BN that is not a multiple takes the largest of 32 and 16 that divides it
PACK_PAD = 8
PACK_PITCH = 64 + PACK_PAD  # elements a line: 64 rows of a column, or PACK_COLS (64) columns of a row
PACK_BYTES = 64 * PACK_PITCH * 2  # one 64 x PACK_COLS tile of 16-bit values, either way round
PACK_MIN_VEC = 4  # copies of at least 8 bytes: narrower outputs keep the f32 staging
SWIZZLE_ROWS = 8  # rows of a 128B swizzle atom: A's box of few rows is a whole number of them


@dataclass(frozen=True)
class TmaDim:
    """One dim of an operand's tensor map, innermost first."""

    label: str
    size: int
    stride_bytes: int  # 0 for the innermost dim (contiguous)
    box: int
    index: str  # what indexes it in the kernel: "k" / "mn" (tiled) or "loop<i>" / "kouter<i>"


@dataclass(frozen=True)
class TmaOperand:
    operand: str  # "A" or "B"
    major: str  # "k": K-major (k contiguous); "mn": MN-major (m or n contiguous, wgmma transpose)
    dims: tuple[TmaDim, ...]
    boxes_per_stage: int  # MN-major: one 64-wide box per 64 rows of m/n; K-major: one box
    stage_bytes: int
    # Bytes the view's first element must be aligned to that the spec does not promise: checked at
    # run time, the other family runs when it fails. 0: promised.
    runtime_align: int


@dataclass(frozen=True)
class LoopSegment:
    """A segment that is not tiled: a loop index of the tile (batch, outer m/n) or of the k loop."""

    label: str
    role: str
    size: int
    stride: dict[str, int]  # element stride per operand, 0 where the operand lacks it (broadcast)



def _stride(seg: ViewSegment, op: str) -> int:
    return dict(seg.strides).get(op, 0)


def _inner(views: ProblemViews, role: str) -> ViewSegment | None:
    segs = views.roles[role].segments
    return segs[-1] if segs else None


def _outer(views: ProblemViews, role: str) -> tuple[ViewSegment, ...]:
    return views.roles[role].segments[:-1]


def _loop(seg: ViewSegment, role: str) -> LoopSegment:
    # A, B, C always (0 where the operand lacks the role), and D and the epilogue's views where the spec has them.
    return LoopSegment(seg.label, role, seg.size, {**{op: _stride(seg, op) for op in "ABC"}, **dict(seg.strides)})


def tile_loops(views: ProblemViews) -> tuple[LoopSegment, ...]:
    return tuple([_loop(s, "batch") for s in views.roles["batch"].segments]
                 + [_loop(s, "m") for s in _outer(views, "m")]
                 + [_loop(s, "n") for s in _outer(views, "n")])


def k_loops(views: ProblemViews) -> tuple[LoopSegment, ...]:
    return tuple(_loop(s, "k") for s in _outer(views, "k"))


def tma_operand(views: ProblemViews, name: str, block_mn: int) -> TmaOperand | str:
    """The tensor map of input `name` for a tile `block_mn` wide along its other role, or the reason
    TMA cannot load it."""
    other = "m" if name == "A" else "n"
    facts = views.operands[name]
    spec_op = views.spec.operand(name)
    elem = facts.elem_bytes
    k_seg, o_seg = _inner(views, "k"), _inner(views, other)
    k_stride = _stride(k_seg, name) if k_seg else 0
    o_stride = _stride(o_seg, name) if o_seg else 0
    if k_seg and k_stride == 0:
        return f"{name} has stride 0 along its innermost k segment {k_seg.label} (broadcast inside a tile)"
    if o_seg and o_stride == 0:
        return f"{name} has stride 0 along its innermost {other} segment {o_seg.label} (broadcast inside a tile)"
    if k_stride == 1:
        major = "k"
    elif o_stride == 1:
        major = "mn"
    else:
        return (f"{name}'s innermost dim is strided (its innermost k and {other} segments have strides "
                f"{k_stride or '-'} and {o_stride or '-'}): TMA needs a dense innermost dim")
    k_size = k_seg.size if k_seg else 1
    o_size = o_seg.size if o_seg else 1
    k_label = k_seg.label if k_seg else "-"
    o_label = o_seg.label if o_seg else "-"
    unit_size = k_size if major == "k" else o_size
    # A size-1 tiled dim has no stride of its own: any 16-byte multiple addresses its only element.
    fake = -(-unit_size * elem // TMA_STRIDE_ALIGN) * TMA_STRIDE_ALIGN
    if major == "k":
        dims = [TmaDim(k_label, k_size, 0, block_k(elem), "k"),
                TmaDim(o_label, o_size, o_stride * elem if o_seg else fake, block_mn, "mn")]
    else:
        dims = [TmaDim(o_label, o_size, 0, BOX_MN, "mn"),
                TmaDim(k_label, k_size, k_stride * elem if k_seg else fake, block_k(elem), "k")]
    for i, loop in enumerate(tile_loops(views)):
        if loop.stride[name]:
            dims.append(TmaDim(loop.label, loop.size, loop.stride[name] * elem, 1, f"loop{i}"))
    for i, loop in enumerate(k_loops(views)):
        if loop.stride[name]:
            dims.append(TmaDim(loop.label, loop.size, loop.stride[name] * elem, 1, f"kouter{i}"))
    if len(dims) > TMA_MAX_RANK:
        return (f"{name} needs a {len(dims)}-dim tensor map ({', '.join(d.label for d in dims)}): "
                f"TMA takes at most {TMA_MAX_RANK}")
    for d in dims[1:]:
        if d.stride_bytes % TMA_STRIDE_ALIGN or d.stride_bytes >= TMA_MAX_STRIDE or d.stride_bytes < 0:
            return (f"{name}'s stride along {d.label} is {d.stride_bytes} bytes, not a positive multiple of "
                    f"{TMA_STRIDE_ALIGN} below 2^40")
    for d in dims:
        if d.size >= TMA_MAX_DIM:
            return f"{name}'s dim {d.label} has {d.size} elements, over TMA's 2^32"
    start = spec_op.offset * elem
    if start % TMA_BASE_ALIGN:
        return (f"{name}'s view starts {spec_op.offset} elements ({start} bytes) into its buffer: not "
                f"{TMA_BASE_ALIGN}-byte aligned when the buffer is")
    runtime = TMA_BASE_ALIGN if facts.align < TMA_BASE_ALIGN else 0
    boxes = block_mn // BOX_MN if major == "mn" else 1
    return TmaOperand(name, major, tuple(dims), boxes, block_mn * SWIZZLE_BYTES, runtime)


def block_k(elem: int) -> int:
    """k a stage for inputs of `elem` bytes: one 128-byte swizzle row (64 of 16 bits, 128 of e4m3)."""
    return SWIZZLE_BYTES // elem


def c_vector(views: ProblemViews) -> tuple[str | None, int, int]:
    """(The output's contiguous tiled role, elements per vector store, alignment to check at run time).
    The output is C, or D when the spec has a separate output view."""
    out = views.spec.output
    elem = DTYPE_BYTES[out.dtype]
    unit = output_unit_role(views)
    if unit is None:
        return None, 1, 0
    others = [loop.stride[out.name] for loop in tile_loops(views)]
    other_role = "m" if unit == "n" else "n"
    seg = _inner(views, other_role)
    if seg is not None:
        others.append(_stride(seg, out.name))
    vec = 16 // elem
    while vec > 1 and any(s % vec for s in others):
        vec //= 2
    if out.offset % vec:
        vec = 1
    need = vec * elem
    return unit, vec, (need if out.align < need and vec > 1 else 0)


def epilogue_vectors(views: ProblemViews, c_unit: str | None, c_vec: int) -> tuple[tuple[str, int, int], ...]:
    """The views the store phase reads beside the output that take vector loads along its vectors of
    c_vec elements: (view, elements a load, alignment to check at run time or 0). A view qualifies when it
    is contiguous along c_unit and its other strides and offset keep every vector aligned (views.py's
    vector width, with a 16-byte base where the spec promises less: the launcher checks the pointer). A
    view with stride 0 along c_unit (a per-row scale under column vectors) reads one element a vector."""
    spec = views.spec
    reads = (["C"] if spec.D is not None else []) + [op.name for op in spec.extra_operands if op.name != "D"]
    out = []
    for name in reads if c_unit is not None and c_vec > 1 else ():
        facts = views.operands[name]
        load = min(c_vec, 16 // facts.elem_bytes)
        if facts.unit_role != c_unit or facts.vector_elems_aligned < load:
            continue
        out.append((name, load, 0 if facts.vector_elems >= load else load * facts.elem_bytes))
    return tuple(out)


def epi_cols(block_n: int) -> int:
    """Columns the f32 staging store takes at a time: EPI_COLS, or 16 where it does not divide the tile."""
    return EPI_COLS if block_n % EPI_COLS == 0 else 16


def pack_cols(block_n: int) -> int:
    """Columns the packed store takes at a time: the largest of PACK_COLS, 32 and 16 that divides the tile."""
    return next(c for c in (PACK_COLS, 32, 16) if block_n % c == 0)


def epi_bytes(c_unit: str | None, packed: bool = False) -> int:
    """A consumer warpgroup's staging buffer: f32 columns (or rows), and the packed store's tile in the same bytes."""
    staged = EPI_COLS * EPI_COL_PITCH * 4 if c_unit == "m" else 64 * EPI_ROW_PITCH * 4
    return max(staged, PACK_BYTES) if packed else staged


def packed_store(views: ProblemViews) -> bool:
    """Whether the store phase can pack: a 16-bit output written in vectors of at least PACK_MIN_VEC elements,
    and an epilogue that reads no view (no C beside D, no bias, scale or residual): the values are final
    in registers once beta == 0."""
    spec = views.spec
    unit, vec, _ = c_vector(views)
    reads = spec.D is not None or any(op.name != "D" for op in spec.extra_operands)
    return DTYPE_BYTES[spec.output.dtype] == 2 and unit is not None and vec >= PACK_MIN_VEC and not reads


def a_rows_follow_m(views: ProblemViews) -> bool:
    """Whether A's box can be cut to the rows present: K-major A (a box of whole rows)."""
    a = tma_operand(views, "A", BOX_MN)
    return not isinstance(a, str) and a.major == "k"


def a_box_rows(m_inner: int, block_m: int) -> int:
    return min(block_m, -(-m_inner // SWIZZLE_ROWS) * SWIZZLE_ROWS)


def tile_grid(views: ProblemViews):
    """The tile counts of a tiling, as a function of (block_m, block_n, k_splits) -> (tile groups, tiles_m,
    tiles_n, flat rows), the view facts read once. Flat rows (module doc): m has outer segments, its tiled
    segment is a whole number of 64-row blocks, rows are fixed at build time, the tile is not split, and it
    saves tiles; then the groups count only the other loops and tiles_m covers the m loops' rows."""
    loops = tile_loops(views)
    groups = math.prod(x.size for x in loops)
    m_loops = math.prod(x.size for x in loops if x.role == "m")
    m_inner, n_inner = _size(views, "m"), _size(views, "n")
    run_time = views.spec.run_time_letter
    eligible = m_loops > 1 and m_inner % BOX_MN == 0 and not (run_time and run_time[1] < run_time[2])

    def grid(block_m: int, block_n: int, k_splits: int) -> tuple[int, int, int, bool]:
        tiles_m, tiles_n = math.ceil(m_inner / block_m), math.ceil(n_inner / block_n)
        flat_m = math.ceil(m_loops * m_inner / block_m)
        if eligible and k_splits == 1 and flat_m < m_loops * tiles_m:
            return groups // m_loops, flat_m, tiles_n, True
        return groups, tiles_m, tiles_n, False

    return grid


def flat_rows(views: ProblemViews, block_m: int, k_splits: int) -> bool:
    """Whether the tiles of this tiling run across the m loops (tile_grid)."""
    return tile_grid(views)(block_m, BOX_MN, k_splits)[3]


def weight_streams_once(loops: tuple[LoopSegment, ...], tiles_m: int, flat: bool) -> bool:
    """Whether every weight (B) tile is read by one tile only: one tile row, and no tile group reading the same
    B tiles again (outer m segments in `loops`, the tile loops, unless flat rows fold them into tiles_m; batch
    segments B is broadcast over)."""
    m_rereads = math.prod(x.size for x in loops if x.role == "m")
    batch_rereads = math.prod(x.size for x in loops if x.role == "batch" and x.stride["B"] == 0)
    return tiles_m == 1 and (flat or m_rereads == 1) and batch_rereads == 1


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _inner_is_run_time(views: ProblemViews, role: str) -> bool:
    """Whether the run-time letter (sized over a range) lies in this role's tiled (innermost) segment."""
    run_time = views.spec.run_time_letter
    seg = _inner(views, role)
    return bool(run_time and run_time[1] < run_time[2] and seg and run_time[0] in seg.letters)


def _size(views: ProblemViews, role: str) -> int:
    """The size of a role's tiled (innermost) segment; 1 without one."""
    seg = _inner(views, role)
    return seg.size if seg else 1


def problem_k_iters(views: ProblemViews) -> int:
    """k-tiles of a tile: the tiled k segment in block_k steps, times the outer k segments."""
    bk = block_k(views.operands["A"].elem_bytes)
    return math.prod(loop.size for loop in k_loops(views)) * math.ceil(_size(views, "k") / bk)


def _with_box_rows(t: TmaOperand, rows: int) -> TmaOperand:
    """K-major A with its tiled m dim's box cut to `rows`."""
    dims = tuple(TmaDim(d.label, d.size, d.stride_bytes, rows, d.index) if d.index == "mn" else d for d in t.dims)
    return TmaOperand(t.operand, t.major, dims, t.boxes_per_stage, t.stage_bytes, t.runtime_align)
