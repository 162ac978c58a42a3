"""Kernel family `dot`: M = N = 1 (C one element a batch index: a full reduction `ab,ab->`, a batch of dot
products) as blocks along K (pure).

Such a problem has no output tile: a tile would waste all but one of its rows and columns, and the FFMA tile's one
useful thread would walk its K slice serially. Here every thread of a block sums 16-byte chunks of both inputs
into a few accumulators (`unroll` chunks of each in flight; wide loads only when both view pointers pass an
alignment check at run time, the same elements summed in the same order either way), and the block adds its
threads' sums in a fixed shuffle tree and its warps in order.

Groups. One block an output would stream all of K through one SM, so the `groups` node spreads K over several
blocks (no cluster): each writes its sum to a scratch buffer the launcher takes with cudaMallocAsync on the
caller's stream, and a second small kernel adds the GROUPS sums of every output in group order and runs the
epilogue (store_c). The order of every sum is fixed, so the result is bit-identical run to run; the C API does
not change (the scratch is stream-ordered: graph capture records it as allocation nodes).

Both kernels are programmatic dependent launches (griddepcontrol): the family is gated below sm_90. The splitk
family takes every other small-M problem and leaves these to this one (families/ksplit.py: is_dot).
Modules: cost.py prices a plan (and holds the facts of a block the graph checks), render.py renders it
(templates/dot/, dg/dot.cuh); this one holds the plan, the gates, the tiling graph and the family.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.dot.cost import (  # noqa: F401 (re-exported: renderers, tests and tools read them here)
    DOT_BASE_REGISTERS,
    DOT_LOADED_LATENCY_US,
    DOT_REDUCE_US,
    FULL_REGISTER_FILE,
    _dot_cost,
    dot_chunk,
    dot_registers,
    dot_resident,
    dot_slice,
    dot_vectors,
)
from dgemm_cli.families.ksplit import LAUNCH_US, is_dot  # noqa: F401 (re-exported: tools read LAUNCH_US here)
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import INT32_MAX, ProblemViews, grid_too_large

NAME = "dot"
SUMMARY = ("M = N = 1 (full reductions, batches of dot products): blocks along K, K split over blocks that meet in "
           "a scratch buffer; deterministic (sm_90+)")
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): the kernel is compiled for
# M = 1 (dg/dot.cuh asserts it), so the family serves only a bucket of one row.
RUNTIME_ROWS = False
# K of MIN_K or fewer: a block along K would leave all but a few of its threads idle (a chunk is 4..8 elements),
# and the tiled families take it in one k-tile.
MIN_K = 32
DOT_THREADS = (128, 256, 512)
DOT_UNROLL = (1, 2, 4, 8)  # chunks of each input in flight a thread
DOT_GROUPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # blocks (K slices) of one output
FINISH_THREADS_MAX = 256  # threads of the second kernel


@dataclass(frozen=True)
class DotPlan:
    """No output tile: every thread along K; `groups` blocks an output."""

    family = NAME
    shape = "dot"  # plan.json's name of the block's shape (the splitk family's is "tile")
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

    arch_features = frozenset({"griddepcontrol"})  # both kernels are programmatic dependent launches

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
        return (f"{self.threads} threads along K (M = N = 1), {self.chunk}-element chunks x{self.unroll} in "
                f"flight ({loads}), {grid}, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        """The plan's facts below its decisions, as `explain` prints them and the .cu's header comment states them:
        the grid, the block's sum, each input's loads (and the run-time check that widens them), the groups."""
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
    if not arch.grid_dependency:
        out.append(("dependent launch", f"{arch.name} has no griddepcontrol (the dot kernels are programmatic "
                                        "dependent launches)"))
    if not is_dot(views):
        out.append(("one output element", f"C has {views.m} x {views.n} elements a batch index: blocks along K "
                                          "serve only M = N = 1"))
    if views.k <= MIN_K:
        out.append(("K to split", f"K = {views.k}: {MIN_K} or fewer elements, too few to spread over a block's "
                                  "threads"))
    return out


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


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The tiling graph and the cost model, once the gates allow the problem."""
    return gated_problem(NAME, views, arch, gates, build_dot_graph, _dot_cost, _dot_plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (DotPlan,), "dgemm_cli.families.dot.render",
                      formal="dgemm_cli.families.dot.index")
