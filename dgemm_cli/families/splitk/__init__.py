"""Kernel family `splitk`: small-M (decode) products as split-K over a thread-block cluster (pure).

With M = 1..64 rows a product is bound by reading B (the weight) once, and by how many SMs get
work: N = 128 makes 8 square tiles for 132 SMs. This family runs the `cta` family's block tiles
(mma.sync or FFMA over cp.async / gather stages, the same loaders and views) with tile shapes for
few rows and deep pipelines, and splits K over the blocks of one cluster: each block of the
cluster streams its slice of K, parks its partial tile in shared memory, and after a cluster
barrier every block sums a share of the tile over all blocks' shared memory (DSMEM) in rank order
and writes C. The sum runs in the same order on every launch, so results are bit-identical from
run to run; there is no workspace, no atomics and no state between launches.

Groups. One cluster holds at most 16 blocks, so a product whose output tiles are few (4 x 16 outputs over K in the
millions are one tile) would stream all of K through 16 SMs. The `groups` node spreads K over
several clusters: each cluster reduces its own K range to a partial tile as above, parks it in a scratch
buffer the launcher takes with cudaMallocAsync on the caller's stream, and a second small kernel adds
the GROUPS partials of every element in group order and runs the epilogue (store_c). The final sum's
order is fixed, so the result stays bit-identical run to run; the C API does not change (the scratch is
stream-ordered: graph capture records it as allocation nodes).

M = N = 1 (C one element a batch index) is the `dot` family's: an output tile would waste all but one of its rows
and columns there, so this family is gated out of it (families/ksplit.py: is_dot).

Clusters exist from sm_90 on; on older archs the family is gated out.
Modules: cost.py prices a tiling, render.py renders a plan; this one holds the plan, the gates, the tiling graph and
the family, re-exporting their names. families/ksplit.py holds what it shares with the dot family.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families import cta
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.ksplit import is_dot, rows_at_run_time
from dgemm_cli.families.solving import Problem, gated
from dgemm_cli.families.splitk.cost import (  # noqa: F401 (re-exported: tests and tools read them here)
    GROUPS_US,
    ISSUE_CLOCKS,
    LAUNCH_US,
    MEMORY_LATENCY_US,
    RED_PAD,
    REDUCE_US,
    WARPS_TO_HIDE_LATENCY,
    _cost,
    blocks_at_once,
    red_pitch,
    smem_bytes,
    tile_elems,
)
from dgemm_cli.views import INT32_MAX, ProblemViews

NAME = "splitk"
SUMMARY = ("small-M split-K: cta tiles for few rows, K split over a thread-block cluster (DSMEM reduction) and "
           "over several clusters when tiles are few; deterministic (sm_90+)")
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): its block tile is the
# cta family's: M enters only bounds checks and the tile count.
RUNTIME_ROWS = True
MAX_M = 64  # rows of C one block tile holds; beyond it the tiled families' square tiles pay
# Past MAX_M rows the K split competes only for skinny outputs over a long K whose largest tiles leave SMs idle:
# there one wave of output tiles runs the whole k-loop on a few SMs. Elsewhere past MAX_M the tiled families' picks
# measured faster than the split (docs/RESULTS.md, "The K split past 64 rows"), and this family's cost model does
# not see why (its FFMA tiles run several times over their estimates).
SKINNY_N_MAX = 64
LONG_K_MIN = 1024
SPLITS = (2, 4, 8, 16)  # blocks of a cluster that share one output tile; 16 is a non-portable cluster
GROUPS = (1, 2, 4, 8, 16)  # clusters that share one output tile through the scratch buffer
TILE_DOMAINS = {
    "block_m": (16, 32, 64),
    "block_n": (16, 32, 64, 128),
    "block_k": (32, 64, 128),
    "stages": (2, 3, 4, 6, 8),
}

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
    shape = "tile"  # plan.json's name of the block's shape (the dot family's is "dot")

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
        """The plan's facts below its decisions, as `explain` prints them and the .cu's header comment states them:
        the grid and its clusters, the waves, the reduction, the groups, then the block tile's thread tile and loaders
        (with their run-time dispatch)."""
        groups = "" if self.groups == 1 else f" x {self.groups} groups"
        out = [f"=> {self.threads} threads, {self.smem_bytes} B shared memory, {self.blocks} blocks = "
               f"{self.tile.tiles} output tiles{groups} x {self.splits} K slices in clusters of {self.splits}; "
               f"{self.k_tiles_per_split} of {self.k_tiles} k-tiles a block, index type {self.tile.index_type}"]
        if self.at_once:
            waves = math.ceil(self.blocks / self.at_once)
            out.append(f"waves: clusters of {self.splits} hold {self.at_once} blocks at once, so the {self.blocks} "
                       f"run in {waves} wave{'s' if waves > 1 else ''} (what the cost model prices)")
        out.append(f"reduction: each block parks its {self.tile.block_m}x{self.tile.block_n} f32 partial in shared "
                   "memory; after a cluster barrier block r sums its share of the tile over ranks "
                   f"0..{self.splits - 1} in order (bit-identical run to run)")
        if self.groups == 1:
            out.append("groups = 1: the output tiles and the cluster's K slices give the SMs work (or more groups "
                       "do not pay for the second kernel); C is stored by the cluster")
        else:
            out.append(f"groups = {self.groups}: each cluster writes its sum to a {self.scratch_bytes} B scratch "
                       "buffer (cudaMallocAsync on the stream, cudaFreeAsync after); a second kernel of "
                       f"{self.tile.tiles} blocks adds the {self.groups} partials of every element in group order and "
                       "stores C (bit-identical run to run)")
        out.extend(self.tile.detail_lines()[1:])
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tile"] = self.tile.to_dict()
        return {"family": self.family, **d, "shape": self.shape, "threads": self.threads,
                "decisions": [x.to_dict() for x in self.decisions]}


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    out = []
    if arch.cc < (9, 0):
        out.append(("thread-block clusters", f"{arch.name} has no clusters (the split-K reduction runs over DSMEM)"))
    if views.m > MAX_M:
        largest = views.batch * math.ceil(views.m / max(TILE_DOMAINS["block_m"])) * \
            math.ceil(views.n / max(TILE_DOMAINS["block_n"]))
        if views.n > SKINNY_N_MAX or views.k < LONG_K_MIN:
            out.append(("small M", f"M = {views.m} rows, N = {views.n}, K = {views.k}: past {MAX_M} rows the K "
                                   f"split runs only skinny outputs (N <= {SKINNY_N_MAX}) over a long K "
                                   f"(>= {LONG_K_MIN}); square tiles waste nothing here"))
        elif largest >= arch.sms:
            out.append(("few output tiles", f"M = {views.m} rows: {largest} output tiles of its largest tile "
                                            f"already fill the {arch.sms} SMs; square tiles waste nothing there"))
    shortest = min(TILE_DOMAINS["block_k"])
    if views.k <= shortest:
        out.append(("K to split", f"K = {views.k}: one k-tile of {shortest} or fewer, nothing to split"))
    if is_dot(views):
        out.append(("an output tile", "M = N = 1: a tile would waste all but one of its rows and columns; the dot "
                                      "family's blocks along K take it"))
    return out


class _Graph(ConstraintGraph):
    """The tiling graph; an assignment from before the `groups` node (a tuned plan) reads back with groups = 1."""

    def restrict(self, assignment: Assignment) -> tuple[Assignment, list[str]]:
        if any(n.name == "groups" for n in self.nodes) and "groups" not in assignment:
            assignment = {**assignment, "groups": 1}
        return super().restrict(assignment)


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


def problem(views: ProblemViews, arch: Arch) -> Problem:
    gated(NAME, views.spec.source, gates(views, arch))
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


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (SplitKPlan,), "dgemm_cli.families.splitk.render",
                      formal="dgemm_cli.families.splitk.index")
