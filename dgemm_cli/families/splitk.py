"""Kernel family `splitk`: small-M (decode) products as split-K over a thread-block cluster (pure).

With M = 1..64 rows a product is bound by reading B (the weight) once, and by how many SMs get
work: N = 128 makes 8 square tiles for 132 SMs. This family runs the `cta` family's block tiles
(mma.sync or FFMA over cp.async / gather stages, the same loaders and views) with tile shapes for
few rows and deep pipelines, and splits K over the blocks of one cluster: each block of the
cluster streams its slice of K, parks its partial tile in shared memory, and after a cluster
barrier every block sums a share of the tile over all blocks' shared memory (DSMEM) in rank order
and writes C. The sum runs in the same order on every launch, so results are bit-identical from
run to run; there is no workspace, no atomics and no state between launches.

Clusters exist from sm_90 on; on older archs the family is gated out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families import cta
from dgemm_cli.families.solving import Problem, gated
from dgemm_cli.views import INT32_MAX, ProblemViews

NAME = "splitk"
SUMMARY = ("small-M split-K: cta tiles for few rows, K split over a thread-block cluster, "
           "deterministic DSMEM reduction (sm_90+)")
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): its block tile is the
# cta family's: M enters only bounds checks and the tile count.
RUNTIME_ROWS = True
MAX_M = 64  # rows of C one block tile holds; beyond it the tiled families' square tiles pay
SPLITS = (2, 4, 8, 16)  # blocks of a cluster that share one output tile; 16 is a non-portable cluster
RED_PAD = 4  # floats of padding per row of the partial tile in shared memory
TILE_DOMAINS = {
    "block_m": (16, 32, 64),
    "block_n": (16, 32, 64, 128),
    "block_k": (32, 64, 128),
    "stages": (2, 3, 4, 6, 8),
}
# Cost model constants (µs), only to rank candidates and families. Set a priori, then checked against
# the level-1 tunes of the decode benchmarks (docs/RESULTS.md, 2026-11-30 second session).
LAUNCH_US = 2.0  # every launch: start-up, the first load's round trip, the last store
MEMORY_LATENCY_US = 1.0  # DRAM round trip that bytes in flight must cover (Little's law)
REDUCE_US = 0.4  # cluster barriers and the DSMEM sum of one tile
WARPS_TO_HIDE_LATENCY = 8  # resident warps an SM needs before the memory pipe stays busy
ISSUE_CLOCKS = 8  # clocks a thread spends issuing one 16-byte copy (address math included)


@dataclass(frozen=True)
class SplitKPlan:
    family = NAME
    tile: cta.TilePlan  # the block tile, loaders and main loop (rendered by the cta templates)
    splits: int  # blocks of a cluster, each one slice of K
    k_tiles: int  # k-tiles of the whole K
    k_tiles_per_split: int
    blocks: int  # grid size: tiles * splits
    red_pitch: int  # floats per row of the partial tile
    smem_bytes: int  # max of the pipeline's stages and the partial tile
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)

    requires_arch = "sm_90a"  # thread-block clusters (the arch table's only one with them)

    @property
    def threads(self) -> int:
        return self.tile.threads

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing beyond the promise: the loaders check their own pointers (as in the cta family)."""
        return {}

    @property
    def summary(self) -> str:
        t = self.tile
        return (f"{t.instruction}, tile {t.block_m}x{t.block_n}x{t.block_k}, {t.threads} threads, {t.stages} stages, "
                f"K split {self.splits} ways over a cluster ({self.k_tiles_per_split} k-tiles a block), "
                f"{self.smem_bytes} B smem, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        out = [f"=> {self.blocks} blocks = {self.tile.tiles} output tiles x {self.splits} K slices; "
               f"{self.k_tiles_per_split} of {self.k_tiles} k-tiles a block"]
        out.append(f"reduction: each block parks its {self.tile.block_m}x{self.tile.block_n} f32 partial in shared "
                       "memory; after a cluster barrier block r sums its share of the tile over ranks "
                   f"0..{self.splits - 1} "
                       "in order (bit-identical run to run)")
        out.extend(self.tile.detail_lines()[1:])
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tile"] = self.tile.to_dict()
        return {"family": self.family, **d, "threads": self.threads, "decisions": [x.to_dict() for x in self.decisions]}


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


