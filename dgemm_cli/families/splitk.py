"""Kernel family `splitk`: small-M (decode) products as split-K over a thread-block cluster (pure).

With M = 1..64 rows a product is bound by reading B (the weight) once, and by how many SMs get
work: N = 128 makes 8 square tiles for 132 SMs. This family runs the `cta` family's block tiles
(mma.sync or FFMA over cp.async / gather stages, the same loaders and views) with tile shapes for
few rows and deep pipelines, and splits K over the blocks of one cluster: each block of the
cluster streams its slice of K, parks its partial tile in shared memory, and after a cluster
barrier every block sums a share of the tile over all blocks' shared memory (DSMEM) in rank order
and writes C. The sum runs in the same order on every launch, so results are bit-identical from
run to run; there is no workspace, no atomics and no state between launches.

Groups. One cluster holds at most 16 blocks, so a product whose output tiles are few (a full reduction,
`ab,ab->`, has one element) would stream all of K through 16 SMs. The `groups` node spreads K over
several clusters: each cluster reduces its own K range to a partial tile as above, parks it in a scratch
buffer the launcher takes with cudaMallocAsync on the caller's stream, and a second small kernel adds
the GROUPS partials of every element in group order and runs the epilogue (store_c). The final sum's
order is fixed, so the result stays bit-identical run to run; the C API does not change (the scratch is
stream-ordered: graph capture records it as allocation nodes).

Block shape `dot`. With M = N = 1 (C one element a batch index) an output tile wastes all but one of
its rows and columns: the FFMA tile's one useful thread walks its K slice serially. Such problems get a
block along K instead: every thread sums 16-byte chunks of both inputs into a few accumulators, the
block adds them in a fixed tree, and `groups` blocks (no cluster) split K for each output, their sums
meeting in the scratch buffer as above.

Clusters exist from sm_90 on; on older archs the family is gated out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families import cta
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated
from dgemm_cli.views import INT32_MAX, ProblemViews, grid_too_large

NAME = "splitk"
SUMMARY = ("small-M split-K: cta tiles for few rows, K split over a thread-block cluster (DSMEM reduction) and "
           "over several clusters when tiles are few; M = N = 1 as blocks along K; deterministic (sm_90+)")
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): its block tile is the
# cta family's: M enters only bounds checks and the tile count.
RUNTIME_ROWS = True
MAX_M = 64  # rows of C one block tile holds; beyond it the tiled families' square tiles pay
SPLITS = (2, 4, 8, 16)  # blocks of a cluster that share one output tile; 16 is a non-portable cluster
GROUPS = (1, 2, 4, 8, 16)  # clusters that share one output tile through the scratch buffer
RED_PAD = 4  # floats of padding per row of the partial tile in shared memory
TILE_DOMAINS = {
    "block_m": (16, 32, 64),
    "block_n": (16, 32, 64, 128),
    "block_k": (32, 64, 128),
    "stages": (2, 3, 4, 6, 8),
}
# Cost model constants (µs), only to rank candidates and families. Set a priori, checked against level-1
# tunes of the decode benchmarks on the H200.
LAUNCH_US = 2.0  # every launch: start-up, the first load's round trip, the last store
MEMORY_LATENCY_US = 1.0  # DRAM round trip that bytes in flight must cover (Little's law)
REDUCE_US = 0.4  # cluster barriers and the DSMEM sum of one tile
WARPS_TO_HIDE_LATENCY = 8  # resident warps an SM needs before the memory pipe stays busy
ISSUE_CLOCKS = 8  # clocks a thread spends issuing one 16-byte copy (address math included)
# Groups (set a priori, to be measured): the second kernel (launched as a programmatic dependent launch, it
# waits for the first grid and one L2 round trip for the partials), and the stream-ordered alloc and free.
GROUPS_US = 2.0

# Block shape `dot` (M = N = 1).
DOT_THREADS = (128, 256, 512)
DOT_UNROLL = (1, 2, 4, 8)  # chunks of each input in flight a thread
DOT_GROUPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # blocks (K slices) of one output
DOT_BASE_REGISTERS = 32  # registers of a dot thread besides its loaded chunks (the estimate stays within about
# 16 of what ptxas 13.0 allocates on sm_90a at unroll 8)
FULL_REGISTER_FILE = 255  # registers a thread may hold at most
DOT_REDUCE_US = 0.2  # the block's shuffle tree and the warps' sums
# DRAM latency a stream sees when it keeps DRAM busy (about twice the idle round trip, MEMORY_LATENCY_US): the
# bytes in flight a dot block keeps must cover it (Little's law); set a priori, to be measured.
DOT_LOADED_LATENCY_US = 2.0
FINISH_THREADS_MAX = 256  # threads of the dot's second kernel


@dataclass(frozen=True)
class SplitKPlan:
    family = NAME
    tile: cta.TilePlan  # the block tile, loaders and main loop (rendered by the cta templates)
    splits: int  # blocks of a cluster, each one slice of K
    k_tiles: int  # k-tiles of the whole K
    k_tiles_per_split: int
    blocks: int  # grid size: tiles * groups * splits
    red_pitch: int  # floats per row of the partial tile
    smem_bytes: int  # max of the pipeline's stages and the partial tile
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)
    groups: int = 1  # clusters of one output tile, their partial tiles summed by a second kernel
    tile_elems: int = 0  # floats of one group's partial tile in the scratch buffer: min(BM, M) x min(BN, N)
    at_once: int = 0  # blocks the GPU holds at once in clusters of `splits` (Arch.resident_blocks); 0: not planned

    arch_features = frozenset({"clusters", "griddepcontrol"})  # the K split's cluster; the reduce's dependent launch
    shape = "tile"

    @property
    def threads(self) -> int:
        return self.tile.threads

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing beyond the promise: the loaders check their own pointers (as in the cta family)."""
        return {}

    @property
    def scratch_bytes(self) -> int:
        """The scratch buffer of a call (0 with one group): a partial tile a group and output tile."""
        return 0 if self.groups == 1 else self.tile.tiles * self.groups * self.tile_elems * 4

    @property
    def summary(self) -> str:
        t = self.tile
        over = (f"K split {self.splits} ways over a cluster" if self.groups == 1 else
                f"K split {self.groups * self.splits} ways over {self.groups} clusters of {self.splits}")
        return (f"{t.instruction}, tile {t.block_m}x{t.block_n}x{t.block_k}, {t.threads} threads, {t.stages} stages, "
                f"{over} ({self.k_tiles_per_split} k-tiles a block), "
                f"{self.smem_bytes} B smem, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        if self.groups == 1:
            out = [f"=> {self.blocks} blocks = {self.tile.tiles} output tiles x {self.splits} K slices; "
                   f"{self.k_tiles_per_split} of {self.k_tiles} k-tiles a block"]
        else:
            out = [f"=> {self.blocks} blocks = {self.tile.tiles} output tiles x {self.groups} groups x {self.splits} "
                   f"K slices; {self.k_tiles_per_split} of {self.k_tiles} k-tiles a block"]
        if self.at_once:
            waves = math.ceil(self.blocks / self.at_once)
            out.append(f"waves: clusters of {self.splits} hold {self.at_once} blocks at once, so the {self.blocks} "
                       f"run in {waves} wave{'s' if waves > 1 else ''} (what the cost model prices)")
        out.append(f"reduction: each block parks its {self.tile.block_m}x{self.tile.block_n} f32 partial in shared "
                       "memory; after a cluster barrier block r sums its share of the tile over ranks "
                   f"0..{self.splits - 1} "
                       "in order (bit-identical run to run)")
        if self.groups == 1:
            out.append("groups = 1: the output tiles and the cluster's K slices give the SMs work (or more groups "
                       "do not pay for the second kernel); C is stored by the cluster")
        else:
            out.append(f"groups = {self.groups}: each cluster writes its sum to a {self.scratch_bytes} B scratch "
                       "buffer (cudaMallocAsync on the stream, cudaFreeAsync after); a second kernel adds the "
                       f"{self.groups} partials of every element in group order and stores C (bit-identical run "
                       "to run)")
        out.extend(self.tile.detail_lines()[1:])
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tile"] = self.tile.to_dict()
        return {"family": self.family, **d, "shape": self.shape, "threads": self.threads,
                "decisions": [x.to_dict() for x in self.decisions]}


@dataclass(frozen=True)
class DotPlan:
    """Block shape `dot` (M = N = 1): no output tile, every thread along K."""

    family = NAME
    shape = "dot"
    threads: int
    chunk: int  # elements along k a thread takes at a time: 16 bytes of the narrower input
    unroll: int  # chunks of each input in flight a thread
    groups: int  # blocks (K slices) of one output; > 1: their sums meet in the scratch buffer
    k_slice: int  # elements of K a block: a multiple of `chunk`
    tiles: int  # outputs: the batch
    blocks: int  # tiles * groups
    vec: dict[str, int]  # input -> elements a load as the spec promises (1: element loads)
    vec_aligned: dict[str, int]  # ... when both view pointers are 16-byte aligned (checked at run time)
    finish_threads: int  # threads of the second kernel (groups > 1)
    index_type: str
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)

    arch_features = frozenset({"griddepcontrol"})  # the second kernel is a programmatic dependent launch

    @property
    def splits(self) -> int:
        return 1

    @property
    def smem_bytes(self) -> int:
        return self.threads // 32 * 4  # static: the warps' sums

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing beyond the promise: the launcher checks its own pointers for the wide loads."""
        return {}

    @property
    def scratch_bytes(self) -> int:
        return 0 if self.groups == 1 else self.tiles * self.groups * 4

    @property
    def runtime_dispatch(self) -> bool:
        return self.vec_aligned != self.vec

    @property
    def summary(self) -> str:
        loads = ", ".join(f"{x} x{self.vec[x]}" + (f" (x{self.vec_aligned[x]} 16-byte aligned)"
                                                   if self.vec_aligned[x] != self.vec[x] else "") for x in ("A", "B"))
        grid = (f"K split over {self.groups} blocks an output + a second kernel" if self.groups > 1 else
                "one block an output")
        return (f"dot (M = N = 1): {self.threads} threads along K, {self.chunk}-element chunks x{self.unroll} in "
                f"flight ({loads}), {grid}, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        out = [f"=> {self.blocks} blocks = {self.tiles} output(s) x {self.groups} K slice(s) of {self.k_slice}; "
               f"{self.threads} threads, index type {self.index_type}",
               "block shape dot: C has one element a batch index, so the block has no output tile; thread t "
               f"sums chunks of {self.chunk} consecutive k ({self.unroll} of each input loaded a round), then the "
               "block adds its threads' sums in a fixed shuffle tree and its warps in order"]
        for x in ("A", "B"):
            v, va = self.vec[x], self.vec_aligned[x]
            line = f"{x}: {v}-element loads" if v > 1 else f"{x}: element loads"
            if va != v:
                line += f"; {va}-element loads when both view pointers are 16-byte aligned (checked at run time)"
            out.append(line)
        if self.groups == 1:
            out.append("groups = 1: one block stores each output")
        else:
            out.append(f"groups = {self.groups}: each block writes its sum to a {self.scratch_bytes} B scratch buffer "
                       "(cudaMallocAsync on the stream, cudaFreeAsync after); a second kernel of "
                       f"{self.finish_threads} threads an output adds them in a fixed order and stores C "
                       "(bit-identical run to run)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "shape": self.shape, **asdict(self), "smem_bytes": self.smem_bytes,
                "decisions": [x.to_dict() for x in self.decisions]}


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    out = []
    if arch.cc < (9, 0):
        out.append(("thread-block clusters", f"{arch.name} has no clusters (the split-K reduction runs over DSMEM)"))
    if views.m > MAX_M:
        out.append(("small M", f"M = {views.m} rows: more than the {MAX_M} one small-M tile holds; "
                               "square tiles waste nothing there"))
    shortest = min(TILE_DOMAINS["block_k"])
    if views.k <= shortest:
        out.append(("K to split", f"K = {views.k}: one k-tile of {shortest} or fewer, nothing to split"))
    return out


def red_pitch(block_n: int) -> int:
    return block_n + RED_PAD


def smem_bytes(a: Assignment, elem: int) -> int:
    pipeline = cta.tile_smem_bytes(a, elem)
    return max(pipeline, a["block_m"] * red_pitch(a["block_n"]) * 4)


class _Graph(ConstraintGraph):
    """The tiling graph; an assignment from before the `groups` node (a tuned plan) reads back with groups = 1."""

    def restrict(self, assignment: Assignment) -> tuple[Assignment, list[str]]:
        if any(n.name == "groups" for n in self.nodes) and "groups" not in assignment:
            assignment = {**assignment, "groups": 1}
        return super().restrict(assignment)


def rows_at_run_time(views: ProblemViews) -> bool:
    """This kernel serves a range of a run-time letter (M is a kernel argument)."""
    rt = views.spec.run_time_letter
    return rt is not None and rt[1] < rt[2]


def is_dot(views: ProblemViews) -> bool:
    """M = N = 1: C has one element a batch index (a full reduction, a batch of dot products)."""
    return views.m == 1 and views.n == 1 and not rows_at_run_time(views)


def build_tiling_graph(views: ProblemViews, arch: Arch, instruction: str) -> ConstraintGraph:
    g = cta.build_tiling_graph(views, arch, instruction, TILE_DOMAINS)
    g = _Graph(g.nodes, g.constraints)
    k_tiles_of = {bk: math.ceil(views.k / bk) for bk in TILE_DOMAINS["block_k"]}
    g.node("splits", SPLITS, "blocks of a cluster that split K for one output tile")

    def every_split_works(a: Assignment) -> str | None:
        kt = k_tiles_of[a["block_k"]]
        per = math.ceil(kt / a["splits"])
        if (a["splits"] - 1) * per >= kt:
            return f"{kt} k-tiles of {a['block_k']} leave the last of {a['splits']} slices empty"
        return None
    g.constrain("k slices", "problem", ["block_k", "splits"], every_split_works,
                "each block of the cluster owns at least one k-tile")
    elem = views.operands["A"].elem_bytes

    def smem_ok(a: Assignment) -> str | None:
        need = smem_bytes(a, elem)
        return None if need <= arch.smem_per_block else f"{need} B > {arch.smem_per_block} B per block"
    g.constrain("shared memory with the partial tile", "arch",
                ["block_m", "block_n", "block_k", "stages", "smem_inner_a", "smem_inner_b", "splits"], smem_ok)

    def grid_ok(a: Assignment) -> str | None:
        blocks = views.batch * math.ceil(views.m / a["block_m"]) * math.ceil(views.n / a["block_n"]) * a["splits"]
        return None if blocks <= INT32_MAX else f"{blocks} blocks exceed one launch's grid"
    g.constrain("grid size", "arch", ["block_m", "block_n", "splits"], grid_ok)

    g.node("groups", GROUPS, "clusters that split K for one output tile, their partial tiles added in order by a "
                             "second kernel through a scratch buffer")
    run_time = rows_at_run_time(views)

    def groups_fill(a: Assignment) -> str | None:
        if a["groups"] == 1:
            return None
        if run_time:
            return "M is a run-time size here (the scratch buffer and the second kernel are sized at compile time)"
        tiles = views.batch * math.ceil(views.m / a["block_m"]) * math.ceil(views.n / a["block_n"])
        if tiles * a["splits"] >= arch.sms:
            return (f"{tiles} output tiles x {a['splits']} K slices already give {tiles * a['splits']} blocks for "
                    f"{arch.sms} SMs")
        return None
    g.constrain("groups only where tiles leave SMs idle", "problem", ["block_m", "block_n", "splits", "groups"],
                groups_fill, "more clusters a tile only when output tiles x K slices < SMs")

    def every_group_works(a: Assignment) -> str | None:
        if a["groups"] == 1:
            return None
        kt, slices = k_tiles_of[a["block_k"]], a["splits"] * a["groups"]
        per = math.ceil(kt / slices)
        if (slices - 1) * per >= kt:
            return f"{kt} k-tiles of {a['block_k']} leave the last of {slices} slices ({a['groups']} groups) empty"
        return None
    g.constrain("k slices over groups", "problem", ["block_k", "splits", "groups"], every_group_works,
                "each block of every group owns at least one k-tile")
    return g


def tile_elems(views: ProblemViews, a: Assignment) -> int:
    """Floats of one group's partial tile in the scratch buffer: the most valid elements a tile has."""
    return min(a["block_m"], views.m) * min(a["block_n"], views.n)


