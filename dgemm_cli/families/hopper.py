"""Kernel family `hopper`: TMA loads + wgmma, warp-specialized and persistent (sm_90a, 16-bit inputs) (pure).

The kernel: one producer warpgroup whose single thread issues `cp.async.bulk.tensor` loads of A and
B tiles into a ring of 128B-swizzled shared-memory stages (completion on an mbarrier per stage),
and one or two consumer warpgroups that run `wgmma.mma_async` m64nNk16 on those stages (f32
accumulators in registers) and release each stage through a second mbarrier. `setmaxnreg` moves
registers from the producer to the consumers. A grid of one block per SM walks the output tiles in
grouped (L2-friendly) order; the epilogue stages each consumer's accumulators through shared
memory so that C is written with vector stores along its contiguous dim.

K split. When the output tiles leave many SMs idle (decode [16,4096]x[4096,4096]: 32 tiles of 64x128, 64 of
64x64, for 132 SMs), the `k_splits` blocks of a thread-block cluster share one tile, each streaming
its slice of the k-iterations. Each parks its f32 tile in its own (then idle) pipeline stages; after a
cluster barrier each block sums a share of the tile over the cluster's blocks through distributed shared
memory in rank order (bit-identical run to run) and runs the same store phase. The grid then holds one
cluster a tile (not persistent).

Few rows. A K-major A whose rows fit in one tile row (M_INNER < BM) is loaded as a box of only its rows
(rounded up to the 8-row swizzle atom): wgmma still reads 64 rows, but the rows past the box hold stale
shared memory whose products land only in accumulator rows the store phase skips. At one row of tiles the
kernel's time follows the boxes' bytes, zero-filled rows included (measured on the H200), so fewer rows run faster.

Rows across m loops. When the m role has outer segments (a tile loop, like n of an NCHW 1x1 convolution) and its
tiled segment is a multiple of 64 rows, the m loops and the tiled segment walk as one run of rows: a tile is BM
consecutive rows of it, made of 64-row blocks that each lie inside one m-loop index (A is loaded a 64-row box
at a time with that block's coordinates; the store phase addresses C by block). No half-empty tile at the end
of each m-loop index, and fewer tiles: conv 8x256x56x56 (3136 rows a batch) has 784 tiles of 128x128, not
800, which is 3 for each of 264 persistent blocks instead of 4 for 8 of them.

Views: TMA takes up to 5 dims with any 16-byte-multiple strides, so an operand is loaded straight
from the user's memory. Per input, its tensor map has two tiled dims (the innermost segment of k
and of its other role, m for A / n for B) and one dim for every other segment it has a non-zero
stride on (batch, outer m/n segments, outer k segments); a tile never straddles a segment, so each
outer segment is a loop index of the tile or k-iteration. The tiled dim with stride 1 is the
tensor map's innermost dim: k (K-major) or m/n (MN-major, wgmma's transpose mode). The gates list
what TMA cannot take; those problems go to another family and `explain` says which gate failed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.spec import DTYPE_BYTES
from dgemm_cli.views import ProblemViews, ViewSegment, grid_too_large, output_unit_role

NAME = "hopper"
SUMMARY = "TMA + wgmma, warp-specialized producer/consumers, persistent grid (sm_90a, f16/bf16)"
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): yes when the letter is
# the tiled m segment (the kernel takes M_INNER as an argument and encodes A's tensor map for it); gated below
# when it is an outer m segment (a tile loop).
RUNTIME_ROWS = True

BLOCK_K = 64  # one 128-byte swizzle row of 16-bit elements
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
PRODUCER_REGS = 40
# Tile widths (the wgmma N, a multiple of 16 here). Past the powers of two, widths that let the tile count fill
# the SMs: N = 14336 is 112 tiles of 128 for 132 SMs (20 idle), 128 tiles of 112. An MN-major B is loaded in
# 64-wide boxes, so it takes only multiples of 64.
# Below 64 (NARROW_N), only in A-multicast clusters: the tokens' side of decode with the roles swapped, where cuBLAS
# runs 24 and 32 (not measured elsewhere).
BLOCK_N = (32, 48, 64, 96, 112, 128, 160, 192, 224, 256)
NARROW_N = 64
# wgmma's share of the tensor-core peak by tile width (shared-memory bytes per FLOP fall as N grows), set at the
# powers of two and interpolated between them (32: not measured, below 64 by 64's step below 128).
WGMMA_EFF = {32: 0.44, 64: 0.62, 128: 0.8, 256: 0.9}
LAUNCH_US = 1.5  # fixed cost of a launch in the cost model (barrier setup, tensor-map prefetch, the last tile)
RASTER_GROUP = 8  # tile rows (along the larger tile count) walked together for L2 reuse
MAX_ACC_REGS = 128  # f32 accumulators per consumer thread
CONSUMER_OVERHEAD_REGS = 48  # descriptors, addresses, loop state and the epilogue beside the accumulators
SMEM_RESERVED_PER_BLOCK = 1024  # what the hardware keeps of an SM's shared memory for each resident block
SMEM_ALIGN = 1024  # 128B-swizzled TMA destinations: the kernel rounds its shared-memory base up to this
SWIZZLE_ROWS = 8  # rows of a 128B swizzle atom: A's box of few rows is a whole number of them
# TMA pipeline depths: at most DEEP_STAGES. 8 stages are the fastest depth of every decode tiling measured on the H200
# where they fit; other depths (7, 9, 10, 12) ran level or slower, so none is offered. Rings deeper than DEEP_STAGES
# only in A-multicast clusters, whose 64x32 stages are 12 KB: there 10 measured fastest.
STAGES = (3, 4, 5, 6, 8, 10, 12, 16)
DEEP_STAGES = 8
# Blocks of a cluster that share one tile's k-iterations: at most 2, one wave. 3- and 4-way splits measured slower
# on the H200 (clusters of 4 blocks with a whole SM's shared memory each do not all fit at once).
K_SPLITS = (1, 2)
# Blocks of a cluster along n that share one A box a k-iteration, each loading half of its rows and multicasting
# them to both (a_multicast). Where N is a few tiles and M many (the weight as A: decode with the roles swapped,
# C^T = W X^T, as cuBLAS's nvjet kernels run [41..64,4096]x[4096,4096] in 1x2 clusters), A streams from DRAM once
# and through L2 once without a K split and its cluster reduce. Measured slower than the K split on 2 of 3 specs:
# priced below (MULTICAST_STREAM_GBPS, MULTICAST_FIXED_US).
A_MULTICAST = (1, 2)
# Accumulator sets a consumer's wgmmas alternate between, k16 step by k16 step: with one, every wgmma of a tile waits
# on the previous one's accumulators; with two, neighbours are independent and the sets are summed once at the
# tile's end. Two sets only with the K split (a long chain of k-iterations a slice): measured faster there on the
# H200, level or slower on the unsplit and A-multicast kernels. The model credits them ACC_CHAINS_SPLIT_US.
ACC_CHAINS = (1, 2)
ACC_CHAINS_SPLIT_US = 0.1  # what the K-split kernel gains with two sets in the model (measured 0.05-0.4 µs)
# The rate A streams at from DRAM through a multicast cluster, at the model's scale. Fitted to one spec on the H200
# ([4096,4096]x[4096,44] f16, roles swapped), where the multicast kernel streams slower than the K split, for reasons
# not yet understood: priced so that the split stays ahead and `tune` can still measure the multicast plan.
MULTICAST_STREAM_GBPS = 3250
# And a fixed cost on top, fitted to three measured specs: the model's picks come out right on two of them (on
# 3 x [1024,512]x[512,36] with A shared it takes the unsplit plan, which measured 8% slower).
MULTICAST_FIXED_US = 2.0
RED_PAD = 4  # floats of padding a row (or column) of the parked partial tile: 16-byte aligned vectors
# The K split's reduction and its cluster launch: two cluster barriers and the partial tile's round trip through
# shared memory, then its DSMEM reads at about 32 bytes a clock an SM. Priced at what the 64x64 split plan measured
# over its estimate on the H200, against gemv and tcgemv at 1..16 rows. Bounded above by the splitk family (its own
# reduce priced 0.4): a higher price hands GQA P.V over a KV cache to splitk, which measured slower there.
CLUSTER_REDUCE_US = 0.8
DSMEM_BYTES_PER_CLK = 32
# The round trip of a TMA load that misses L2 while DRAM is busy (half the SMs or more streaming). Where the weight
# streams from DRAM once (one tile row), an SM can read it no faster than `stages` boxes a round trip (Little's
# law), whatever DRAM's whole bandwidth; with fewer SMs streaming the trip shortens towards the idle 0.8 µs (a
# tile or two of a small weight). Not counted where A streams (one tile column): not measured there. Fitted on the
# H200 to the unsplit 64x64 plan on 64 of the 132 SMs at [17..64, 2048]x[2048, 4096] bf16, at the model's scale.
# At 8 stages this bound stays under the DRAM time wherever the tiles fill the GPU (64x64 split 2 at N = 4096, 128
# tiles at N = 14336), so those plans keep their estimates.
STREAM_LATENCY_US = 1.6
# The tensor maps' L2 promotion (what an L2 miss of a TMA load fetches from DRAM), measured on the H200: where the
# weight streams once (one tile row) beside an A box of at most 64 rows (the weight at least half of each stage's
# bytes), the maps run up to 3% faster without promotion; everywhere else 256 bytes runs as fast or faster (up to 8%).
# First in the domain: where the costs tie (a split plan, below), the plan takes no promotion.
L2_PROMOTIONS = ("none", "256B")
# The model's factor on the DRAM time without promotion where the weight streams: below the measured mean gain (1.5%),
# since the model already prices hopper close to gemv at one row, where gemv measures faster. Counted only on unsplit
# plans with A boxes of 9..64 rows: split plans and boxes of one swizzle atom (1..8 rows) are contested by gemv and
# tcgemv, which the model already prices hopper too low against, so counting the gain there would hand them to hopper.
# Those plans still take no promotion: their costs tie and "none" comes first.
STREAM_NO_PROMOTION = 0.99
STREAM_A_ROWS = (SWIZZLE_ROWS + 1, 64)  # A's box rows beside the streamed weight where the gain is counted
REUSE_NO_PROMOTION = 1.08  # ... and on the whole (the tiles' or the DRAM time) elsewhere


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


@dataclass(frozen=True)
class HopperPlan:
    family = NAME
    block_m: int
    block_n: int
    block_k: int
    consumers: int  # consumer warpgroups
    ctas_per_sm: int  # resident blocks an SM: 2 lets one block's epilogue overlap the other's main loop
    wg_m: int  # rows of the tile per consumer warpgroup (64 or 128: one or two m64 wgmmas)
    stages: int
    raster_group: int
    a: TmaOperand
    b: TmaOperand
    tile_loops: tuple[LoopSegment, ...]  # batch and outer m/n segments, outer first
    k_loops: tuple[LoopSegment, ...]  # outer k segments, outer first
    m_inner: int  # the tiled segments' sizes
    n_inner: int
    k_inner: int
    m_inner_label: str
    n_inner_label: str
    k_inner_label: str
    c_unit: str | None  # "m" or "n": C's contiguous tiled dim, or None
    c_vec: int  # elements per vector store of C
    c_runtime_align: int
    tiles_m: int
    tiles_n: int
    tile_groups: int  # product of the tile loop sizes
    tiles: int
    k_iters: int
    threads: int
    consumer_regs: int
    epi_bytes: int  # per consumer warpgroup
    smem_bytes: int
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    notes: tuple[str, ...] = field(default=())
    assignment: dict[str, Any] = field(default_factory=dict)  # the tiling graph's values (the tuning database keeps it)
    c_operand: str = "C"  # the view the epilogue writes: C, or D when the spec has a separate output view
    # Views the store phase reads along C's vector (C for beta when D is written, bias, scale, residual)
    # with vector loads: (view, elements a load, bytes to check at run time or 0).
    ep_vectors: tuple[tuple[str, int, int], ...] = ()
    k_splits: int = 1  # blocks of a cluster sharing one tile, each a slice of the k-iterations
    kt_per_split: int = 0  # k-iterations of a slice (k_iters when not split)
    red_pitch: int = 0  # floats a row (column for m-contiguous C) of the parked partial tile; 0: not split
    # A's box rows follow M_INNER when it is below BM (K-major A): rows of the box when M is fixed (BM
    # otherwise); with rows at run time, the launcher computes them.
    a_rows_follow_m: bool = False
    a_box_rows: int = 0
    packed_store: bool = False  # the packed store runs when beta == 0 (see PACK_COLS)
    flat_rows: bool = False  # tiles run across the m loops (see the module doc); tile_groups then counts the others
    l2_promotion: str = "256B"  # both tensor maps' L2 promotion (L2_PROMOTIONS)
    # Blocks of a cluster along n sharing A's box (A_MULTICAST); 2: tile pairs (n tiles 2j, 2j + 1 of one tile row)
    # run as clusters, each block loading half of A's box rows into both, and the grid counts tiles_n rounded up
    # to even (a last tile past N loads and stores nothing of its own).
    a_multicast: int = 1
    # Accumulator sets the k16 steps alternate between (ACC_CHAINS), summed after the tile's last wgmma.
    acc_chains: int = 1

    @property
    def arch_features(self) -> frozenset[str]:
        """What the kernel's instructions and launch need (arch.FEATURES)."""
        used = {"tma", "wgmma", "setmaxnreg", "griddepcontrol"}
        if self.k_splits > 1 or self.a_multicast > 1:
            used.add("clusters")
        if self.packed_store:
            used.add("stmatrix")
        return frozenset(used)

    @property
    def runtime_align(self) -> dict[str, int]:
        return {x: n for x, n in (("A", self.a.runtime_align), ("B", self.b.runtime_align),
                                  (self.c_operand, self.c_runtime_align),
                                  *((x, n) for x, _, n in self.ep_vectors)) if n}

    @property
    def epi_cols(self) -> int:
        return epi_cols(self.block_n)

    @property
    def pack_cols(self) -> int:
        return pack_cols(self.block_n)

    @property
    def grid_desc(self) -> str:
        if self.k_splits > 1:
            return (f"one cluster of {self.k_splits} blocks a tile ({self.kt_per_split} of the {self.k_iters} "
                    "k-iterations each, summed through DSMEM)")
        if self.a_multicast > 1:
            return (f"a persistent grid of {self.a_multicast}-block clusters along n, each block loading "
                    f"1/{self.a_multicast} of A's box into every block of its cluster (TMA multicast)")
        return "a persistent grid"

    @property
    def grid_tiles(self) -> int:
        """The tiles the grid walks: with A multicast, tiles_n rounded up to whole clusters."""
        return self.tile_groups * self.tiles_m * _round_up(self.tiles_n, self.a_multicast)

    @property
    def summary(self) -> str:
        return (f"wgmma m64n{self.block_n}k16, tile {self.block_m}x{self.block_n}x{self.block_k}, "
                f"{self.consumers} consumer warpgroup(s) + 1 producer, {self.ctas_per_sm} block(s) an SM, "
                f"{self.stages} TMA stages, "
                f"L2 promotion {self.l2_promotion}, "
                f"A {self.a.major}-major, B {self.b.major}-major, {self.smem_bytes} B smem, {self.tiles} tiles "
                f"on {self.grid_desc}, raster group {self.raster_group}")

    def detail_lines(self) -> list[str]:
        """What `explain` adds below the decisions: the grid, the tensor maps, C's stores."""
        out = [f"=> {self.threads} threads, {self.smem_bytes} B shared memory, {self.tiles} tiles "
               f"({self.tile_groups} x {self.tiles_m} x {self.tiles_n}) on {self.grid_desc}, "
               f"{self.k_iters} k-iterations"]
        if self.flat_rows:
            out.append(self.flat_rows_line())
        if self.a_box_line():
            out.append(self.a_box_line())
        if self.load_order_line():
            out.append(self.load_order_line())
        for t in (self.a, self.b):
            dims = ", ".join(f"{d.label} (size {d.size}" + (f", {d.stride_bytes} B" if d.stride_bytes else ", dense")
                             + f", box {d.box})" for d in t.dims)
            out.append(f"{t.operand}: {t.major}-major TMA, {len(t.dims)}-d tensor map [{dims}]")
        out.append(f"C: {self.c_vec}-element vector stores along {self.c_unit or 'nothing'}")
        if self.packed_store:
            out.append(self.packed_line())
        out.extend(self.ep_vector_lines())
        out.extend(f"note: {n}" for n in self.notes)
        return out

    @property
    def m_loop_rows(self) -> int:
        """Rows of the run the tiles walk: the m loops times the tiled segment when flat_rows, else the segment."""
        if not self.flat_rows:
            return self.m_inner
        return self.m_inner * math.prod(x.size for x in self.tile_loops if x.role == "m")

    def flat_rows_line(self) -> str | None:
        if not self.flat_rows:
            return None
        loops = ", ".join(x.label for x in self.tile_loops if x.role == "m")
        return (f"rows: the m loop(s) {loops} and {self.m_inner_label} ({self.m_inner} rows, a multiple of 64) walk as "
                f"one run of {self.m_loop_rows} rows, {self.tiles_m} tiles of {self.block_m}; a 64-row block never "
                "straddles an m-loop index")

    @property
    def b_streams_once(self) -> bool:
        """The weight (B) streams from DRAM once: one tile row, no tile group reading it again (weight_streams_once).
        Its box is then the long load of each stage, and its lines are of no use in L2 once read."""
        return weight_streams_once(self.tile_loops, self.tiles_m, self.flat_rows)

    @property
    def b_first(self) -> bool:
        """Each stage issues B's box before A's where the weight streams once: its box is the long load and A's
        comes from L2. Measured on the H200: faster with the K split, level unsplit. Elsewhere A first."""
        return self.b_streams_once

    @property
    def b_evict_first(self) -> bool:
        """B's loads mark the lines they bring into L2 evict_first where the weight streams once: they are read once,
        so they should not push out what is read again (A, C, the next grid's prefetched boxes). Measured faster on
        the H200 with kernels chained in a graph: the gain is the next grid's boxes, prefetched before its wait for
        this grid, kept in L2 while this grid streams (without that prefetch the hint changes nothing). Elsewhere B's
        lines are read again: no hint. gemv's and tcgemv's weight loads measured slower with it: they keep none."""
        return self.b_streams_once

    @property
    def a_evict_first(self) -> bool:
        """A's loads mark their L2 lines evict_first where A streams from DRAM once: multicast over a cluster that
        covers every tile column, no tile group reading the same A tiles again (n loops; batch segments A is
        broadcast over). The weight of decode with the roles swapped, as b_evict_first is B's."""
        n_rereads = math.prod(x.size for x in self.tile_loops if x.role == "n")
        batch_rereads = math.prod(x.size for x in self.tile_loops if x.role == "batch" and x.stride["A"] == 0)
        return (self.a_multicast > 1 and _round_up(self.tiles_n, self.a_multicast) == self.a_multicast
                and n_rereads == 1 and batch_rereads == 1)

    def load_order_line(self) -> str | None:
        """The stage's load order and B's L2 priority where the weight streams once (explain and the kernel's header
        comment)."""
        if self.a_evict_first:
            return (f"loads: A's box in {self.a_multicast} parts, each block of a cluster loading one into every "
                    "block (TMA multicast), its L2 lines evict_first (A streams from DRAM once)")
        if not self.b_streams_once:
            return None
        return ("loads: B's box before A's in each stage, its L2 lines evict_first (the weight streams from DRAM "
                "once; A's box comes from L2)")

    def a_box_line(self) -> str | None:
        """What A's box holds when it is cut to the rows present (explain and the kernel's header comment)."""
        if not self.a_rows_follow_m:
            return None
        if not self.a_box_rows:  # rows at run time: the launcher cuts the box
            return (f"A: a box of the run-time rows rounded up to {SWIZZLE_ROWS} (a swizzle atom) while they are "
                    f"fewer than {self.block_m}")
        if self.a_box_rows < self.block_m:
            return f"A: a box of {self.a_box_rows} rows, the rows present rounded up to {SWIZZLE_ROWS} (a swizzle atom)"
        return None

    def packed_line(self) -> str:
        """What the packed store does (explain and the kernel's header comment)."""
        return (f"{self.c_operand}: when beta == 0, the epilogue on the accumulators in registers, 16-bit pairs "
                f"written by stmatrix{'.trans' if self.c_unit == 'm' else ''} into a {PACK_BYTES} B staging tile "
                f"({self.pack_cols} columns at a time), copied out in {self.c_vec}-element vectors")

    def ep_vector_lines(self) -> list[str]:
        """One line a view the store phase loads as vectors (explain and the kernel's header comment)."""
        return [f"{x}: {n}-element vector loads along {self.c_unit} in the store phase"
                + (f" ({b}-byte aligned at run time, else the fallback)" if b else "") for x, n, b in self.ep_vectors]

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "b_first": self.b_first, "b_evict_first": self.b_evict_first,
                "a_evict_first": self.a_evict_first, "decisions": [x.to_dict() for x in self.decisions]}


