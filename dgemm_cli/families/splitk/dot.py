"""The `splitk` family's block shape `dot` (pure): M = N = 1 (C one element a batch index) as blocks along K, every
thread summing 16-byte chunks of both inputs, `groups` blocks an output meeting in a scratch buffer (the family's
module doc): its plan, tiling graph, cost model and plan maker."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.splitk.cost import GROUPS_US, LAUNCH_US, MEMORY_LATENCY_US, WARPS_TO_HIDE_LATENCY
from dgemm_cli.views import INT32_MAX, ProblemViews, grid_too_large

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
class DotPlan:
    """Block shape `dot` (M = N = 1): no output tile, every thread along K."""

    family = "splitk"  # a block shape of the splitk family (splitk.NAME)
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