def blocks_at_once(a: Assignment, instruction: str, elem: int, arch: Arch) -> tuple[int, int]:
    """(blocks an SM, blocks the GPU holds at once): shared memory, threads and the block limit an SM, then
    clusters of `splits`, which fill fewer SMs (Arch.resident_blocks)."""
    threads = cta.block_threads(a, instruction)
    resident = max(1, min(arch.smem_per_sm // smem_bytes(a, elem), arch.max_threads_per_sm // threads,
                          arch.max_blocks_per_sm))
    return resident, arch.resident_blocks(resident, a["splits"])


def _cost(views: ProblemViews, arch: Arch, instruction: str):
    """Estimated µs, only to rank candidates. The blocks run in waves of what the SMs hold at once (clusters of
    `splits` fill fewer SMs: Arch.resident_blocks); a wave streams its blocks' bytes at the bandwidth their
    stages in flight sustain (Little's law against MEMORY_LATENCY_US, capped by the busy SMs' share of DRAM;
    few warps an SM leave the copies and barriers of each k-tile exposed, as in the cta model), or runs the
    math; plus the serial start-up, the reduction and the launch.

    Waves, because a grid of more blocks than its clusters hold at once runs well over a one-wave estimate
    (measured on the H200).
    MEMORY_LATENCY_US and WARPS_TO_HIDE_LATENCY overprice tilings of 2 warps an SM (never the fastest measured);
    constants that fit those better move picks into tilings never measured (docs/design/splitk.md, "Cost")."""
    elem = views.operands["A"].elem_bytes
    m, n, k, batch = views.m, views.n, views.k, views.batch
    rate = (arch.tc_flops_per_sm_clk if instruction == cta.MMA else arch.fma_flops_per_sm_clk) * arch.clock_ghz * 1e3
    dram = arch.dram_gbps * 1e3  # bytes per µs
    c_bytes = batch * m * n * views.operands["C"].elem_bytes

    def cost(a: Assignment) -> float:
        bm, bn, bk, splits = a["block_m"], a["block_n"], a["block_k"], a["splits"]
        groups = a["groups"]
        threads = cta.block_threads(a, instruction)
        tiles = batch * math.ceil(m / bm) * math.ceil(n / bn)
        blocks = tiles * splits * groups
        per = math.ceil(math.ceil(k / bk) / (splits * groups))
        resident, capacity = blocks_at_once(a, instruction, elem, arch)
        full_waves, last = divmod(blocks, capacity)
        waves = full_waves + (1 if last else 0)
        # A block streams its slice of B; A comes from L2 after the first n tile (a tenth of the cost).
        block_bytes = per * (bn + 0.1 * bm) * bk * elem
        in_flight = min(a["stages"] - 1, per) * (bm + bn) * bk * elem

        def wave_us(wave_blocks: int) -> float:
            busy = min(arch.sms, math.ceil(wave_blocks / resident))  # an SM pulls about its share of DRAM
            warps_per_sm = min(resident, math.ceil(wave_blocks / arch.sms)) * threads / 32
            bandwidth = (min(dram * busy / arch.sms, wave_blocks * in_flight / MEMORY_LATENCY_US)
                         * min(1.0, warps_per_sm / WARPS_TO_HIDE_LATENCY))
            return wave_blocks * block_bytes / bandwidth

        mem_us = full_waves * wave_us(capacity) + (wave_us(last) if last else 0.0) + c_bytes / dram
        if instruction == cta.FFMA:
            # An FFMA block's k-tile is the cta family's (cta.ffma_k_tile_clocks: issue or the shared-memory data
            # path, far below the FMA peak at thread tiles of 1 or 2 outputs), the SM's blocks running theirs one
            # after another, fewer than 8 warps leaving it idle. Priced at the FMA peak, the model picks one large
            # block an SM over many small blocks, which measured slower on the H200.
            on_sm = min(resident, math.ceil(min(blocks, capacity) / min(arch.sms, blocks)))
            occupancy = min(1.0, on_sm * threads / 32 / 8)
            math_us = waves * on_sm * per * cta.ffma_k_tile_clocks(views, a) / (arch.clock_ghz * 1e3 * occupancy)
        else:
            math_us = waves * bm * bn * per * bk * 2 / (rate / resident)
        serial_us = waves * per * 0.02  # one barrier and wait per k-tile and block
        # Each thread issues its share of a stage's 16-byte copies; a warp issues one a few clocks.
        copies = (bm + bn) * bk * elem / 16 / threads
        issue_us = waves * per * copies * ISSUE_CLOCKS / (arch.clock_ghz * 1e3)
        total = max(mem_us, math_us, issue_us) + serial_us + REDUCE_US + LAUNCH_US + MEMORY_LATENCY_US
        if groups > 1:
            # The second kernel and the scratch: every group's partial tile written once and read once.
            total += GROUPS_US + 2 * tiles * groups * tile_elems(views, a) * 4 / dram
        return total

    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    gated(NAME, views.spec.source, gates(views, arch))
    if is_dot(views):
        return Problem(NAME, views.spec.source, build_dot_graph(views, arch), _dot_cost(views, arch),
                       lambda a, decisions, feasible, cost: _dot_plan(views, a, decisions, feasible, cost))
    instruction, instr_decision = cta.choose_instruction(views, arch)
    return Problem(NAME, views.spec.source, build_tiling_graph(views, arch, instruction),
                   _cost(views, arch, instruction),
                   lambda a, decisions, feasible, cost: _plan(views, arch, instruction, a, decisions, feasible, cost),
                   (instr_decision,))


