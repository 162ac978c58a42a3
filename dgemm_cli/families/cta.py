"""Kernel family `cta`: CTA-tiled mma.sync (f16/bf16) or FFMA (f32), cp.async or gather loaders (pure).

It runs every problem the spec language allows on every arch, which makes it the fallback of the
other families. Two small constraint graphs are solved in turn:
  1. the instruction (tensor-core mma.sync m16n8k16 for f16/bf16, CUDA-core FFMA for f32), then
  2. the tiling for that instruction: block tile M/N/K, warp split (or thread tile for FFMA),
     pipeline stages, and per input operand the shared-memory orientation and the loader
     (cp.async of a vector when the view allows it, a strided gather when it does not).
Every choice keeps the constraint or cost comparison that decided it, for `deepgemm explain`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision, solve
from dgemm_cli.errors import PlanError
from dgemm_cli.families.solving import Problem
from dgemm_cli.views import INT32_MAX, OperandFacts, ProblemViews

NAME = "cta"
SUMMARY = "CTA-tiled mma.sync m16n8k16 (f16/bf16) or FFMA (f32), cp.async / gather loaders, any arch, any view"
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): M enters only bounds
# checks and the tile count, which the kernel takes at run time.
RUNTIME_ROWS = True
MMA = "mma.sync.m16n8k16"
FFMA = "ffma"
SMEM_PAD_BYTES = 16  # one 16-byte vector of padding per shared-memory row: conflict-free ldmatrix/cp.async
MAX_ACCUM_PER_THREAD = 64  # f32 accumulators a thread keeps in registers without spilling
MAX_GATHER_PER_THREAD = 16  # elements a thread stages in registers per gathered operand and k-tile
MAX_LIVE_PER_THREAD = 96  # accumulators + staged gather elements live across the math
# Registers per thread a plan without register-staged gathers is compiled for
# (__launch_bounds__(threads, 65536 / (threads * cap))). Measured on the H200 (docs/RESULTS.md):
# square_bf16 ran 450 µs with 128 (two 256-thread blocks an SM) against 638 µs uncapped (ptxas took
# 144, one block an SM). Gathers stage their next k-tile in registers and spilled under that cap in
# 10 of 150 random specs, so their plans keep the full register file (min blocks 1).
REGISTER_CAP = 128
OTHER = {"A": "m", "B": "n"}  # the non-k role of each input
# Fixed cost of a launch in the cost model (µs). Measured on the H200 (deepgemm tune, 2026-11-30): with
# none, the model preferred this family on conv 32x64x56x56 (20.6 µs measured against the Hopper
# family's 11.9) and on batched_broadcast (6.6 against 3.8).
LAUNCH_US = 2.5


@dataclass(frozen=True)
class LoaderPlan:
    """How one input operand's tiles reach shared memory."""

    operand: str  # "A" or "B"
    # "cp_async" (vector copies, asynchronous), "gather" (element loads staged in registers across
    # the math) or "gather_direct" (element loads stored at once; only as a run-time fallback)
    kind: str
    vector_elems: int  # elements per copy (1 for gather)
    smem_inner: str  # role contiguous in shared memory: "k", or "m" for A / "n" for B
    # The pointer alignment (bytes) this loader needs beyond what the spec promises; 0 if none.
    # When non-zero the launcher checks the pointer and otherwise takes `fallback`.
    runtime_align: int
    fallback: LoaderPlan | None
    reason: str


