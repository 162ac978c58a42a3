"""Kernel family `cta`: CTA-tiled mma.sync (f16/bf16) or FFMA (f32), cp.async or gather loaders (pure).

It runs every problem the spec language allows on every arch, which makes it the fallback of the
other families. Two small constraint graphs are solved in turn:
  1. the instruction (tensor-core mma.sync m16n8k16 for f16/bf16, CUDA-core FFMA for f32), then
  2. the tiling for that instruction: block tile M/N/K, warp split (or thread tile and register cap
     for FFMA), pipeline stages, and per input operand the shared-memory orientation and the loader
     (cp.async of a vector when the view allows it, a strided gather when it does not, and for FFMA
     vector loads along k stored transposed when the view is contiguous along k).
Every choice keeps the constraint or cost comparison that decided it, for `deepgemm explain`.
Modules: tile.py holds the tile's geometry, cost.py the cost model, render.py the renderer (imported by `render`
alone); this one the plan, the graphs and the family, re-exporting their names.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision, solve
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.cta.cost import (  # noqa: F401 (re-exported: the splitk family and tests read them here)
    COPY_SLOTS,
    DATA_PATH_BYTES_PER_CLK,
    K_TILE_LATENCY_US,
    LAUNCH_US,
    LOOP_SLOTS,
    SCHEDULERS_PER_SM,
    SECTOR_BYTES,
    SYNC_CLOCKS,
    _cost,
    ffma_k_tile_clocks,
    transposed_store_ways,
)
from dgemm_cli.families.cta.tile import (  # noqa: F401 (re-exported: renderers, splitk and tests import them here)
    FFMA,
    FULL_REGISTER_FILE,
    MMA,
    OTHER,
    REGISTERS_PER_SM,
    SMEM_PAD_BYTES,
    STAGED,
    TRANSPOSE_DEPTHS,
    SmemTile,
    block_threads,
    copy_elems,
    fragment_vector,
    smem_tile,
    staged_per_thread,
    tile_smem_bytes,
)
from dgemm_cli.families.solving import Problem
from dgemm_cli.views import INT32_MAX, OperandFacts, ProblemViews, grid_too_large

NAME = "cta"
SUMMARY = "CTA-tiled mma.sync m16n8k16 (f16/bf16) or FFMA (f32), cp.async / gather loaders, any arch, any view"
# Whether one kernel can serve a range of a run-time-sized letter (spec `{min, max}`): M enters only bounds
# checks and the tile count, which the kernel takes at run time.
RUNTIME_ROWS = True
MAX_ACCUM_PER_THREAD = 64  # f32 accumulators a thread keeps in registers without spilling
MAX_GATHER_PER_THREAD = 16  # elements a thread stages in registers per gathered operand and k-tile
MAX_LIVE_PER_THREAD = 96  # accumulators + staged gather elements live across the math
# Registers per thread a plan without register-staged gathers is compiled for
# (__launch_bounds__(threads, 65536 / (threads * cap))): two 256-thread blocks an SM instead of one, measured
# faster on the H200. Gathers stage their next k-tile in registers and spill under it, so their plans keep the
# full register file (min blocks 1).
REGISTER_CAP = 128
# FFMA, by the `registers` decision: the accumulators a thread may own, and what it keeps across a k
# step (accumulators + staged elements + the step's TM + TN values of A and B) without spilling: under the
# 128 cap ptxas spills at 96 live values and not at 88. The whole file takes the thread tiles of 128
# accumulators cuBLAS's SGEMM runs (128x128 tiles of 4 warps).
FFMA_MAX_ACCUM = {REGISTER_CAP: MAX_ACCUM_PER_THREAD, FULL_REGISTER_FILE: 128}
FFMA_MAX_LIVE = {REGISTER_CAP: 88, FULL_REGISTER_FILE: 176}
# Under the 128 cap, loads a thread issues a k-tile into registers (transposes, gathers): ptxas spills at 16
# and not at 8.
MAX_STAGED_LOADS_UNDER_CAP = 8
# FFMA: the k-tile's unrolled math, thread_m x thread_n x block_k FFMAs (16 bytes of SASS each), stays within the
# SM's instruction cache: tilings of 4096 (64 KB of FFMAs a k-tile) ran 1.4-1.6x slower than the same thread tile at
# half the block_k in level-2 tunes on an H100 (128x128 blocks, thread tile 8x16: [2048, 512] x [512, 4096] 246-314
# against 218 µs, [4096, 2048] x [2048, 4096] 2399-2513 against 1555 µs); 2048 ran fastest in both.
FFMA_UNROLLED_MAX = 2048


@dataclass(frozen=True)
class LoaderPlan:
    """How one input operand's tiles reach shared memory."""

    operand: str  # "A" or "B"
    kind: str  # "cp_async", "gather", "transpose" or "gather_direct" (see the loader kinds above)
    vector_elems: int  # elements per copy or load (1 for gather)
    smem_inner: str  # role contiguous in shared memory: "k", or "m" for A / "n" for B
    # The pointer alignment (bytes) this loader needs beyond what the spec promises; 0 if none.
    # When non-zero the launcher checks the pointer and otherwise takes `fallback`.
    runtime_align: int
    fallback: LoaderPlan | None
    reason: str
    promised_align: int  # the alignment (bytes) the spec promises for the operand's view


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
    min_blocks_per_sm: int  # __launch_bounds__'s second argument: caps registers (register_cap)
    stages: int
    transpose_depth: int  # FFMA: k-tiles a transposing loader holds in registers (TRANSPOSE_DEPTHS; 1 for MMA)
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

    arch_features = frozenset()  # mma.sync / FFMA, ldmatrix and cp.async: every arch in the table

    @property
    def register_cap(self) -> int:
        """Registers a thread may use under __launch_bounds__(threads, min_blocks_per_sm)."""
        return min(FULL_REGISTER_FILE, REGISTERS_PER_SM // (self.threads * self.min_blocks_per_sm))

    @property
    def frag_m(self) -> int:
        """FFMA: consecutive rows of a thread's tile, read from shared memory as one vector (1 for MMA)."""
        return fragment_vector(self.thread_m)

    @property
    def frag_n(self) -> int:
        return fragment_vector(self.thread_n)

    @property
    def runtime_dispatch(self) -> bool:
        return bool(self.a.runtime_align or self.b.runtime_align)

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing beyond the spec's promise: a loader that wants wider vectors checks its pointer at run time and
        falls back to its own narrower loads (runtime_dispatch), so no other kernel goes beside it."""
        return {}

    @property
    def summary(self) -> str:
        def loader(ld: LoaderPlan) -> str:
            return f"{ld.kind}{ld.vector_elems if ld.kind in ('cp_async', 'transpose') else ''}"
        thread_tile = "" if self.instruction == MMA else f"thread tile {self.thread_m}x{self.thread_n}, "
        return (f"{self.instruction}, tile {self.block_m}x{self.block_n}x{self.block_k}, {thread_tile}"
                f"{self.threads} threads, {self.stages} stages, A {loader(self.a)}, B {loader(self.b)}, "
                f"{'2 k-tiles of transposes in registers, ' if self.transpose_depth > 1 else ''}"
                f"{self.smem_bytes} B smem, {self.tiles} blocks")

    def detail_lines(self) -> list[str]:
        """The plan's facts below its decisions, as `explain` prints them and the .cu's header comment states them:
        the grid, the FFMA thread tile, each loader and its run-time dispatch."""
        out = [f"=> {self.threads} threads, {self.smem_bytes} B shared memory, grid {self.tiles} blocks "
               f"({self.tiles // (self.tiles_m * self.tiles_n)} x {self.tiles_m} x {self.tiles_n}), "
               f"index type {self.index_type}"]
        if self.instruction == FFMA:
            out.append(f"thread tile {self.thread_m}x{self.thread_n}: rows in groups of {self.frag_m} (one "
                       f"{4 * self.frag_m}-byte shared load of A a k step), columns in groups of {self.frag_n} "
                       f"({4 * self.frag_n}-byte loads of B); at most {self.register_cap} registers a thread, "
                       f"{self.min_blocks_per_sm} block(s) an SM by registers")

        def loader(ld: LoaderPlan) -> str:
            return ld.kind + (f" x{ld.vector_elems}" if ld.kind in ("cp_async", "transpose") else "")
        for ld in (self.a, self.b):
            line = f"{ld.operand}: {loader(ld)}, shared rows along {ld.smem_inner}"
            if ld.kind == "transpose":
                line += " (loaded along k, stored transposed)"
            if ld.runtime_align and ld.fallback:
                line += (f"; run-time loader dispatch: a {ld.runtime_align}-byte aligned view takes it (the spec "
                         f"promises {ld.promised_align}), else {loader(ld.fallback)}")
            out.append(line)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "decisions": [x.to_dict() for x in self.decisions]}


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
        g.node("thread_m", (1, 2, 4, 8, 16), "outputs per thread along M")
        g.node("thread_n", (1, 2, 4, 8, 16), "outputs per thread along N")
    g.node("stages", dom["stages"], "shared-memory pipeline depth")
    g.node("smem_inner_a", ("k", "m"), "which role of A is contiguous in shared memory")
    g.node("smem_inner_b", ("k", "n"), "which role of B is contiguous in shared memory")
    # The FFMA loop's [k][m] / [k][n] tiles can also be filled from a view contiguous along k: vector
    # loads along k, stored transposed (the mma loop reads either orientation through ldmatrix).
    loaders = ("cp_async", "gather") if mma else ("cp_async", "transpose", "gather")
    g.node("loader_a", loaders, "how A tiles reach shared memory")
    g.node("loader_b", loaders, "how B tiles reach shared memory")
    if not mma:
        g.node("registers", (REGISTER_CAP, FULL_REGISTER_FILE),
               f"registers a thread may use (__launch_bounds__): {REGISTER_CAP} lets more blocks share an SM's "
               f"{REGISTERS_PER_SM}, {FULL_REGISTER_FILE} holds thread tiles of up to "
               f"{FFMA_MAX_ACCUM[FULL_REGISTER_FILE]} accumulators")
        g.node("transpose_depth", TRANSPOSE_DEPTHS,
               "k-tiles a transposing loader holds in registers at once (2: its loads land under two k-tiles of "
               "math, in two register sets and three stages)", default=1)

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
        g.constrain("unrolled k-tile", "arch", ["block_k", *split],
                    lambda a: None if a["thread_m"] * a["thread_n"] * a["block_k"] <= FFMA_UNROLLED_MAX
                    else (f"{a['thread_m'] * a['thread_n'] * a['block_k']} FFMAs a k-tile unrolled "
                          f"(> {FFMA_UNROLLED_MAX}: the loop outgrows the instruction cache)"),
                    "the FFMA loop unrolls a whole k-tile: its code must stay in the SM's instruction cache")
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
        most = MAX_ACCUM_PER_THREAD if mma else FFMA_MAX_ACCUM[a["registers"]]
        return None if acc <= most else f"{acc} f32 accumulators per thread (> {most})"
    g.constrain("register budget", "arch", ["block_m", "block_n", *split] + ([] if mma else ["registers"]), accum_ok,
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

        def staging_regs(a: Assignment, op: str = op, loader: str = loader, kind: str = "gather") -> str | None:
            if a[loader] != kind:
                return None
            per_thread = staged_per_thread(a, op, instruction)
            return (None if per_thread <= MAX_GATHER_PER_THREAD
                    else f"{per_thread} staged elements per thread (> {MAX_GATHER_PER_THREAD})")
        g.constrain(f"gather staging {facts.name}", "arch", [loader, "block_m", "block_n", "block_k", *split],
                    staging_regs, "a gather stages the next k-tile in registers while the current one computes")
        if mma:
            continue

        def transpose_ok(a: Assignment, facts: OperandFacts = facts, loader: str = loader) -> str | None:
            if a[loader] == "transpose" and facts.unit_role != "k":
                along = f"along {facts.unit_role}" if facts.unit_role else "along no dim"
                return f"{facts.name} is contiguous {along}, not k: there is no run along k to load"
            return None
        g.constrain(f"transpose {facts.name}", "view", [loader], transpose_ok,
                    "vector loads along the stride-1 k dim, stored transposed into the [k][m] / [k][n] tile")
        g.constrain(f"transpose staging {facts.name}", "arch",
                    [loader, "block_m", "block_n", "block_k", *split, "transpose_depth"],
                    lambda a, op=op, loader=loader: staging_regs(a, op, loader, "transpose"),
                    "a transposing loader stages the next k-tile in registers while the current one computes")

    def staged(a: Assignment) -> int:
        return staged_per_thread(a, "a", instruction) + staged_per_thread(a, "b", instruction)

    if mma:
        def live_regs(a: Assignment) -> str | None:
            live = a["block_m"] * a["block_n"] // block_threads(a, instruction) + staged(a)
            return (None if live <= MAX_LIVE_PER_THREAD
                    else f"{live} values live across the math (> {MAX_LIVE_PER_THREAD})")
        g.constrain("live registers", "arch", ["loader_a", "loader_b", "block_m", "block_n", "block_k", *split],
                    live_regs, "accumulators plus register-staged gathers must leave room for fragments and addresses")
    else:
        promised = {"a": a_facts.vector_elems, "b": b_facts.vector_elems}

        def loads_under_cap(a: Assignment) -> str | None:
            if a["registers"] != REGISTER_CAP:
                return None
            loads = 0
            for x in "ab":  # a transpose loads vectors (at the promised width in its fallback), a gather elements
                width = promised[x] if a[f"loader_{x}"] == "transpose" else 1
                loads += math.ceil(staged_per_thread(a, x, instruction) / width)
            return (None if loads <= MAX_STAGED_LOADS_UNDER_CAP
                    else f"{loads} register-staged loads a thread (> {MAX_STAGED_LOADS_UNDER_CAP} under the cap)")
        g.constrain("staged loads under the cap", "arch",
                    ["loader_a", "loader_b", "block_m", "block_n", "block_k", *split, "registers", "transpose_depth"],
                    loads_under_cap,
                    "each load in flight holds its address; counted at the width the spec promises (the run-time "
                    "fallback's)")

        def live_ffma(a: Assignment) -> str | None:
            live = a["block_m"] * a["block_n"] // block_threads(a, instruction) + a["thread_m"] + a["thread_n"]
            live += staged(a)
            most = FFMA_MAX_LIVE[a["registers"]]
            return (None if live <= most else
                    f"{live} accumulators, staged elements and k-step values (> {most} in {a['registers']} registers)")
        g.constrain("live registers", "arch",
                    ["loader_a", "loader_b", "block_m", "block_n", "block_k", *split, "registers", "transpose_depth"],
                    live_ffma,
                    "what a thread keeps across a k step must fit its registers with its addresses (no spills)")

    def pipeline_depth(a: Assignment) -> str | None:
        kinds = {a["loader_a"], a["loader_b"]}
        depth = a.get("transpose_depth", 1)
        if depth > 1 and "transpose" not in kinds:
            return "no transposing loader to hold two k-tiles"
        if depth > 1 and a["stages"] < 3:
            return "two k-tiles in registers need a third stage (a set is stored one k-tile after its issue)"
        if kinds <= set(STAGED) and a["stages"] != depth + 1:
            if depth > 1:
                return "transposes holding two k-tiles in registers overlap exactly two: 3 stages"
            what = "gathers" if kinds == {"gather"} else "loads"
            return f"register-staged {what} overlap exactly one k-tile: 2 stages"
        return None
    g.constrain("pipeline depth", "problem",
                ["loader_a", "loader_b", "stages", *([] if mma else ["transpose_depth"])], pipeline_depth)
    if not mma:
        def second_set_pays(a: Assignment) -> str | None:
            k_tiles = math.ceil(views.k / a["block_k"])
            if a.get("transpose_depth", 1) > 1 and k_tiles <= a["stages"]:
                return (f"K = {views.k} is {k_tiles} k-tile(s) of {a['block_k']}: the prologue holds them all, none "
                        f"is issued into a second register set")
            return None
        g.constrain("second register set", "problem", ["block_k", "stages", "transpose_depth"], second_set_pays,
                    "two k-tiles of transposes in registers pay only where the loop issues more than the prologue")
    if not mma:
        g.constrain("gathers keep the register file", "arch", ["loader_a", "loader_b", "registers"],
                    lambda a: f"register-staged gathers spill under the {REGISTER_CAP}-register cap"
                    if a["registers"] == REGISTER_CAP
                    and "gather" in (a["loader_a"], a["loader_b"]) else None)
    return g


def loader_plan(facts: OperandFacts, kind: str, inner: str, reason: str) -> LoaderPlan:
    align = facts.align
    if kind == "gather":
        return LoaderPlan(facts.name, "gather", 1, inner, 0, None, reason, align)
    if kind == "transpose":
        vec, promised = facts.vector_elems_aligned, facts.vector_elems
        if vec <= promised:
            return LoaderPlan(facts.name, "transpose", vec, inner, 0, None, reason, align)
        # The vector load needs more alignment than promised: the launcher checks the pointer and
        # otherwise loads the promised width (single elements at least; same registers, same cap).
        fallback = LoaderPlan(facts.name, "transpose", promised, inner, 0, None,
                              f"pointer not {vec * facts.elem_bytes}-byte aligned at run time", align)
        return LoaderPlan(facts.name, "transpose", vec, inner, vec * facts.elem_bytes, fallback, reason, align)
    vec, promised = copy_elems(facts, inner, aligned=True), copy_elems(facts, inner, aligned=False)
    if vec <= promised:
        return LoaderPlan(facts.name, "cp_async", vec, inner, 0, None, reason, align)
    # The wide copy needs more alignment than the spec promises: the launcher checks the pointer
    # at run time and otherwise takes the widest copy the promise allows (or a gather).
    why = f"pointer not {vec * facts.elem_bytes}-byte aligned at run time"
    if promised * facts.elem_bytes >= 4:
        fallback = LoaderPlan(facts.name, "cp_async", promised, inner, 0, None, why, align)
    else:  # fallback only: loads and stores at once, so the cp.async plan's register budget holds
        fallback = LoaderPlan(facts.name, "gather_direct", 1, inner, 0, None, why, align)
    return LoaderPlan(facts.name, "cp_async", vec, inner, vec * facts.elem_bytes, fallback, reason, align)


def _min_blocks(a: Assignment, instruction: str) -> int:
    """__launch_bounds__'s blocks an SM: the FFMA plan's `registers` decision; for mma.sync the
    128-register cap unless a gather needs the whole file."""
    if instruction == FFMA:
        return max(1, REGISTERS_PER_SM // (block_threads(a, instruction) * a["registers"]))
    if "gather" in (a["loader_a"], a["loader_b"]):
        return 1
    return max(1, REGISTERS_PER_SM // (block_threads(a, instruction) * REGISTER_CAP))


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
        raise grid_too_large(views, tiles, "blocks")
    dec = {d.node: d for d in decisions}
    loaders = {x: loader_plan(views.operands[x], a[f"loader_{x.lower()}"], a[f"smem_inner_{x.lower()}"],
                          dec[f"loader_{x.lower()}"].summary()) for x in ("A", "B")}
    mma = instruction == MMA
    return TilePlan(
        instruction=instruction, block_m=bm, block_n=bn, block_k=a["block_k"],
        warps_m=a["warps_m"] if mma else 1, warps_n=a["warps_n"] if mma else 1,
        thread_m=1 if mma else a["thread_m"], thread_n=1 if mma else a["thread_n"],
        threads=block_threads(a, instruction), min_blocks_per_sm=_min_blocks(a, instruction), stages=a["stages"],
        transpose_depth=1 if mma else a["transpose_depth"],
        smem_bytes=tile_smem_bytes(a, views.operands["A"].elem_bytes),
        a=loaders["A"], b=loaders["B"], elem_bytes=views.operands["A"].elem_bytes,
        index_type="long long" if views.needs_int64 else "int",
        tiles_m=tiles_m, tiles_n=tiles_n, tiles=tiles,
        decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a),
    )


def as_fallback(plan: TilePlan) -> TilePlan:
    """The plan as a run-time fallback: the whole register file (min blocks 1). It runs only for pointers that fail
    the primary's check; under the 128-register cap three such kernels spilled."""
    return replace(plan, min_blocks_per_sm=1, runtime_fallback=True)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (TilePlan,), "dgemm_cli.families.cta.render",
                      formal="dgemm_cli.families.cta.index", as_fallback=as_fallback)