def _plan(views: ProblemViews, arch: Arch, instruction: str, a: Assignment, decisions: tuple[Decision, ...],
          feasible: int, cost_us: float) -> SplitKPlan:
    tile_assignment = {key: v for key, v in a.items() if key not in ("splits", "groups")}
    tile = cta.tile_plan(views, instruction, tile_assignment, decisions, feasible, cost_us)
    k_tiles = math.ceil(views.k / a["block_k"])
    groups = a.get("groups", 1)
    per = math.ceil(k_tiles / (a["splits"] * groups))
    return SplitKPlan(
        tile=tile, splits=a["splits"], k_tiles=k_tiles, k_tiles_per_split=per,
        blocks=tile.tiles * a["splits"] * groups,
        red_pitch=red_pitch(a["block_n"]), smem_bytes=smem_bytes(a, views.operands["A"].elem_bytes),
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
        groups=groups, tile_elems=tile_elems(views, a),
        at_once=blocks_at_once(a, instruction, views.operands["A"].elem_bytes, arch)[1],
    )


# ---- Block shape `dot` (M = N = 1) ----

def dot_chunk(views: ProblemViews) -> int:
    """Elements along k a thread takes at a time: one 16-byte load of the narrower input."""
    return 16 // min(views.operands["A"].elem_bytes, views.operands["B"].elem_bytes)