@dataclass(frozen=True)
class TilePlan:
    family = NAME
    instruction: str
    block_m: int
    block_n: int
    block_k: int
    warps_m: int  # MMA: warps along M and N
    warps_n: int
    thread_m: int  # FFMA: outputs per thread along M and N (1 for MMA)
    thread_n: int
    threads: int
    min_blocks_per_sm: int  # __launch_bounds__'s second argument: caps registers at REGISTER_CAP
    stages: int
    smem_bytes: int
    a: LoaderPlan
    b: LoaderPlan
    elem_bytes: int  # of A and B
    index_type: str  # "int" or "long long"
    tiles_m: int
    tiles_n: int
    tiles: int  # blocks in the grid (batch * tiles_m * tiles_n)
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float  # the cost model's estimate, for ranking only
    assignment: dict[str, Any] = field(default_factory=dict)  # the tiling graph's values (the tuning database keeps it)
    runtime_fallback: bool = False  # rendered beside another family's kernel, for pointers its check rejects

    def smem_tile(self, ld: LoaderPlan) -> SmemTile:
        extent = self.block_m if ld.operand == "A" else self.block_n
        return smem_tile(ld.operand, ld.smem_inner, extent, self.block_k, self.elem_bytes)

    requires_arch = None  # mma.sync / FFMA and cp.async: every arch in the table

    @property
    def runtime_dispatch(self) -> bool:
        return bool(self.a.runtime_align or self.b.runtime_align)

    @property
    def summary(self) -> str:
        def loader(ld: LoaderPlan) -> str:
            return f"{ld.kind}{ld.vector_elems if ld.kind == 'cp_async' else ''}"
        return (f"{self.instruction}, tile {self.block_m}x{self.block_n}x{self.block_k}, {self.threads} threads, "
                f"{self.stages} stages, A {loader(self.a)}, B {loader(self.b)}, {self.smem_bytes} B smem, "
                f"{self.tiles} blocks")

    def detail_lines(self) -> list[str]:
        """What `explain` adds below the decisions: the grid and each loader."""
        out = [f"=> {self.threads} threads, {self.smem_bytes} B shared memory, grid {self.tiles} blocks "
               f"({self.tiles // (self.tiles_m * self.tiles_n)} x {self.tiles_m} x {self.tiles_n}), "
               f"index type {self.index_type}"]
        for ld in (self.a, self.b):
            line = f"{ld.operand}: {ld.kind}" + (f" x{ld.vector_elems}" if ld.kind == "cp_async" else "")
            line += f", shared rows along {ld.smem_inner}"
            if ld.runtime_align and ld.fallback:
                line += (f"; needs a {ld.runtime_align}-byte aligned pointer at run time, else {ld.fallback.kind}"
                         + (f" x{ld.fallback.vector_elems}" if ld.fallback.kind == "cp_async" else ""))
            out.append(line)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "decisions": [x.to_dict() for x in self.decisions]}


@dataclass(frozen=True)
class SmemTile:
    """One stage of one input in shared memory: `rows` rows of `inner` elements, padded to `pitch`."""

    operand: str
    rows: int
    inner: int
    pitch: int
    rows_role: str
    inner_role: str

    @property
    def elems(self) -> int:
        return self.rows * self.pitch


def smem_tile(operand: str, smem_inner: str, block_mn: int, block_k: int, elem_bytes: int) -> SmemTile:
    other = OTHER[operand]
    rows, inner = (block_mn, block_k) if smem_inner == "k" else (block_k, block_mn)
    return SmemTile(operand, rows, inner, inner + SMEM_PAD_BYTES // elem_bytes,
                    other if smem_inner == "k" else "k", smem_inner)


def tile_smem_bytes(a: Assignment, elem_bytes: int) -> int:
    a_tile = smem_tile("A", a["smem_inner_a"], a["block_m"], a["block_k"], elem_bytes)
    b_tile = smem_tile("B", a["smem_inner_b"], a["block_n"], a["block_k"], elem_bytes)
    return a["stages"] * (a_tile.elems + b_tile.elems) * elem_bytes


def copy_elems(facts: OperandFacts, smem_inner: str, aligned: bool) -> int:
    """Elements one copy may move: a vector along the stride-1 dim when shared rows follow it,
    else single elements. `aligned`: assume a 16-byte-aligned base pointer (checked at run time)."""
    if smem_inner != facts.unit_role:
        return 1
    return facts.vector_elems_aligned if aligned else facts.vector_elems