# ------------------------------------------------------------------------------------------------
# What TMA can take
# ------------------------------------------------------------------------------------------------

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
        dims = [TmaDim(k_label, k_size, 0, BLOCK_K, "k"),
                TmaDim(o_label, o_size, o_stride * elem if o_seg else fake, block_mn, "mn")]
    else:
        dims = [TmaDim(o_label, o_size, 0, BOX_MN, "mn"),
                TmaDim(k_label, k_size, k_stride * elem if k_seg else fake, BLOCK_K, "k")]
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
    return TmaOperand(name, major, tuple(dims), boxes, block_mn * BLOCK_K * elem, runtime)


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


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    """(constraint, reason) for everything that rules the family out of this problem; [] if none."""
    out = []
    if not arch.wgmma_flops_per_sm_clk:
        out.append(("wgmma", f"{arch.name} has no wgmma (sm_90a only)"))
    dtype = views.operands["A"].dtype
    if dtype not in ("f16", "bf16"):
        out.append(("wgmma dtypes", f"A and B are {dtype}: this family runs f16/bf16 wgmma (tf32 would miss "
                                    "f32's 1e-5 tolerance)"))
    for name in ("A", "B"):
        got = tma_operand(views, name, 128)
        if isinstance(got, str):
            out.append((f"TMA {name}", got))
    if views.spec.dynamic and len(views.roles["m"].segments) > 1:
        out.append(("rows at run time", "the run-time letter is an outer m segment, a tile loop: this family "
                                        "takes only the tiled (innermost) m segment at run time"))
    return out


