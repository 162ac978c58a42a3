"""Kernel family `gemv`: products with a handful of rows (M <= 4, single-token decode) on the CUDA cores,
streaming B straight from memory into registers (pure).

With M <= 4 a product reads every byte of B once and does at most 4 FMAs per element of it: the
memory system bounds it, and shared-memory staging or tensor-core fragments only add latency. Each
block stages its K slice of A in shared memory once (16-byte vectors where A's view and pointer allow:
one round trip, where element loads take several), then its warps stream B with 16-byte vector
loads, several in flight per thread, and multiply-add in f32:
  - lanes along k when B is k-contiguous (nn.Linear's [N, K] weights) or has no contiguous dim: each
    warp walks a few columns at a time over the K slice and sums its lanes with shuffles;
  - lanes along n when B is n-contiguous ([K, N] weights): each lane owns a chunk of columns and the
    warps of a block split the K slice, summed through shared memory.
K may also be split over the blocks of a thread-block cluster, reduced in rank order through DSMEM
(templates/dg/reduce.cuh, as in the `splitk` family): bit-identical run to run, no workspace.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import INT32_MAX, ProblemViews

NAME = "gemv"
SUMMARY = "M <= 4 rows on the CUDA cores: B streamed with 16-byte loads into registers, K split over a cluster"
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): the rows are register
# arrays sized at compile time (acc[M][...]); it serves exact-size buckets.
RUNTIME_ROWS = False
# Rows: beyond this the FMAs (and conversions) per byte of B outgrow what the CUDA cores hide behind
# memory (8 rows measured about twice the tensor-core families' time on the H200).
MAX_M = 4
SPLITS = (1, 2, 4, 8, 16)
RED_PAD = 4  # floats of padding per row of a partial tile
MAX_LIVE_REGS = 80  # loaded B words + accumulators a thread: the rest of 128 holds A's chunk, addresses, loop state
# Cost model constants (µs), only to rank candidates and families. Set a priori, then checked against
# the level-1 tunes of the decode benchmarks.
# fitted: tools/fit_calibration.py, table families/calibration.csv
LAUNCH_US = 1.5  # as the hopper family: gemv and hopper measure the same start
MEMORY_LATENCY_US = 1.0  # an idle DRAM round trip (start-up)
LOADED_LATENCY_US = 2.0  # a round trip under full load: what the bytes in flight must cover (Little's law)
REDUCE_US = 0.4  # cluster barriers and the DSMEM sum (splits > 1)
# The share of DRAM bandwidth the register pipeline streams at, against the hopper family's TMA pipeline
# (whose estimate takes the whole): with A staged in 16-byte vectors gemv measured a few percent faster than
# hopper at M = 1 on the H200.
# fitted: tools/fit_calibration.py, table families/calibration.csv
STREAM_SHARE = 1.05
# Lanes along n (B n-contiguous, [K, N] weights) are untimed with the vector staging: they keep the share
# measured with A staged element by element.
STREAM_SHARE_LANES_N = 0.96
# ...for one column a warp; each doubling of a warp's columns streams less (two columns measured slower; wider
# untimed).
# fitted: tools/fit_calibration.py, table families/calibration.csv
COLS_SHARE = 0.975
# ...and for 128-thread blocks; 256-thread ones with the same columns a warp measured 0.7% slower.
# fitted: tools/fit_calibration.py, table families/calibration.csv
THREADS_SHARE = 0.993
# Staging A: one round trip (L2) a batch of 4 loads a thread, batches in sequence, a wave of blocks after another
# (fitted to element against 16-byte staging on the H200).
STAGE_TRIP_US = 0.28
STAGE_BATCH = 4  # loads a thread issues before it stores (dg/gemv.cuh, A_BATCH)
# What a byte of A re-read from L2 (every column tile stages its slice) costs against a byte of B from DRAM:
# little beside the stream (4-column blocks, twice the stagings of 8-column ones, measured slightly faster).
A_L2_SHARE = 0.03
# Share of the FMA peak a loop of loads, conversions and FMAs reaches: fitted to the time each row past the first
# adds on the H200, so that two rows at N = 14336 price gemv behind hopper, as measured.
FMA_ISSUE = 0.19
# Launch-bound terms, counted only where the loads in flight hold all of B (one round trip: nothing streams
# beside the fixed work to hide it). Fitted to the gemv candidates timed at [1,4096]x[4096,128] and
# [1,2048]x[2048,512] on the H200:
#  - a block's barriers (A staged, the cluster's two) wait for its slowest warp: larger blocks run slower;
#  - past 2 blocks an SM, each block's fixed work (staging, barriers, the cluster reduction) adds up;
#  - fewer than 8 warps an SM leave the serial phases (staging, shuffles, barriers) exposed.
BARRIER_US = 0.35  # per doubling of a block's warps past 4
BLOCK_US = 0.4  # per block an SM holds past 2
WARPS_TO_OVERLAP = 8
WARP_SHORT_US = 0.08  # per warp an SM holds fewer than WARPS_TO_OVERLAP


@dataclass(frozen=True)
class GemvPlan:
    family = NAME
    lanes_along: str  # "k" or "n": the role consecutive lanes (and each lane's chunk) follow in B
    chunk: int  # elements of B a lane handles at a time (a 16-byte vector when B allows it)
    chunk_promised: int  # elements per load when B's pointer fails the 16-byte check (run-time fallback)
    threads: int
    block_n: int  # columns of C per block
    cols: int  # lanes along k: columns a warp streams at once
    unroll: int  # chunks along k in flight per column (lanes along k) or k rows in flight (lanes along n)
    splits: int  # blocks of a cluster that split K
    k_slice: int  # elements of K per block (a multiple of `chunk`)
    tiles_n: int
    blocks: int
    red_pitch: int
    partial_offset: int  # bytes: A's K slice comes first in shared memory, the partial sums after it
    a_vec: int  # elements of A a staging load takes when A's pointer is 16-byte aligned (1: element loads only)
    a_check: int  # bytes A's view pointer must be aligned to for them; 0 when the spec promises it
    smem_bytes: int
    elem_bytes: int
    index_type: str
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)
    # A programmatic dependent launch (the kernel waits for its predecessor first): where the arch has it (sm_90+;
    # an unsplit gemv also runs on sm_80..89, whose ptxas refuses griddepcontrol).
    dependent_launch: bool = False

    @property
    def arch_features(self) -> frozenset[str]:
        """A K split runs over a thread-block cluster; the dependent launch needs griddepcontrol; one block
        launched plainly runs anywhere."""
        return frozenset({"clusters"} if self.splits > 1 else set()) | (
            frozenset({"griddepcontrol"}) if self.dependent_launch else frozenset())

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def warps_n(self) -> int:
        """Lanes along n: warps side by side over the block's columns (the rest split the K slice)."""
        return self.block_n // (32 * self.chunk) if self.lanes_along == "n" else 1

    @property
    def partial_slices(self) -> int:
        return partial_slices(self.lanes_along, self.threads, self.block_n, self.chunk)

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing the launcher cannot handle itself: it checks B and picks the load width."""
        return {}

    @property
    def b_check(self) -> int:
        """Bytes B's view pointer must be aligned to for the wide loads; 0 when the spec promises them."""
        return self.chunk * self.elem_bytes if self.chunk > self.chunk_promised else 0

    @property
    def summary(self) -> str:
        lanes = (f"lanes along k, {self.cols} column(s) a warp" if self.lanes_along == "k"
                 else f"lanes along n, {self.warps // self.warps_n} warp(s) split the K slice")
        return (f"FMA GEMV, {self.threads} threads, {self.block_n} columns a block, {lanes}, "
                f"{self.chunk}-element chunks x{self.unroll} in flight, K split {self.splits} way(s)"
                f"{' over a cluster' if self.splits > 1 else ''} ({self.k_slice} a block), {self.smem_bytes} B smem, "
                f"{self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        out = [f"=> {self.blocks} blocks = {self.blocks // self.splits} column tiles x {self.splits} K slice(s) of "
               f"{self.k_slice}; {self.threads} threads; {self.smem_bytes} B shared memory (A's slice, partial sums)"]
        if self.a_vec > 1:
            out.append(f"A: its K slice staged in {self.a_vec}-element vectors"
                       + (f" when its view pointer is {self.a_check}-byte aligned, else element by element (checked "
                          "in the kernel)" if self.a_check else ""))
        if self.b_check:
            out.append(f"B: {self.chunk}-element loads when its view pointer is {self.b_check}-byte aligned, else "
                       f"{self.chunk_promised}-element loads (checked at run time)")
        if self.splits > 1:
            out.append(f"reduction: cluster of {self.splits}; block r sums its share of the tile over ranks "
                       f"0..{self.splits - 1} in order (bit-identical run to run)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "decisions": [x.to_dict() for x in self.decisions]}


def lanes_along(views: ProblemViews) -> tuple[str, int, int]:
    """(role lanes follow, elements per chunk, elements per load as promised) from B's view."""
    b = views.operands["B"]
    if b.unit_role in ("k", "n") and views.roles[b.unit_role].size > 1:
        return b.unit_role, b.vector_elems_aligned, b.vector_elems
    return "k", 1, 1  # no contiguous k or n: element loads, lanes along k


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    if views.m > MAX_M:
        return [("few rows", f"M = {views.m} rows: more than the {MAX_M} the CUDA cores keep up with at memory speed")]
    orient, chunk, _ = lanes_along(views)
    least = live_regs(views, orient, chunk, unroll=1, cols=1)
    if least > MAX_LIVE_REGS:
        return [("register budget", f"{least} live values a thread at the least (M = {views.m} rows x {chunk}-element "
                                    f"chunks along n) exceed {MAX_LIVE_REGS}")]
    most = max(SPLITS) if arch.cc >= (9, 0) else 1
    if partial_offset(views, most, chunk) + views.m * (4 + RED_PAD) * 4 > arch.smem_per_block:
        return [("A's K slice in shared memory", f"{views.m} x {_k_slice(views.k, most, chunk)} elements of A a block "
                                                 f"(K = {views.k} over at most {most} blocks) exceed shared memory")]
    return []


def live_regs(views: ProblemViews, orient: str, chunk: int, unroll: int, cols: int) -> int:
    """Registers a thread keeps live across the loop: two rounds of loaded B words and the accumulators."""
    loaded = 2 * unroll * cols * math.ceil(chunk * views.operands["B"].elem_bytes / 4)
    return loaded + views.m * cols * (chunk if orient == "n" else 1)


def a_vectors(views: ProblemViews, k_slice: int) -> tuple[int, int]:
    """(elements a load of A's staging takes if its pointer is 16-byte aligned, as promised): vectors along k when
    A is k-contiguous and a K slice is whole vectors (each row of the staged slice starts 16-byte aligned)."""
    a = views.operands["A"]
    if a.unit_role != "k" or k_slice % a.vector_elems_aligned:
        return 1, 1
    return a.vector_elems_aligned, a.vector_elems


def _k_slice(k: int, splits: int, chunk: int) -> int:
    return math.ceil(math.ceil(k / splits) / chunk) * chunk


def partial_offset(views: ProblemViews, splits: int, chunk: int) -> int:
    """Bytes of A's K slice in shared memory, rounded up to 16: where the partial sums start."""
    xs = views.m * _k_slice(views.k, splits, chunk) * views.operands["A"].elem_bytes
    return -(-xs // 16) * 16


def partial_slices(orient: str, threads: int, block_n: int, chunk: int) -> int:
    """Partial tiles in shared memory: one per warp row that splits the K slice (lanes along n), else one."""
    return (threads // 32) // (block_n // (32 * chunk)) if orient == "n" else 1


def smem_bytes(views: ProblemViews, a: Assignment, orient: str, chunk: int) -> int:
    slices = partial_slices(orient, a["threads"], a["block_n"], chunk)
    return partial_offset(views, a["splits"], chunk) + slices * views.m * (a["block_n"] + RED_PAD) * 4


def build_tiling_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    orient, chunk, _ = lanes_along(views)
    g = ConstraintGraph()
    g.node("threads", (128, 256), "threads per block")
    if orient == "k":
        g.node("block_n", (4, 8, 16, 32, 64), "columns of C per block (warps x columns a warp)")
        g.node("cols", (1, 2, 4, 8), "columns of each warp (lanes along k)")
    else:
        g.node("block_n", tuple(32 * chunk * w for w in (1, 2, 4)), "columns of C per block (32 lanes x chunk x warps)")
        g.node("cols", (1,), "columns a lane streams at once: its chunk (lanes along n)")
    g.node("unroll", (1, 2, 4), "chunks a round per column and thread (two rounds in flight)")
    clusters = arch.cc >= (9, 0)
    g.node("splits", SPLITS if clusters else (1,),
           "blocks of a cluster that split K" if clusters else f"K splits ({arch.name} has no clusters: 1)")

    if orient == "k":
        g.constrain("columns per warp", "problem", ["threads", "block_n", "cols"],
                    lambda a: None if a["block_n"] == a["threads"] // 32 * a["cols"]
                    else f"{a['block_n']} columns are not {a['threads'] // 32} warps x {a['cols']}",
                    "each warp streams its own columns over the whole K slice (one pipeline, no restart)")
    else:
        g.constrain("warps along n", "problem", ["threads", "block_n"],
                    lambda a: None if (a["threads"] // 32) % (a["block_n"] // (32 * chunk)) == 0
                    else f"{a['block_n'] // (32 * chunk)} warps along n do not divide {a['threads'] // 32}")

    def regs(a: Assignment) -> str | None:
        live = live_regs(views, orient, chunk, a["unroll"], a["cols"])
        return None if live <= MAX_LIVE_REGS else f"{live} loaded words + accumulators a thread"
    g.constrain("register budget", "arch", ["cols", "unroll"], regs,
                "loads in flight and accumulators stay in registers")

    def every_split_works(a: Assignment) -> str | None:
        ks = _k_slice(views.k, a["splits"], chunk)
        if (a["splits"] - 1) * ks < views.k:
            return None
        return f"K = {views.k} leaves the last of {a['splits']} slices empty"
    g.constrain("k slices", "problem", ["splits"], every_split_works, "each block of the cluster owns some of K")
    if orient == "k":
        step = 32 * chunk

        # Two 16-byte chunks a lane: shorter slices, down to one chunk a lane, measured markedly slower at the
        # launch-bound shapes. Element loads keep one warp-wide step.
        rounds = 2 if chunk > 1 else 1

        def lanes_busy(a: Assignment) -> str | None:
            ks = _k_slice(views.k, a["splits"], chunk)
            if ks >= min(rounds * step, views.k):
                return None
            return f"a K slice of {ks} gives a lane fewer than {rounds} chunk(s) of the {step}-element warp step"
        g.constrain("lanes busy", "problem", ["splits"], lanes_busy,
                    "a K slice gives every lane two 16-byte chunks (one element a lane for element loads)")

    def smem_ok(a: Assignment) -> str | None:
        need = smem_bytes(views, a, orient, chunk)
        return None if need <= arch.smem_per_block else f"{need} B > {arch.smem_per_block} B per block"
    g.constrain("shared memory", "arch", ["threads", "block_n", "splits"], smem_ok,
                "A's K slice and the partial sums live in shared memory")

    def grid_ok(a: Assignment) -> str | None:
        blocks = views.batch * math.ceil(views.n / a["block_n"]) * a["splits"]
        return None if blocks <= INT32_MAX else f"{blocks} blocks exceed one launch's grid"
    g.constrain("grid size", "arch", ["block_n", "splits"], grid_ok)
    return g


def _cost(views: ProblemViews, arch: Arch):
    """Estimated µs, only to rank candidates: B's bytes at the bandwidth the loads in flight sustain
    (Little's law, capped by DRAM), or the FMAs, plus staging A, the reduction and the launch."""
    orient, chunk, _ = lanes_along(views)
    elem = views.operands["B"].elem_bytes
    m, n, k, batch = views.m, views.n, views.k, views.batch
    dram = arch.dram_gbps * 1e3  # bytes per µs
    fma_rate = arch.fma_flops_per_sm_clk / 2 * arch.clock_ghz * 1e3 * FMA_ISSUE  # FMAs per µs and SM

    def cost(a: Assignment) -> float:
        threads, bn, splits = a["threads"], a["block_n"], a["splits"]
        tiles_n = math.ceil(n / bn)
        blocks = batch * tiles_n * splits
        smem = smem_bytes(views, a, orient, chunk)
        resident = max(1, min(arch.smem_per_sm // smem, arch.max_threads_per_sm // threads, arch.max_blocks_per_sm))
        concurrent = min(blocks, arch.sms * resident)
        loads = 2 * a["unroll"] * a["cols"] * chunk * elem  # bytes a thread has in flight (two rounds)
        in_flight = concurrent * threads * loads
        b_bytes = batch * tiles_n * bn * k * elem
        a_bytes = batch * m * k * views.operands["A"].elem_bytes * tiles_n  # from L2 after the first
        busy = min(blocks, arch.sms)
        # An SM pulls about its share of DRAM bandwidth: idle SMs leave theirs unused. The first round trip is
        # MEMORY_LATENCY_US below; each further round the loads in flight need adds a loaded round trip.
        share = ((STREAM_SHARE if orient == "k" else STREAM_SHARE_LANES_N) * COLS_SHARE ** math.log2(a["cols"])
                 * THREADS_SHARE ** math.log2(threads / 128))
        streamed = b_bytes + A_L2_SHARE * a_bytes
        rounds_after_first = max(0.0, streamed / in_flight - 1.0)
        mem_us = max(streamed / (share * dram * busy / arch.sms), rounds_after_first * LOADED_LATENCY_US)
        math_us = batch * m * tiles_n * bn * k * (1 + 1 / m) / (fma_rate * busy)  # + one conversion per B element
        k_slice = _k_slice(k, splits, chunk)
        per_load = a_vectors(views, k_slice)[0]  # 16-byte staging where A's pointer allows it (the measured case)
        batches = math.ceil(m * k_slice / (per_load * threads * STAGE_BATCH))
        stage_us = STAGE_TRIP_US * batches * math.ceil(blocks / (arch.sms * resident))
        reduce_us = REDUCE_US if splits > 1 else 0.0
        warps_per_sm = blocks * threads / 32 / arch.sms
        fixed_us = (BARRIER_US * math.log2(threads / 128) + BLOCK_US * max(0.0, blocks / arch.sms - 2)
                    + WARP_SHORT_US * max(0.0, WARPS_TO_OVERLAP - warps_per_sm)) if b_bytes <= in_flight else 0.0
        # Ties (all of B in flight either way) go to more chunks in flight a thread: the measured configurations.
        tie_us = 0.02 / a["unroll"]
        return max(mem_us, math_us) + stage_us + reduce_us + LAUNCH_US + MEMORY_LATENCY_US + fixed_us + tie_us

    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    return gated_problem(NAME, views, arch, gates, build_tiling_graph, _cost, functools.partial(_plan, arch=arch))


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float, *, arch: Arch) -> GemvPlan:
    orient, chunk, promised = lanes_along(views)
    tiles_n = math.ceil(views.n / a["block_n"])
    k_slice = _k_slice(views.k, a["splits"], chunk)
    a_vec, a_vec_promised = a_vectors(views, k_slice)
    a_check = a_vec * views.operands["A"].elem_bytes if a_vec > a_vec_promised else 0
    return GemvPlan(
        lanes_along=orient, chunk=chunk, chunk_promised=promised, threads=a["threads"], block_n=a["block_n"],
        cols=a["cols"], unroll=a["unroll"], splits=a["splits"], k_slice=k_slice,
        tiles_n=tiles_n, blocks=views.batch * tiles_n * a["splits"], red_pitch=a["block_n"] + RED_PAD,
        partial_offset=partial_offset(views, a["splits"], chunk), a_vec=a_vec, a_check=a_check,
        smem_bytes=smem_bytes(views, a, orient, chunk), elem_bytes=views.operands["B"].elem_bytes,
        index_type="long long" if views.needs_int64 else "int",
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
        dependent_launch=arch.grid_dependency,
    )



FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (GemvPlan,), "dgemm_cli.families.gemv.render",
                      formal="dgemm_cli.families.gemv.index")