def block_threads(a: Assignment, instruction: str) -> int:
    if instruction == MMA:
        return 32 * a["warps_m"] * a["warps_n"]
    return (a["block_m"] // a["thread_m"]) * (a["block_n"] // a["thread_n"])


def choose_instruction(views: ProblemViews, arch: Arch) -> tuple[str, Decision]:
    g = ConstraintGraph()
    dtype = views.operands["A"].dtype
    g.node("instruction", (MMA, FFMA), "the math instruction of the main loop")
    g.constrain("tensor-core dtypes", "instruction", ["instruction"],
                lambda a: (f"mma.sync takes f16/bf16 operands, A and B are {dtype} (tf32 would miss f32's 1e-5 "
                           "tolerance)") if a["instruction"] == MMA and dtype == "f32" else None)
    g.constrain("tensor cores present", "arch", ["instruction"],
                lambda a: f"{arch.name} has no mma.sync" if a["instruction"] == MMA and arch.cc < (8, 0) else None)
    rate = {MMA: arch.tc_flops_per_sm_clk, FFMA: arch.fma_flops_per_sm_clk}
    sol = solve(g, lambda a: 1.0 / rate[a["instruction"]])
    return sol.assignment["instruction"], sol.decisions[0]


def build_tiling_graph(views: ProblemViews, arch: Arch, instruction: str,
                       domains: dict[str, tuple[Any, ...]] | None = None) -> ConstraintGraph:
    """`domains`: other value sets for the tile nodes (block_m, block_n, block_k, stages), for the
    families that run this family's tiles with their own reach (splitk)."""
    a_facts, b_facts = views.operands["A"], views.operands["B"]
    elem = a_facts.elem_bytes
    g = ConstraintGraph()
    mma = instruction == MMA
    dom = {"block_m": (16, 32, 64, 128), "block_n": (16, 32, 64, 128),
           "block_k": (16, 32, 64) if mma else (8, 16, 32), "stages": (2, 3, 4), **(domains or {})}
    g.node("block_m", dom["block_m"], "rows of C per block")
    g.node("block_n", dom["block_n"], "columns of C per block")
    g.node("block_k", dom["block_k"], "depth of one k-tile in shared memory")
    if mma:
        g.node("warps_m", (1, 2, 4), "warps along M (each warp owns a (block_m/warps_m) x (block_n/warps_n) tile)")
        g.node("warps_n", (1, 2, 4), "warps along N")
    else:
        g.node("thread_m", (1, 2, 4, 8), "outputs per thread along M")
        g.node("thread_n", (1, 2, 4, 8), "outputs per thread along N")
    g.node("stages", dom["stages"], "shared-memory pipeline depth")
    g.node("smem_inner_a", ("k", "m"), "which role of A is contiguous in shared memory")
    g.node("smem_inner_b", ("k", "n"), "which role of B is contiguous in shared memory")
    g.node("loader_a", ("cp_async", "gather"), "how A tiles reach shared memory")
    g.node("loader_b", ("cp_async", "gather"), "how B tiles reach shared memory")

    split = ("warps_m", "warps_n") if mma else ("thread_m", "thread_n")
    if mma:
        def warp_tile(a: Assignment) -> str | None:
            if a["block_m"] % (16 * a["warps_m"]) or a["block_n"] % (16 * a["warps_n"]):
                return f"warp tile {a['block_m']}/{a['warps_m']} x {a['block_n']}/{a['warps_n']} is not made of 16x16"
            return None
        g.constrain("mma warp tile", "instruction", ["block_m", "block_n", *split], warp_tile,
                    "each warp covers whole m16 rows and n16 columns (two n8 mma per ldmatrix.x4 of B)")
        g.constrain("mma k step", "instruction", ["block_k"],
                    lambda a: None if a["block_k"] % 16 == 0 else "block_k must be a multiple of 16")
    else:
        g.constrain("thread tile", "instruction", ["block_m", "block_n", *split],
                    lambda a: None if a["block_m"] % a["thread_m"] == 0 and a["block_n"] % a["thread_n"] == 0
                    else "thread tile must divide the block tile")
        # The FFMA loop reads A as [k][m] and B as [k][n] so that a warp's loads are broadcasts or
        # consecutive words.
        g.constrain("ffma smem orientation", "instruction", ["smem_inner_a", "smem_inner_b"],
                    lambda a: None if (a["smem_inner_a"], a["smem_inner_b"]) == ("m", "n")
                    else "the FFMA main loop reads shared memory as [k][m] and [k][n]")

    def threads_ok(a: Assignment) -> str | None:
        t = block_threads(a, instruction)
        lo = 32 if mma else 64
        if not lo <= t <= 256 or t % 32:
            return f"{t} threads, want a multiple of 32 in [{lo}, 256]"
        return None
    g.constrain("threads per block", "arch", ["block_m", "block_n", *split], threads_ok)

    def accum_ok(a: Assignment) -> str | None:
        acc = a["block_m"] * a["block_n"] // block_threads(a, instruction)
        return None if acc <= MAX_ACCUM_PER_THREAD else f"{acc} f32 accumulators per thread (> {MAX_ACCUM_PER_THREAD})"
    g.constrain("register budget", "arch", ["block_m", "block_n", *split], accum_ok,
                "accumulators must stay in registers with room for fragments and addresses")

    def smem_ok(a: Assignment) -> str | None:
        need = tile_smem_bytes(a, elem)
        return None if need <= arch.smem_per_block else f"{need} B > {arch.smem_per_block} B per block"
    g.constrain("shared memory", "arch",
                ["block_m", "block_n", "block_k", "stages", "smem_inner_a", "smem_inner_b"], smem_ok)

    for op, facts in (("a", a_facts), ("b", b_facts)):
        inner, loader = f"smem_inner_{op}", f"loader_{op}"
        other = OTHER[facts.name]
        extent = "block_m" if other == "m" else "block_n"

        def coalesce(a: Assignment, facts: OperandFacts = facts, inner: str = inner, other: str = other) -> str | None:
            want = facts.unit_role if facts.unit_role in ("k", other) else "k"
            if a[inner] != want:
                why = (f"{facts.name} is contiguous along {facts.unit_role}" if facts.unit_role in ("k", other)
                       else f"{facts.name} has no contiguous k/{other} dim; k-inner by convention")
                return f"{why}: shared rows follow it so that global reads coalesce"
            return None
        if mma:  # the FFMA loop fixes the orientation; its loaders transpose instead
            g.constrain(f"coalescing {facts.name}", "view", [inner], coalesce)

        def cp_async_ok(a: Assignment, facts: OperandFacts = facts, inner: str = inner, loader: str = loader,
                        extent: str = extent) -> str | None:
            if a[loader] != "cp_async":
                return None
            vec = copy_elems(facts, a[inner], aligned=True)
            if vec * facts.elem_bytes < 4:
                why = (facts.vector_limit_aligned if a[inner] == facts.unit_role
                       else f"shared rows of {facts.name} run along {a[inner]}, not its stride-1 dim")
                return f"cp.async copies >= 4 bytes; {facts.name} allows {vec * facts.elem_bytes} ({why})"
            run = a["block_k"] if a[inner] == "k" else a[extent]
            if run % vec:
                return f"tile rows of {run} elements are not whole {vec}-element vectors"
            return None
        g.constrain(f"cp.async {facts.name}", "view", [inner, loader, "block_k", extent], cp_async_ok)

        def gather_regs(a: Assignment, loader: str = loader, extent: str = extent) -> str | None:
            if a[loader] != "gather":
                return None
            per_thread = math.ceil(a[extent] * a["block_k"] / block_threads(a, instruction))
            return (None if per_thread <= MAX_GATHER_PER_THREAD
                    else f"{per_thread} staged elements per thread (> {MAX_GATHER_PER_THREAD})")
        g.constrain(f"gather staging {facts.name}", "arch", [loader, "block_m", "block_n", "block_k", *split],
                    gather_regs, "a gather stages the next k-tile in registers while the current one computes")

    def live_regs(a: Assignment) -> str | None:
        threads = block_threads(a, instruction)
        live = a["block_m"] * a["block_n"] // threads
        for x, extent in (("a", "block_m"), ("b", "block_n")):
            if a[f"loader_{x}"] == "gather":
                live += math.ceil(a[extent] * a["block_k"] / threads)
        return None if live <= MAX_LIVE_PER_THREAD else f"{live} values live across the math (> {MAX_LIVE_PER_THREAD})"
    g.constrain("live registers", "arch", ["loader_a", "loader_b", "block_m", "block_n", "block_k", *split],
                live_regs, "accumulators plus register-staged gathers must leave room for fragments and addresses")

    g.constrain("pipeline depth", "problem", ["loader_a", "loader_b", "stages"],
                lambda a: "register-staged gathers overlap exactly one k-tile: 2 stages"
                if a["loader_a"] == a["loader_b"] == "gather" and a["stages"] != 2 else None)
    return g


def _cost(views: ProblemViews, arch: Arch, instruction: str):
    """Estimated kernel time in µs, only to rank candidates: the largest of the math time of the
    busiest SM, the DRAM time of the bytes all tiles stream, and the k-loop latency a shallow
    pipeline cannot hide."""
    elem = views.operands["A"].elem_bytes
    m, n, k, batch = views.m, views.n, views.k, views.batch
    clk = arch.clock_ghz * 1e3  # clocks per µs
    rate = (arch.tc_flops_per_sm_clk if instruction == MMA else arch.fma_flops_per_sm_clk) * clk
    c_bytes = batch * m * n * views.operands["C"].elem_bytes
    ab_bytes = batch * (m + n) * k * elem

    def cost(a: Assignment) -> float:
        bm, bn, bk = a["block_m"], a["block_n"], a["block_k"]
        threads = block_threads(a, instruction)
        tiles = batch * math.ceil(m / bm) * math.ceil(n / bn)
        k_tiles = math.ceil(k / bk)
        limit = min(arch.smem_per_sm // tile_smem_bytes(a, elem), arch.max_threads_per_sm // threads,
                    arch.max_blocks_per_sm)
        tiles_per_sm = math.ceil(tiles / arch.sms)
        resident = max(1, min(limit, tiles_per_sm))
        busy_sms = min(tiles, arch.sms)
        # Warps in flight hide latency; fewer than ~8 per SM leave the math units idle.
        occupancy = min(1.0, resident * threads / 32 / 8)
        if instruction == MMA:
            wm, wn = bm // a["warps_m"], bn // a["warps_n"]
            mmas, loads = (wm // 16) * (wn // 8), wm // 16 + wn // 16  # per k16 step of one warp
            issue = mmas / (mmas + loads)
        else:
            tm, tn = a["thread_m"], a["thread_n"]
            issue = tm * tn / (tm * tn + tm + tn)  # FFMAs per shared-memory load
        math_us = tiles_per_sm * bm * bn * k_tiles * bk * 2 / (rate * issue * occupancy)
        # Half the re-reads hit L2, but every input byte comes from DRAM once (the floor binds for
        # small-M products, where each B byte is read by one tile).
        streamed = max(tiles * (bm + bn) * k_tiles * bk * elem * 0.5, ab_bytes) + c_bytes
        mem_us = streamed / (arch.dram_gbps * 1e3 * min(1.0, busy_sms / (arch.sms / 2)))
        gathers = sum(a[f"loader_{x}"] == "gather" for x in "ab")
        latency_us = tiles_per_sm * k_tiles * 0.8 * (1 + gathers) / ((a["stages"] - 1) * resident)
        # The small latency term breaks ties towards deeper pipelines and fewer k-tiles. LAUNCH_US is
        # what every launch pays before the first tile's data arrives and after its last store; it
        # only matters against the other families (docs/DESIGN.md: calibrated on measured tunes).
        return max(math_us, mem_us, latency_us) + 0.05 * latency_us + LAUNCH_US

    return cost


def _loader(facts: OperandFacts, kind: str, inner: str, reason: str) -> LoaderPlan:
    if kind == "gather":
        return LoaderPlan(facts.name, "gather", 1, inner, 0, None, reason)
    vec, promised = copy_elems(facts, inner, aligned=True), copy_elems(facts, inner, aligned=False)
    if vec <= promised:
        return LoaderPlan(facts.name, "cp_async", vec, inner, 0, None, reason)
    # The wide copy needs more alignment than the spec promises: the launcher checks the pointer
    # at run time and otherwise takes the widest copy the promise allows (or a gather).
    why = f"pointer not {vec * facts.elem_bytes}-byte aligned at run time"
    if promised * facts.elem_bytes >= 4:
        fallback = LoaderPlan(facts.name, "cp_async", promised, inner, 0, None, why)
    else:  # fallback only: loads and stores at once, so the cp.async plan's register budget holds
        fallback = LoaderPlan(facts.name, "gather_direct", 1, inner, 0, None, why)
    return LoaderPlan(facts.name, "cp_async", vec, inner, vec * facts.elem_bytes, fallback, reason)


def _min_blocks(a: Assignment, instruction: str) -> int:
    if "gather" in (a["loader_a"], a["loader_b"]):
        return 1
    return max(1, 65536 // (block_threads(a, instruction) * REGISTER_CAP))


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    """Nothing rules this family out: it takes every view on every arch."""
    return []


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The instruction (decided first), the tiling graph for it and the cost model: what every way of
    planning (the best plan, tuning candidates, a tuned assignment) starts from."""
    instruction, instr_decision = choose_instruction(views, arch)
    return Problem(NAME, views.spec.source, build_tiling_graph(views, arch, instruction),
                   _cost(views, arch, instruction),
                   lambda a, decisions, feasible, cost: tile_plan(views, instruction, a, decisions, feasible, cost),
                   (instr_decision,))


def tile_plan(views: ProblemViews, instruction: str, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> TilePlan:
    bm, bn = a["block_m"], a["block_n"]
    tiles_m, tiles_n = math.ceil(views.m / bm), math.ceil(views.n / bn)
    tiles = views.batch * tiles_m * tiles_n
    if tiles > INT32_MAX:
        raise PlanError(f"{views.spec.source}: {tiles} blocks exceed one launch's grid (2^31 - 1); "
                        "split the problem into several specs")
    dec = {d.node: d for d in decisions}
    loaders = {x: _loader(views.operands[x], a[f"loader_{x.lower()}"], a[f"smem_inner_{x.lower()}"],
                          dec[f"loader_{x.lower()}"].summary()) for x in ("A", "B")}
    mma = instruction == MMA
    return TilePlan(
        instruction=instruction, block_m=bm, block_n=bn, block_k=a["block_k"],
        warps_m=a["warps_m"] if mma else 1, warps_n=a["warps_n"] if mma else 1,
        thread_m=1 if mma else a["thread_m"], thread_n=1 if mma else a["thread_n"],
        threads=block_threads(a, instruction), min_blocks_per_sm=_min_blocks(a, instruction), stages=a["stages"],
        smem_bytes=tile_smem_bytes(a, views.operands["A"].elem_bytes),
        a=loaders["A"], b=loaders["B"], elem_bytes=views.operands["A"].elem_bytes,
        index_type="long long" if views.needs_int64 else "int",
        tiles_m=tiles_m, tiles_n=tiles_n, tiles=tiles,
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
    )