# ------------------------------------------------------------------------------------------------
# Tiling graph and cost
# ------------------------------------------------------------------------------------------------

def epi_cols(block_n: int) -> int:
    """Columns the f32 staging store takes at a time: EPI_COLS, or 16 where it does not divide the tile."""
    return EPI_COLS if block_n % EPI_COLS == 0 else 16


def pack_cols(block_n: int) -> int:
    """Columns the packed store takes at a time: the largest of PACK_COLS, 32 and 16 that divides the tile."""
    return next(c for c in (PACK_COLS, 32, 16) if block_n % c == 0)


def wgmma_eff(block_n: int) -> float:
    """WGMMA_EFF at block_n, linear between its widths."""
    widths = sorted(WGMMA_EFF)
    lo = max(w for w in widths if w <= block_n)
    hi = min(w for w in widths if w >= block_n)
    if lo == hi:
        return WGMMA_EFF[lo]
    return WGMMA_EFF[lo] + (WGMMA_EFF[hi] - WGMMA_EFF[lo]) * (block_n - lo) / (hi - lo)


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


def red_pitch(a: Assignment, c_unit: str | None) -> int:
    """Floats a row of the parked partial tile ([row][col]; [col][row] when C is m-contiguous)."""
    return (a["block_m"] if c_unit == "m" else a["block_n"]) + RED_PAD