def dot_vectors(views: ProblemViews) -> tuple[dict[str, int], dict[str, int]]:
    """Per input, the elements of one load along k (1: element loads through the view's offsets): as the
    spec promises, and when the view pointers are 16-byte aligned. Only an input whose k role is its
    stride-1 role loads vectors; the views cap them so that none straddles a segment."""
    chunk = dot_chunk(views)
    vec, aligned = {}, {}
    for x in ("A", "B"):
        f = views.operands[x]
        unit = f.unit_role == "k"
        vec[x] = min(chunk, f.vector_elems) if unit else 1
        aligned[x] = max(vec[x], min(chunk, f.vector_elems_aligned)) if unit else 1
    return vec, aligned


def dot_slice(views: ProblemViews, groups: int) -> int:
    """Elements of K a block sums: K over the groups, rounded up to whole chunks (aligned vector loads)."""
    chunk = dot_chunk(views)
    return math.ceil(math.ceil(views.k / groups) / chunk) * chunk


def dot_registers(views: ProblemViews, unroll: int, wide: bool) -> int:
    """A thread's registers: its loaded chunks (a vector load packs 16-bit elements two a register, an
    element load takes a register an element) and DOT_BASE_REGISTERS."""
    vec, aligned = dot_vectors(views)
    chunk = dot_chunk(views)
    per_chunk = 0
    for x in ("A", "B"):
        v = (aligned if wide else vec)[x]
        per_chunk += math.ceil(chunk * views.operands[x].elem_bytes / 4) if v > 1 else chunk
    return DOT_BASE_REGISTERS + unroll * per_chunk