def build_tiling_graph(views: ProblemViews, arch: Arch, instruction: str) -> ConstraintGraph:
    g = cta.build_tiling_graph(views, arch, instruction, TILE_DOMAINS)
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
    return g


def _cost(views: ProblemViews, arch: Arch, instruction: str):
    """Estimated µs, only to rank candidates: the bytes every tile streams at the bandwidth its bytes
    in flight can sustain (Little's law against MEMORY_LATENCY_US, capped by DRAM), or the math, plus
    the serial start-up, the reduction and the launch."""
    elem = views.operands["A"].elem_bytes
    m, n, k, batch = views.m, views.n, views.k, views.batch
    rate = (arch.tc_flops_per_sm_clk if instruction == cta.MMA else arch.fma_flops_per_sm_clk) * arch.clock_ghz * 1e3
    dram = arch.dram_gbps * 1e3  # bytes per µs
    c_bytes = batch * m * n * views.operands["C"].elem_bytes

    def cost(a: Assignment) -> float:
        bm, bn, bk, splits = a["block_m"], a["block_n"], a["block_k"], a["splits"]
        threads = cta.block_threads(a, instruction)
        tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
        tiles = batch * tiles_m * tiles_n
        blocks = tiles * splits
        k_tiles = math.ceil(k / bk)
        per = math.ceil(k_tiles / splits)
        smem = smem_bytes(a, elem)
        resident = max(1, min(arch.smem_per_sm // smem, arch.max_threads_per_sm // threads, arch.max_blocks_per_sm))
        concurrent = min(blocks, arch.sms * resident)
        # B is read once per m tile, A once per n tile (from L2 after the first: a tenth of the cost).
        streamed = (tiles_m * tiles_n * bn * k + 0.1 * tiles_n * tiles_m * bm * k) * batch * elem + c_bytes
        in_flight = concurrent * min(a["stages"] - 1, per) * (bm + bn) * bk * elem
        # Few warps an SM leave the copies and the barriers of each k-tile exposed (as in the cta model).
        warps_per_sm = min(resident, math.ceil(blocks / arch.sms)) * threads / 32
        # An SM pulls about its share of DRAM bandwidth: idle SMs leave theirs unused.
        bandwidth = (min(dram * min(blocks, arch.sms) / arch.sms, in_flight / MEMORY_LATENCY_US)
                     * min(1.0, warps_per_sm / WARPS_TO_HIDE_LATENCY))
        mem_us = streamed / bandwidth
        waves = math.ceil(blocks / (arch.sms * resident))
        math_us = waves * bm * bn * per * bk * 2 / (rate / resident)
        serial_us = waves * per * 0.02  # one barrier and wait per k-tile and block
        # Each thread issues its share of a stage's 16-byte copies; a warp issues one a few clocks.
        copies = (bm + bn) * bk * elem / 16 / threads
        issue_us = waves * per * copies * ISSUE_CLOCKS / (arch.clock_ghz * 1e3)
        return max(mem_us, math_us, issue_us) + serial_us + REDUCE_US + LAUNCH_US + MEMORY_LATENCY_US

    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    gated(NAME, views.spec.source, gates(views, arch))
    instruction, instr_decision = cta.choose_instruction(views, arch)
    return Problem(NAME, views.spec.source, build_tiling_graph(views, arch, instruction),
                   _cost(views, arch, instruction),
                   lambda a, decisions, feasible, cost: _plan(views, instruction, a, decisions, feasible, cost),
                   (instr_decision,))


def _plan(views: ProblemViews, instruction: str, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> SplitKPlan:
    tile_assignment = {key: v for key, v in a.items() if key != "splits"}
    tile = cta.tile_plan(views, instruction, tile_assignment, decisions, feasible, cost_us)
    k_tiles = math.ceil(views.k / a["block_k"])
    per = math.ceil(k_tiles / a["splits"])
    return SplitKPlan(
        tile=tile, splits=a["splits"], k_tiles=k_tiles, k_tiles_per_split=per, blocks=tile.tiles * a["splits"],
        red_pitch=red_pitch(a["block_n"]), smem_bytes=smem_bytes(a, views.operands["A"].elem_bytes),
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
    )
