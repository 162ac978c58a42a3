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

Modules: views.py reads the views (what TMA can load, the store phase, the tile grid), graph.py is the tiling graph
(its domains, constraints and the shared-memory and register arithmetic), cost.py prices a tiling and render.py
renders a plan; this module holds the plan, the gates and the plan maker, and re-exports their names. The gates
list what TMA cannot take; those problems go to another family and `explain` says which gate failed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.hopper.cost import (  # noqa: F401 (re-exported: tests and tools read them here)
    ACC_CHAINS_SPLIT_US,
    CLUSTER_REDUCE_US,
    DSMEM_BYTES_PER_CLK,
    L2_SHARE_MULTI_WAVE,
    L2_SHARE_ONE_WAVE,
    LAUNCH_US,
    MULTICAST_FIXED_US,
    MULTICAST_STREAM_GBPS,
    REUSE_NO_PROMOTION,
    STREAM_A_ROWS,
    STREAM_LATENCY_US,
    STREAM_NO_PROMOTION,
    WGMMA_EFF,
    cost_model,
    wgmma_eff,
)
from dgemm_cli.families.hopper.graph import (  # noqa: F401 (re-exported: renderers and tests import them from here)
    A_MULTICAST,
    ACC_CHAINS,
    BLOCK_N,
    CONSUMER_OVERHEAD_REGS,
    DEEP_STAGES,
    K_SPLITS,
    L2_PROMOTIONS,
    MAX_ACC_REGS,
    NARROW_N,
    PRODUCER_REGS,
    RED_PAD,
    SMEM_ALIGN,
    SMEM_RESERVED_PER_BLOCK,
    STAGES,
    build_tiling_graph,
    consumer_regs,
    entry_regs,
    k_split_slices,
    red_pitch,
    smem_bytes,
)
from dgemm_cli.families.hopper.views import (  # noqa: F401 (re-exported: renderers and tests import them from here)
    BLOCK_K,
    BOX_MN,
    EPI_COL_PITCH,
    EPI_COLS,
    EPI_ROW_PITCH,
    PACK_BYTES,
    PACK_COLS,
    PACK_MIN_VEC,
    PACK_PAD,
    PACK_PITCH,
    SWIZZLE_ROWS,
    TMA_BASE_ALIGN,
    TMA_MAX_DIM,
    TMA_MAX_RANK,
    TMA_MAX_STRIDE,
    TMA_STRIDE_ALIGN,
    LoopSegment,
    TmaDim,
    TmaOperand,
    _inner,
    _inner_is_run_time,
    _round_up,
    _size,
    _with_box_rows,
    a_box_rows,
    a_rows_follow_m,
    block_k,
    c_vector,
    epi_bytes,
    epi_cols,
    epilogue_vectors,
    flat_rows,
    k_loops,
    pack_cols,
    packed_store,
    problem_k_iters,
    tile_grid,
    tile_loops,
    tma_operand,
    weight_streams_once,
)
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import ProblemViews, grid_too_large

NAME = "hopper"
SUMMARY = "TMA + wgmma, warp-specialized producer/consumers, persistent grid (sm_90a, f16/bf16)"
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): yes when the letter is
# the tiled m segment (the kernel takes M_INNER as an argument and encodes A's tensor map for it); gated below
# when it is an outer m segment (a tile loop).
RUNTIME_ROWS = True

RASTER_GROUP = 8  # tile rows (along the larger tile count) walked together for L2 reuse


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
        return f"a persistent grid of min({self.tiles}, {self.ctas_per_sm} x SMs) blocks"

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
        """The plan's facts below its decisions, as `explain` prints them and the .cu's header comment states them:
        the grid, the tensor maps, the loops, the loads, C's stores."""
        out = [f"=> {self.threads} threads (setmaxnreg: producer {PRODUCER_REGS}, consumers {self.consumer_regs} "
               f"registers), {self.smem_bytes} B shared memory, {self.tiles} tiles ({self.tile_groups} x "
               f"{self.tiles_m} x {self.tiles_n}) on {self.grid_desc}, {self.k_iters} k-iterations a tile"]
        for t in (self.a, self.b):
            dims = ", ".join(f"{d.label} (size {d.size}" + (f", {d.stride_bytes} B" if d.stride_bytes else ", dense")
                             + f", box {d.box})" for d in t.dims)
            out.append(f"{t.operand}: {t.major}-major TMA, {len(t.dims)}-d tensor map [{dims}] (innermost first)")
        if self.tile_loops:
            per_block = "; the m loops' per 64-row block" if self.flat_rows else ""
            out.append(f"tile loops (not tiled, one index per tile{per_block}): "
                       + ", ".join(x.label for x in self.tile_loops))
        if self.k_loops:
            out.append("k loops (outer k segments, one index per k-iteration): "
                       + ", ".join(x.label for x in self.k_loops))
        out.extend(line for line in (self.flat_rows_line(), self.a_box_line(), self.load_order_line()) if line)
        staged = (f"staged through {self.epi_bytes} B of shared memory per consumer warpgroup" if self.k_splits == 1
                  else "summed from the cluster's partial tiles")
        out.append(f"{self.c_operand}: {self.c_vec}-element vector stores along "
                   f"{self.c_unit or 'nothing (scalar stores)'}, {staged}")
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


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The tiling graph and the cost model, once the gates allow the problem."""
    return gated_problem(NAME, views, arch, gates, build_tiling_graph, cost_model, make_plan)


def make_plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
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
    bk = block_k(elem)
    if size["k"] % bk:
        notes.append(f"k segment {inner['k'].label if inner['k'] else '-'} is not a multiple of {bk}: "
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
        block_m=bm, block_n=bn, block_k=bk, consumers=cons, ctas_per_sm=a["ctas_per_sm"], wg_m=bm // cons,
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


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (HopperPlan,), "dgemm_cli.families.hopper.render",
                      formal="dgemm_cli.families.hopper.index")