def k_split_slices(k_iters: int, splits: int) -> tuple[int, str | None]:
    """(k-iterations a slice, why the split does not fit): every block of the cluster needs a slice."""
    per = math.ceil(k_iters / splits)
    if (splits - 1) * per >= k_iters:
        return per, f"{k_iters} k-iteration(s) in slices of {per} leave block {splits - 1} without one"
    return per, None


def a_rows_follow_m(views: ProblemViews) -> bool:
    """Whether A's box can be cut to the rows present: K-major A (a box of whole rows)."""
    a = tma_operand(views, "A", BOX_MN)
    return not isinstance(a, str) and a.major == "k"


def a_box_rows(m_inner: int, block_m: int) -> int:
    return min(block_m, -(-m_inner // SWIZZLE_ROWS) * SWIZZLE_ROWS)


def smem_bytes(a: Assignment, c_unit: str | None, elem: int, packed: bool = False) -> int:
    """Stages, each consumer's epilogue staging (a K split parks its tile over the stages instead), barriers."""
    stage = (a["block_m"] + a["block_n"]) * BLOCK_K * elem
    barriers = 2 * a["stages"] * 8  # a full and an empty mbarrier per stage
    staging = a["consumers"] * epi_bytes(c_unit, packed) if a.get("k_splits", 1) == 1 else 0
    return a["stages"] * stage + staging + barriers + SMEM_ALIGN


def entry_regs(consumers: int, ctas_per_sm: int) -> int:
    """Registers a thread starts with: what __launch_bounds__(threads, ctas_per_sm) allows, a multiple of 8."""
    threads = 128 * (consumers + 1)
    return min(255, 65536 // (threads * ctas_per_sm)) // 8 * 8


def consumer_regs(consumers: int, ctas_per_sm: int) -> int:
    """Registers a consumer thread asks for with setmaxnreg.inc: the block's pool (what its threads
    started with) minus what the producer warpgroup keeps, a multiple of 8, at most 240. Asking for
    more than the pool holds would block the consumers forever (setmaxnreg.inc waits for registers)."""
    pool = entry_regs(consumers, ctas_per_sm) * 128 * (consumers + 1)
    return min(240, (pool - 128 * PRODUCER_REGS) // (128 * consumers) // 8 * 8)


def build_tiling_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    elem = views.operands["A"].elem_bytes
    c_unit = c_vector(views)[0]
    packed = packed_store(views)
    g = ConstraintGraph()
    g.node("block_m", (64, 128, 256), "rows of C per tile")
    b_major = tma_operand(views, "B", BOX_MN)
    mn_major_b = not isinstance(b_major, str) and b_major.major == "mn"
    g.node("block_n", tuple(bn for bn in BLOCK_N if not mn_major_b or bn % BOX_MN == 0),
           "columns of C per tile (the wgmma N)" + (f"; B is n-major: {BOX_MN}-wide boxes" if mn_major_b else ""))
    g.node("consumers", (1, 2), "consumer warpgroups (each owns block_m / consumers rows)")
    g.node("ctas_per_sm", (1, 2), "resident blocks an SM (2: one block's epilogue overlaps the other's math)")
    g.node("stages", STAGES, "TMA pipeline depth (shared-memory stages)")
    g.node("k_splits", K_SPLITS, "blocks of a cluster sharing one tile, each streaming a slice of K", default=1)
    g.node("a_multicast", A_MULTICAST, "blocks of a cluster along n sharing A's box, each loading a part of its rows "
           "into every block (TMA multicast)", default=1)
    g.node("acc_chains", ACC_CHAINS, "accumulator sets the k16 steps alternate between (2: consecutive wgmmas do not "
           "wait on each other's result)", default=1)
    g.node("l2_promotion", L2_PROMOTIONS, "what an L2 miss of the tensor maps' loads fetches from DRAM (256 bytes, or "
           "the line alone)", default="256B")

    def wg_rows(a: Assignment) -> str | None:
        wg_m = a["block_m"] // a["consumers"]
        return None if wg_m in (64, 128) else f"{wg_m} rows per warpgroup; wgmma takes one or two m64 blocks"
    g.constrain("warpgroup rows", "instruction", ["block_m", "consumers"], wg_rows,
                "each consumer warpgroup issues one or two m64nNk16 wgmmas per k16 step")

    def acc_regs(a: Assignment) -> str | None:
        regs = a["block_m"] // a["consumers"] // 64 * a["block_n"] // 2 * a["acc_chains"]
        if regs > MAX_ACC_REGS:
            return f"{regs} f32 accumulators per thread (> {MAX_ACC_REGS})"
        room = consumer_regs(a["consumers"], a["ctas_per_sm"]) - CONSUMER_OVERHEAD_REGS
        if regs > room:
            return (f"{regs} f32 accumulators per thread, but {a['ctas_per_sm']} block(s) an SM leave a consumer "
                    f"{room} beside its other registers")
        return None
    g.constrain("accumulator registers", "arch", ["block_m", "block_n", "consumers", "ctas_per_sm", "acc_chains"],
                acc_regs,
                "accumulators stay in registers next to the descriptors and the epilogue")

    g.constrain("two blocks an SM", "arch", ["consumers", "ctas_per_sm"],
                lambda a: "two 384-thread blocks an SM start at 80 registers a thread: not yet run on a GPU"
                if a["ctas_per_sm"] == 2 and a["consumers"] == 2 else None,
                "only the 256-thread block (one consumer) has run two to an SM")

    def smem_ok(a: Assignment) -> str | None:
        need = smem_bytes(a, c_unit, elem, packed)
        limit = min(arch.smem_per_block, arch.smem_per_sm // a["ctas_per_sm"] - SMEM_RESERVED_PER_BLOCK)
        return None if need <= limit else f"{need} B > {limit} B per block ({a['ctas_per_sm']} block(s) an SM)"
    g.constrain("shared memory", "arch", ["block_m", "block_n", "consumers", "ctas_per_sm", "stages", "k_splits"],
                smem_ok, "stages + per-consumer epilogue staging (none with a K split) + barriers")

    k_iters = problem_k_iters(views)
    grid = tile_grid(views)

    def k_split_ok(a: Assignment) -> str | None:
        s = a["k_splits"]
        if s == 1:
            return None
        groups, tiles_m, tiles_n, _ = grid(a["block_m"], a["block_n"], s)
        tiles = groups * tiles_m * tiles_n
        if tiles >= arch.sms:
            return f"{tiles} tiles already fill {arch.sms} SMs: a split would add its reduction and no SM"
        if tiles * s > arch.sms:
            return (f"{tiles} tiles x {s} = {tiles * s} blocks, more than one wave of {arch.sms} SMs (measured "
                    "slower: the clusters did not all fit at once)")
        why = k_split_slices(k_iters, s)[1]
        if why:
            return why
        part = (a["block_n"] if c_unit == "m" else a["block_m"]) * red_pitch(a, c_unit) * 4  # [col][row] or [row][col]
        stages = a["stages"] * (a["block_m"] + a["block_n"]) * BLOCK_K * elem
        return None if part <= stages else f"the {part} B partial tile does not fit the {stages} B of stages"
    a_k_major = a_rows_follow_m(views)  # K-major A: its box is whole rows, cut into parts of rows
    rows_cut_at_run_time = bool(views.spec.run_time_letter) and _inner_is_run_time(views, "m")

    def multicast_ok(a: Assignment) -> str | None:
        parts = a["a_multicast"]
        if parts == 1:
            return None
        if a["k_splits"] > 1:
            return "a K split's cluster already holds the tile's blocks"
        if not a_k_major:
            return "A is m-major: its box is cut into parts only along whole k-major rows"
        if rows_cut_at_run_time or a_box_rows(_size(views, "m"), a["block_m"]) < a["block_m"]:
            return "A's box is cut to the rows present: no whole box to share"
        groups, tiles_m, tiles_n, flat = grid(a["block_m"], a["block_n"], 1)
        if flat:
            return "flat rows load A a 64-row block at a time"
        if tiles_n != parts:
            return (f"{tiles_n} tile column(s): multicast where one cluster of {parts} covers N (A would otherwise "
                    "stream once a cluster; not measured)")
        return None
    g.constrain("narrow tiles", "problem", ["block_n", "a_multicast"],
                lambda a: f"{a['block_n']} columns: tiles under {NARROW_N} wide run only in A-multicast clusters"
                if a["block_n"] < NARROW_N and a["a_multicast"] == 1 else None,
                "narrow tiles only where A is shared over a cluster (decode with the roles swapped)")
    g.constrain("deep rings", "problem", ["stages", "a_multicast"],
                lambda a: f"{a['stages']} stages: more than {DEEP_STAGES} only in A-multicast clusters (measured "
                "slower elsewhere)" if a["stages"] > DEEP_STAGES and a["a_multicast"] == 1 else None,
                f"rings deeper than {DEEP_STAGES} stages only where A is shared over a cluster")
    g.constrain("accumulator sets", "problem", ["k_splits", "acc_chains"],
                lambda a: "two accumulator sets only with a K split (measured level or slower without one)"
                if a["acc_chains"] == 2 and a["k_splits"] == 1 else None,
                "a second accumulator set only where it was measured faster: the K-split kernel")
    g.constrain("A multicast", "problem", ["block_m", "block_n", "k_splits", "a_multicast"], multicast_ok,
                "A's box shared over a cluster along n only where the cluster covers N, A whole rows (K-major, "
                "not cut), no K split")
    g.constrain("k split", "problem", ["block_m", "block_n", "stages", "k_splits"], k_split_ok,
                "a K split only where the tiles leave SMs idle and the blocks fit one wave, every block with a slice, "
                "the f32 partial tile parked in the block's pipeline stages")
    return g


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
    """k-tiles of a tile: the tiled k segment in BLOCK_K steps, times the outer k segments."""
    return math.prod(loop.size for loop in k_loops(views)) * math.ceil(_size(views, "k") / BLOCK_K)


def _cost(views: ProblemViews, arch: Arch):
    """Estimated µs, only to rank candidates (against each other and the other families): the busiest
    SM's tiles, each the slowest of its math, its loads at the depth the pipeline allows, and its share
    of L2 traffic; at least the DRAM time of the unique bytes; plus the persistent kernel's start."""
    elem = views.operands["A"].elem_bytes
    c_elem = views.operands["C"].elem_bytes
    grid = tile_grid(views)
    m_inner = _size(views, "m")
    k_iters_all = problem_k_iters(views)
    clk = arch.clock_ghz * 1e3
    follow = a_rows_follow_m(views)
    loops = tile_loops(views)
    unique = (views.operands["A"].span * elem + views.operands["B"].span * elem
              + views.batch * views.m * views.n * c_elem * (2 if views.spec.beta else 1))
    dram_us = unique / (arch.dram_gbps * 1e3)
    a_bytes = views.operands["A"].span * elem
    tma_latency_us = 0.8

    def cost(a: Assignment) -> float:
        bm, bn, cons, ctas, splits = a["block_m"], a["block_n"], a["consumers"], a["ctas_per_sm"], a["k_splits"]
        # A K split makes `splits` blocks of every tile, each with a slice of its k-iterations.
        parts = a["a_multicast"]
        groups, tiles_m, tiles_n, flat = grid(bm, bn, splits)
        tiles = groups * tiles_m * _round_up(tiles_n, parts) * splits
        streams_once = weight_streams_once(loops, tiles_m, flat)
        k_iters = math.ceil(k_iters_all / splits)
        tiles_per_sm = math.ceil(tiles / arch.sms)
        busy = min(tiles, arch.sms)
        # wgmma efficiency: shared-memory bytes per FLOP fall as N grows; one consumer warpgroup
        # leaves the tensor cores idle while it waits on its own barriers and epilogue.
        eff = wgmma_eff(bn) * (1.0 if cons == 2 else 0.8)
        math_us = bm * bn * k_iters * BLOCK_K * 2 / (arch.wgmma_flops_per_sm_clk * clk * eff)
        a_rows = a_box_rows(m_inner, bm) if follow else bm  # the box's rows: what TMA delivers
        stage = (a_rows // parts + bn) * BLOCK_K * elem  # what an SM reads through L2 a stage
        load_us = k_iters * tma_latency_us / a["stages"]  # `stages` loads in flight, each ~latency
        l2_share = arch.dram_gbps * 2.5 * 1e3 / busy  # bytes/µs of L2 bandwidth one busy SM gets
        l2_us = k_iters * stage / l2_share
        epi_us = bm * bn * c_elem / (arch.dram_gbps * 1e3 / busy)
        # One block an SM runs its epilogue after its main loop (only the producer's prefetch overlaps);
        # with two, the other block's main loop fills that time. Two blocks share the SM's tensor cores
        # and its L2 share, so their math and loads still add up per SM.
        load_us *= ctas
        exposed_epi = epi_us if ctas == 1 else 0.1 * epi_us
        tile_us = max(math_us, load_us, l2_us) + exposed_epi
        # A split's reduction runs after the whole K slice has streamed: nothing overlaps it.
        reduce_us = CLUSTER_REDUCE_US + bm * bn * 4 / (DSMEM_BYTES_PER_CLK * clk) if splits > 1 else 0.0
        # Without L2 promotion the weight reads from DRAM faster where it streams once (one tile row) beside
        # an A box of at most 64 rows (the gain counted at 9..64 rows, unsplit); elsewhere it runs slower
        # (L2_PROMOTIONS).
        stream_us, reread = dram_us, 1.0
        if a["l2_promotion"] == "none":
            if tiles_m == 1 and a_rows <= STREAM_A_ROWS[1]:
                if splits == 1 and a_rows >= STREAM_A_ROWS[0]:
                    stream_us *= STREAM_NO_PROMOTION
            else:
                reread = REUSE_NO_PROMOTION
        # Where the weight streams once (one tile row, no tile group reading it again), each SM reads it at most
        # `stages` boxes a round trip a block: a GPU the tiles leave half empty streams at about half the rate. The
        # round trip lengthens from the idle one as more SMs stream, to STREAM_LATENCY_US from half of them on.
        if parts > 1:  # A through a multicast cluster streams no faster than measured (MULTICAST_STREAM_GBPS)
            stream_us = max(stream_us, a_bytes / (MULTICAST_STREAM_GBPS * 1e3))
        if streams_once:
            trip_us = tma_latency_us + (STREAM_LATENCY_US - tma_latency_us) * min(1.0, 2 * busy / arch.sms)
            stream_us = max(stream_us, tiles_per_sm * k_iters * trip_us / (a["stages"] * ctas))
        if splits > 1 and a["acc_chains"] == 2:  # the slice's wgmmas in two chains (ACC_CHAINS)
            reduce_us -= ACC_CHAINS_SPLIT_US
        if parts > 1:  # measured slower than the model had it (MULTICAST_FIXED_US)
            reduce_us += MULTICAST_FIXED_US
        # The small terms break ties (memory-bound problems, where the DRAM time is the same for every
        # tiling) towards tiles that keep more warps busy and towards deeper pipelines: two consumer warpgroups
        # measured much faster than one on a memory-bound conv (32x64x56x56).
        return (reread * max(tiles_per_sm * tile_us, stream_us) + reduce_us + LAUNCH_US
                + 0.05 * tiles_per_sm * (tile_us + math_us) + 0.01 * tiles_per_sm * load_us)

    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The tiling graph and the cost model, once the gates allow the problem."""
    return gated_problem(NAME, views, arch, gates, build_tiling_graph, _cost, _plan)


def _with_box_rows(t: TmaOperand, rows: int) -> TmaOperand:
    """K-major A with its tiled m dim's box cut to `rows`."""
    dims = tuple(TmaDim(d.label, d.size, d.stride_bytes, rows, d.index) if d.index == "mn" else d for d in t.dims)
    return TmaOperand(t.operand, t.major, dims, t.boxes_per_stage, t.stage_bytes, t.runtime_align)


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> HopperPlan:
    bm, bn, cons = a["block_m"], a["block_n"], a["consumers"]
    ta, tb = tma_operand(views, "A", bm), tma_operand(views, "B", bn)
    assert not isinstance(ta, str) and not isinstance(tb, str), "gates checked both"
    c_unit, c_vec, c_align = c_vector(views)
    loops, kloops = tile_loops(views), k_loops(views)
    inner = {r: _inner(views, r) for r in ("m", "n", "k")}
    size = {r: s.size if s else 1 for r, s in inner.items()}
    groups, tiles_m, tiles_n, flat = tile_grid(views)(bm, bn, a["k_splits"])
    threads = 128 * (cons + 1)
    regs = consumer_regs(cons, a["ctas_per_sm"])
    elem = views.operands["A"].elem_bytes
    notes = []
    if size["k"] % BLOCK_K:
        notes.append(f"k segment {inner['k'].label if inner['k'] else '-'} is not a multiple of {BLOCK_K}: "
                     "TMA zero-fills the last k-tile past its end")
    follow = ta.major == "k"
    run_time = views.spec.run_time_letter
    box_rows = 0
    if flat:  # a 64-row box a block: each block has its own m-loop coordinates
        ta = replace(_with_box_rows(ta, BOX_MN), boxes_per_stage=bm // BOX_MN)
        follow = False  # every block is whole (the segment is a multiple of 64 rows): no box to cut
    elif follow and not (run_time and run_time[1] < run_time[2]):  # with rows at run time the launcher cuts it
        box_rows = a_box_rows(size["m"], bm)
        ta = _with_box_rows(ta, box_rows)
    if a["a_multicast"] > 1:  # each block of the cluster loads a part of the box's rows
        ta = _with_box_rows(ta, bm // a["a_multicast"])
    k_iters = problem_k_iters(views)
    splits = a["k_splits"]
    packed = packed_store(views) and splits == 1
    plan = HopperPlan(
        block_m=bm, block_n=bn, block_k=BLOCK_K, consumers=cons, ctas_per_sm=a["ctas_per_sm"], wg_m=bm // cons,
        stages=a["stages"],
        raster_group=RASTER_GROUP, a=ta, b=tb, tile_loops=loops, k_loops=kloops,
        m_inner=size["m"], n_inner=size["n"], k_inner=size["k"],
        m_inner_label=inner["m"].label if inner["m"] else "-", n_inner_label=inner["n"].label if inner["n"] else "-",
        k_inner_label=inner["k"].label if inner["k"] else "-",
        c_unit=c_unit, c_vec=c_vec, c_runtime_align=c_align, c_operand=views.spec.output.name,
        ep_vectors=epilogue_vectors(views, c_unit, c_vec),
        tiles_m=tiles_m, tiles_n=tiles_n, tile_groups=groups, tiles=groups * tiles_m * tiles_n,
        k_iters=k_iters,
        threads=threads, consumer_regs=regs, epi_bytes=epi_bytes(c_unit, packed) if splits == 1 else 0,
        smem_bytes=smem_bytes(a, c_unit, elem, packed), decisions=decisions, feasible=feasible,
        cost_us=cost_us, notes=tuple(notes), assignment=dict(a),
        k_splits=splits, kt_per_split=k_split_slices(k_iters, splits)[0],
        red_pitch=red_pitch(a, c_unit) if splits > 1 else 0,
        a_rows_follow_m=follow, a_box_rows=box_rows, packed_store=packed, flat_rows=flat,
        l2_promotion=a["l2_promotion"], a_multicast=a["a_multicast"], acc_chains=a["acc_chains"],
    )
    if plan.tiles > 2**31 - 1:
        raise grid_too_large(views, plan.tiles, "output tiles")
    return plan


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (HopperPlan,), "dgemm_cli.renderers.hopper")
