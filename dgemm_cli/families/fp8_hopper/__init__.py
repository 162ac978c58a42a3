"""Kernel family `fp8_hopper`: e4m3 A and B with f32 scales on the tensor cores (sm_90a) (pure).

The kernel (dg/fp8_hopper.cuh) is the hopper family's persistent kernel with e4m3 wgmma (m64nNk32): the same
producer warpgroup streaming TMA boxes of A and B into 128B-swizzled stages, the same tile walk and store phase. A
stage is one 128-byte row of k, 128 e4m3 values. 8-bit wgmma reads both operands K-major from shared memory, so both
views must be k-contiguous; the gates refuse the others (a producer that stages them transposed is not written yet).

Promotion: the tensor core's FP8 accumulation keeps fewer mantissa bits than f32, so each consumer sums one
k-iteration (128 k) on the tensor core into accumulators of its own, then adds them into f32 accumulators on the
CUDA cores, times that k-iteration's scales (scales.py). Two accumulator sets a consumer: the register budget is the
tiling graph's "promotion registers" constraint.

The planning is the hopper family's (graph, cost, tensor maps, store phase) with the variants this kernel has: the
persistent grid, or the K split over a cluster where the tiles leave SMs idle (decode shapes: each block promotes a
slice of the k-iterations, and the cluster sums the partial tiles as the hopper family's split kernel does), no A
multicast, one tiled segment a role. The store phase vectorizes only as far as the spec promises: an FP8
kernel has no fallback for a misaligned pointer (the cta family runs no e4m3), so the plan needs no run-time check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.fp8_hopper.scales import ScaleLoad, k_block_refusal, scale_load
from dgemm_cli.families.hopper import (
    BLOCK_N,
    L2_SHARE_MULTI_WAVE,
    PACK_MIN_VEC,
    HopperPlan,
    build_tiling_graph,
    consumer_regs,
    cost_model,
    epilogue_vectors,
    make_plan,
    problem_k_iters,
    tile_grid,
    tma_operand,
)
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.spec import DTYPE_BYTES
from dgemm_cli.views import ProblemViews

NAME = "fp8_hopper"
SUMMARY = ("TMA + e4m3 wgmma, promotion to f32 every 128 k with the scales, warp-specialized, persistent grid "
           "(sm_90a, e4m3)")
RUNTIME_ROWS = False  # e4m3 specs size every letter at generation (spec/parse.py)
ALIGN = 16  # bytes TMA needs of A's and B's first elements
# Clocks a promotion holds a consumer warpgroup off the tensor core each k-iteration: the wait for its wgmmas to
# drain, then one FFMA an accumulator. With two consumers the other's wgmmas run meanwhile and hide most of it
# (PROMOTION_HIDDEN). Estimates from the instruction counts, not yet fitted to measurements.
PROMOTION_WAIT_CLK = 120
PROMOTION_HIDDEN = 0.75
# What a consumer thread holds through the main loop (dg/fp8_hopper.cuh): the promoted f32 accumulators and the
# tensor core's two sets, two sets of the scales that vary along k (one a set in flight) and, where B has a scale a
# column, the factors of the promotion (a row's scale times a column's, one a pair). Beside them the descriptors,
# addresses and loop state. With two consumers (232 registers each) ptxas (CUDA 13.0) fits 128 x 128 tiles with A's
# row scales (198 held) without spills; 256 x 64 ones (202 held) fit on [4096, 7168] x [7168, 2112] and spill (20
# bytes of stores, 28 of loads) on [4096, 7168] x [7168, 4096]; 128 x 128 ones with B's column scales (260 held)
# spill 2 KB a thread. 30 registers of overhead keep the first two and refuse the third.
ACC_SETS = 3
# Blocks of a cluster sharing one tile (the split kernel): up to 4, under the hopper graph's one-wave and
# shared-memory rules, and clusters of 4 in at most FOUR_BLOCK_CLUSTERS_MAX_BLOCKS blocks: on the H100 (one block an
# SM) 120 blocks of them ran in one wave (16 random FP8 problems of 1..30 tiles split 4 ways ran 1.44x faster than
# unsplit, docs/RESULTS.md) and 128 or 132 did not (1.4-1.8x slower than clusters of 2: the GPCs do not hold 32 of
# them at once).
K_SPLITS = (1, 2, 4)
FOUR_BLOCK_CLUSTERS_MAX_BLOCKS = 120
# A split only where even 64 x 64 tiles would fill at most a quarter of the SMs (33 on 132). On the H100 the split
# ran faster wherever that held (fp8_64x2112x7168: 33 such tiles, 13.4 -> 10.0 us split 2 ways; 16 random problems
# of up to 30 tiles split 4 ways, 1.44x) and slower where an unsplit tiling already had as many blocks
# (fp8_128x7168x16384, fp8_64x7168x16384: 128 x 128 tiles split 2 ways, 112 blocks, 5% and 11% slower than
# 128 x 64 tiles unsplit); between (fp8_128x4096x7168: 128 64 x 64 tiles, 18.3 -> 15.7 us split 2 ways over 128 x 64
# tiles) the cost model does not yet tell the two apart, and the unsplit kernel stays.
SPLIT_MAX_SMALL_TILES_PER_SM = 0.25
SCALE_SETS = 2
PROMOTION_OVERHEAD_REGS = 30


@dataclass(frozen=True)
class Fp8HopperPlan(HopperPlan):
    family = NAME
    scales: tuple[ScaleLoad, ...] = ()  # A's, then B's

    @property
    def promotion_k(self) -> int:
        """k summed on the tensor core between promotions: one k-iteration."""
        return self.block_k

    @property
    def summary(self) -> str:
        return (f"e4m3 wgmma m64n{self.block_n}k32, promotion to f32 every {self.promotion_k} k, tile "
                f"{self.block_m}x{self.block_n}x{self.block_k}, {self.consumers} consumer warpgroup(s) + 1 producer, "
                f"{self.ctas_per_sm} block(s) an SM, {self.stages} TMA stages, L2 promotion {self.l2_promotion}, "
                f"A and B K-major, {self.smem_bytes} B smem, {self.tiles} tiles on {self.grid_desc}, raster group "
                f"{self.raster_group}")

    def detail_lines(self) -> list[str]:
        tile = {"m": self.block_m, "n": self.block_n}
        out = super().detail_lines()
        out.insert(1, f"promotion: every {self.promotion_k} k (one k-iteration) each consumer adds the tensor core's "
                      "accumulators into f32 registers, times that k-iteration's scales; scales constant along k "
                      "multiply the f32 accumulators once a tile")
        for i, s in enumerate(self.scales):
            out.insert(2 + i, s.describe(tile[s.role]))
        out.extend(f"note: {hint}" for s in self.scales if (hint := s.layout_hint(tile[s.role])))
        return out


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    """(constraint, reason) for everything that rules the family out of this problem; [] if none."""
    out = []
    if arch.cc < (8, 9):
        out.append(("wgmma", f"{arch.name} has no FP8 tensor cores: e4m3 inputs need sm_89 or later (this family: "
                             "sm_90a)"))
    elif not arch.wgmma_flops_per_sm_clk:
        out.append(("wgmma", f"{arch.name} has no wgmma (sm_90a only); fp8_cta runs e4m3 there (mma.sync "
                             "m16n8k32)"))
    spec = views.spec
    if spec.A.dtype != "e4m3":
        out.append(("e4m3 inputs", f"A and B are {spec.A.dtype}: this family runs e4m3 inputs with scales"))
        return out
    several = [r for r in ("batch", "m", "n", "k") if len(views.roles[r].segments) > (0 if r == "batch" else 1)]
    if several:
        out.append(("one segment a role", "the FP8 kernel walks one tiled segment of m, n and k and no batch; "
                                          f"this problem has more in {', '.join(several)}"))
    for name in ("A", "B"):
        got = tma_operand(views, name, 128)
        if isinstance(got, str):
            out.append((f"TMA {name}", got))
        elif got.major != "k":
            out.append((f"K-major {name}", f"{name} is {'m' if name == 'A' else 'n'}-contiguous: 8-bit wgmma reads "
                                           "both operands K-major, and this family's TMA producer stages it as it "
                                           "lies (fp8_cta gathers it K-major)"))
        elif got.runtime_align:
            out.append((f"aligned {name}", f"the spec promises {name} {spec.operand(name).align}-byte alignment: TMA "
                                           f"needs {ALIGN} (fp8_cta runs the view as promised); promise "
                                           f"`align: {ALIGN}` for this family (cudaMalloc's pointers are 256-byte "
                                           "aligned)"))
    for sc in spec.scales:
        why = k_block_refusal(views, sc)
        if why:
            out.append(("scale k blocks", why))
    return out


def _graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    """The hopper family's graph with this kernel's variants and its second accumulator set."""
    g = build_tiling_graph(views, arch, K_SPLITS)
    loads = {s.operand: s for s in (scale_load(views, sc) for sc in views.spec.scales)}
    g.constrain("FP8 kernel", "instruction", ["a_multicast", "acc_chains"],
                lambda a: "the FP8 kernels have no A multicast and one tensor-core chain a set"
                if (a["a_multicast"], a["acc_chains"]) != (1, 1) else None,
                "dg/fp8_hopper.cuh has the persistent kernel and the K split, neither with A multicast")

    def promotion_regs(a: Assignment) -> str | None:
        wg_m = a["block_m"] // a["consumers"]
        acc = wg_m // 64 * a["block_n"] // 2
        tiles = {"A": a["block_m"], "B": a["block_n"]}
        # A set's scales of each view that varies along k (the kernel's ScaleOf<T, IsA>::COUNT).
        held = {x: s.held(tiles[x], wg_m) if s.along_k else 0 for x, s in loads.items()}
        scales = held.get("A", 0) + held.get("B", 0)
        # A scale a column of B: the promotion's factors (a row's scale times a column's) are one a pair.
        b = loads.get("B")
        columns = b is not None and b.along_k and not b.uniform(a["block_n"])
        products = held["B"] * max(held.get("A", 0), 1) if columns else 0
        room = consumer_regs(a["consumers"], a["ctas_per_sm"]) - PROMOTION_OVERHEAD_REGS
        need = ACC_SETS * acc + SCALE_SETS * scales + products
        return None if need <= room else (f"{acc} accumulators x {ACC_SETS} (the promoted f32 ones and the tensor "
                                          f"core's two sets) + {scales} scales x {SCALE_SETS}"
                                          + (f" + {products} factors" if products else "")
                                          + f" = {need} registers a consumer thread, {room} free")
    grid = tile_grid(views)

    groups, tiles_m, tiles_n, _ = grid(64, 64, 1)
    small_tiles = groups * tiles_m * tiles_n  # the most tiles any unsplit tiling has

    def fp8_split(a: Assignment) -> str | None:
        splits = a["k_splits"]
        if splits == 1:
            return None
        if small_tiles > SPLIT_MAX_SMALL_TILES_PER_SM * arch.sms:
            return (f"{small_tiles} tiles of 64 x 64: an FP8 split only where they would fill at most "
                    f"{SPLIT_MAX_SMALL_TILES_PER_SM:.0%} of the SMs (measured no faster where unsplit tiles fill "
                    "them)")
        groups, tiles_m, tiles_n, _ = grid(a["block_m"], a["block_n"], splits)
        tiles = groups * tiles_m * tiles_n
        if splits == 4 and tiles * 4 > FOUR_BLOCK_CLUSTERS_MAX_BLOCKS:
            return (f"{tiles * 4} blocks in clusters of 4: more than {FOUR_BLOCK_CLUSTERS_MAX_BLOCKS} do not all fit "
                    "at once (measured a second wave)")
        return None
    g.constrain("FP8 k split", "arch", ["block_m", "block_n", "k_splits"], fp8_split,
                f"a K split only over few tiles (64 x 64 ones filling at most {SPLIT_MAX_SMALL_TILES_PER_SM:.0%} of "
                f"the SMs), 4 ways only where its clusters fit at once (at most {FOUR_BLOCK_CLUSTERS_MAX_BLOCKS} "
                "blocks)")
    g.constrain("promotion registers", "arch", ["block_m", "block_n", "consumers", "ctas_per_sm"], promotion_regs,
                "a consumer holds the promoted f32 accumulators, the tensor core's two sets, two sets of its scales "
                "and the promotion's factors in registers")

    widths = {"A": [n.domain for n in g.nodes if n.name == "block_m"][0], "B": BLOCK_N}

    def one_scale_a_tile(a: Assignment) -> str | None:
        for s, tile in ((loads.get("A"), a["block_m"]), (loads.get("B"), a["block_n"])):
            if s is None or not s.along_k or s.mn_block < 64 or s.uniform(tile):
                continue
            if any(s.uniform(t) for t in widths[s.operand]):  # only where some tile width stays inside a block
                return (f"a tile {tile} wide straddles {s.name}'s blocks of {s.mn_block}: each thread would load a "
                        "scale a row or column every k-iteration instead of one a tile")
        return None
    g.constrain("scale blocks", "problem", ["block_m", "block_n"], one_scale_a_tile,
                "tiles inside one block of a blocked scale, which the consumers then load once a k-iteration")
    return g


def _fp8_plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
              cost_us: float) -> Fp8HopperPlan:
    base = make_plan(views, a, decisions, feasible, cost_us)
    out = views.spec.output
    elem = DTYPE_BYTES[out.dtype]
    vec = base.c_vec
    while vec > 1 and vec * elem > out.align:  # as promised: no fallback checks the pointer at run time
        vec //= 2
    notes = base.notes
    if vec < base.c_vec:
        notes += (f"{out.name}: {vec}-element stores, as the spec promises {out.align}-byte alignment (no FP8 fallback "
                  f"checks a pointer at run time); `align: {base.c_vec * elem}` on {out.name} would give "
                  f"{base.c_vec}-element vectors",)
    changes: dict[str, Any] = {
        "c_vec": vec, "c_runtime_align": 0, "notes": notes,
        "ep_vectors": tuple(x for x in epilogue_vectors(views, base.c_unit, vec) if not x[2]),
        "packed_store": base.packed_store and vec >= PACK_MIN_VEC,
    }
    values = {f.name: changes.get(f.name, getattr(base, f.name)) for f in fields(HopperPlan)}
    plan = Fp8HopperPlan(**values, scales=tuple(scale_load(views, sc) for sc in views.spec.scales))
    assert not plan.runtime_align, "the gates and the store's vectors leave nothing to check at run time"
    return plan


def _cost(views: ProblemViews, arch: Arch):
    """The hopper family's cost model, plus the promotions' time the tensor core waits for."""
    base = cost_model(views, arch, l2_share_one_wave=L2_SHARE_MULTI_WAVE)
    k_iters_all = problem_k_iters(views)
    grid = tile_grid(views)
    clk = arch.clock_ghz * 1e3

    def cost(a: Assignment) -> float:
        splits = a["k_splits"]
        groups, tiles_m, tiles_n, _ = grid(a["block_m"], a["block_n"], splits)
        # A K split makes `splits` blocks a tile, each promoting its slice of the k-iterations.
        blocks_per_sm = math.ceil(groups * tiles_m * tiles_n * splits / arch.sms)
        per_k = PROMOTION_WAIT_CLK + a["block_m"] // a["consumers"] // 64 * a["block_n"] // 2
        exposed = per_k * (1 - PROMOTION_HIDDEN if a["consumers"] == 2 else 1)
        return base(a) + blocks_per_sm * math.ceil(k_iters_all / splits) * exposed / clk
    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    return gated_problem(NAME, views, arch, gates, _graph, _cost, _fp8_plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (Fp8HopperPlan,),
                      "dgemm_cli.families.fp8_hopper.render", inputs="e4m3",
                      formal="dgemm_cli.families.fp8_hopper.index")