def dot_resident(views: ProblemViews, arch: Arch, threads: int, unroll: int) -> int:
    """Blocks an SM holds (the wide instantiation's registers)."""
    return max(1, min(arch.max_threads_per_sm // threads, arch.max_blocks_per_sm,
                      arch.regs_per_sm // (threads * dot_registers(views, unroll, True))))


def build_dot_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    g = ConstraintGraph()
    chunk = dot_chunk(views)
    g.node("threads", DOT_THREADS, "threads of a block, all along K (block shape dot: M = N = 1)")
    g.node("unroll", DOT_UNROLL, f"chunks of {chunk} elements of each input a thread has in flight")
    g.node("groups", DOT_GROUPS, "blocks that split K for one output, their sums added in order by a second "
                                 "kernel through a scratch buffer")
    tiles = views.batch

    def groups_fill(a: Assignment) -> str | None:
        if a["groups"] > 1 and tiles >= arch.sms:
            return f"{tiles} outputs already give every one of {arch.sms} SMs a block"
        return None
    g.constrain("groups only where outputs leave SMs idle", "problem", ["groups"], groups_fill,
                "more blocks an output only when outputs < SMs")

    def slice_ok(a: Assignment) -> str | None:
        if a["groups"] == 1:
            return None
        sl = dot_slice(views, a["groups"])
        if (a["groups"] - 1) * sl >= views.k:
            return f"K = {views.k} in slices of {sl} leaves the last of {a['groups']} empty"
        if sl < a["threads"] * chunk:
            return f"a K slice of {sl} gives fewer than one {chunk}-element chunk to each of {a['threads']} threads"
        return None
    g.constrain("k slices", "problem", ["threads", "groups"], slice_ok,
                "every block of an output owns a K slice with a chunk for each thread")

    def registers_ok(a: Assignment) -> str | None:
        cap = min(FULL_REGISTER_FILE, arch.regs_per_sm // a["threads"])
        need = max(dot_registers(views, a["unroll"], wide) for wide in (False, True))
        if need > cap:
            return f"about {need} registers a thread > {cap} with {a['threads']} threads (__launch_bounds__)"
        return None
    g.constrain("registers", "arch", ["threads", "unroll"], registers_ok,
                "every load in flight holds its data in registers, under the cap the block size sets")

    def one_wave(a: Assignment) -> str | None:
        if a["groups"] == 1:
            return None
        blocks = tiles * a["groups"]
        room = arch.sms * dot_resident(views, arch, a["threads"], a["unroll"])
        if blocks > room:
            return f"{blocks} blocks > {room} resident at once ({arch.sms} SMs): more slices only lengthen the sum"
        return None
    g.constrain("one wave", "arch", ["threads", "unroll", "groups"], one_wave,
                "the slices of every output run at once")
    return g


def _dot_bytes_per_k(views: ProblemViews) -> float:
    """Bytes one k element costs from both inputs: the element where k is the input's stride-1 role, four
    times it where the loads along k are strided (a sector each; L2 absorbs part), nothing where the
    input is broadcast over K."""
    out = 0.0
    for x in ("A", "B"):
        f = views.operands[x]
        if "k" in f.roles:
            out += f.elem_bytes * (1 if f.unit_role == "k" else 4)
    return out


def _dot_cost(views: ProblemViews, arch: Arch):
    """Estimated µs, only to rank: both inputs streamed once at the bandwidth the blocks' loads in flight
    sustain (Little's law against DOT_LOADED_LATENCY_US, capped by the busy SMs' share of DRAM), or the
    instruction issue; plus the block reduction, the launch, and with groups the second kernel."""
    chunk = dot_chunk(views)
    dram = arch.dram_gbps * 1e3  # bytes per µs
    tiles = views.batch
    per_k = _dot_bytes_per_k(views)
    load_bytes = chunk * sum(views.operands[x].elem_bytes for x in ("A", "B"))
    sixteen_bit = max(views.operands[x].elem_bytes for x in ("A", "B")) < 4

    def cost(a: Assignment) -> float:
        threads, unroll, groups = a["threads"], a["unroll"], a["groups"]
        blocks = tiles * groups
        k_slice = dot_slice(views, groups)
        resident = dot_resident(views, arch, threads, unroll)
        concurrent = min(blocks, arch.sms * resident)
        busy = min(blocks, arch.sms)
        # A block has at most its slice in flight.
        per_block = min(threads * unroll * load_bytes, k_slice * load_bytes / chunk)
        in_flight = concurrent * per_block
        warps_per_sm = min(resident, math.ceil(blocks / arch.sms)) * threads / 32
        bandwidth = (min(dram * busy / arch.sms, in_flight / DOT_LOADED_LATENCY_US)
                     * min(1.0, warps_per_sm / WARPS_TO_HIDE_LATENCY))
        mem_us = tiles * views.k * per_k / bandwidth
        # An FMA (and two conversions for 16-bit inputs) an element pair, issued a warp at a time, four an SM a clock.
        waves = math.ceil(blocks / (arch.sms * resident))
        rounds = math.ceil(k_slice / (threads * chunk * unroll))
        per_sm = min(resident, math.ceil(blocks / arch.sms))  # blocks an SM runs at once
        issue_us = (waves * per_sm * rounds * unroll * chunk * (3 if sixteen_bit else 1)
                    * threads / 32 / 4 / (arch.clock_ghz * 1e3))
        total = max(mem_us, issue_us) + DOT_REDUCE_US + LAUNCH_US + MEMORY_LATENCY_US
        if groups > 1:
            total += GROUPS_US + 2 * blocks * 4 / dram
        return total

    return cost


def _dot_plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
              cost_us: float) -> DotPlan:
    vec, aligned = dot_vectors(views)
    groups = a["groups"]
    blocks = views.batch * groups
    if blocks > INT32_MAX:
        raise grid_too_large(views, blocks, "blocks")
    return DotPlan(
        threads=a["threads"], chunk=dot_chunk(views), unroll=a["unroll"], groups=groups,
        k_slice=dot_slice(views, groups), tiles=views.batch, blocks=blocks, vec=vec, vec_aligned=aligned,
        finish_threads=max(32, min(FINISH_THREADS_MAX, groups)),
        index_type="long long" if views.needs_int64 else "int",
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
    )


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (SplitKPlan, DotPlan,), "dgemm_cli.renderers.splitk")
