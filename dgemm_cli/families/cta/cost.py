"""The `cta` family's cost model (pure): estimated µs of a tiling, only to rank candidates against each other and the
other families; the FFMA main loop priced by issue slots and the shared-memory data path. Its fitted constants come
from the measurements in families/calibration.csv (tools/fit_calibration.py)."""

from __future__ import annotations

import functools
import math

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment
from dgemm_cli.families.cta.tile import (
    FFMA,
    FULL_REGISTER_FILE,
    MMA,
    REGISTERS_PER_SM,
    SMEM_PAD_BYTES,
    block_threads,
    copy_elems,
    fragment_vector,
    staged_depth,
    tile_smem_bytes,
)
from dgemm_cli.views import OperandFacts, ProblemViews

# Fixed cost of a launch in the cost model (µs), fitted to tunes on the H200: without it the model picks this
# family on memory-bound mid-size problems where hopper is faster.
LAUNCH_US = 2.5
K_TILE_LATENCY_US = 0.8  # a k-tile's loads, issued to landed, that the pipeline must cover
# mma.sync tilings on an arch with wgmma: what the estimate's math and stream terms are multiplied by. Against the
# hopper family's picks timed in the same runs (families/calibration.csv, level-1 tunes of the perf suite's problems on
# an H100), cta's time past its launch runs 1.57-1.81x further over its estimate than hopper's on problems over 20 µs,
# in its math (130 TFLOP/s at [4096, 6144] x [6144, 576]) and in its cp.async stream (57% of DRAM at 64 rows against
# hopper's 87%); on 5-10 µs problems, where both families pay fixed costs the models lack, 1.0-1.2x. Unscaled, the
# model handed cta memory-bound problems it prices 1-3% under hopper (MoE experts, attention, decode at 64 rows),
# where it runs 0.8-0.94x cuBLAS.
MMA_ON_WGMMA_ARCH_SCALE = 1.6

# The FFMA main loop's cost (cost model only, set a priori from the SM's structure; deepgemm tune measures).
SCHEDULERS_PER_SM = 4  # warp schedulers, each issuing one instruction a clock: FFMA or anything else
DATA_PATH_BYTES_PER_CLK = 128  # an SM's L1 / shared-memory data path, shared by LDS, STS and global sectors
SECTOR_BYTES = 32
COPY_SLOTS = 6  # issue slots of one global load or cp.async: index math, predicate, the instruction
LOOP_SLOTS = 24  # issue slots of one k-tile's bookkeeping: wait, barrier, commit, stage pointers, loop
# Clocks a block's warps idle at each k-tile's barrier until the first shared loads return; other
# resident blocks' warps fill them.
SYNC_CLOCKS = 100


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
    scale = MMA_ON_WGMMA_ARCH_SCALE if instruction == MMA and arch.wgmma_flops_per_sm_clk else 1.0

    def cost(a: Assignment) -> float:
        bm, bn, bk = a["block_m"], a["block_n"], a["block_k"]
        threads = block_threads(a, instruction)
        tiles = batch * math.ceil(m / bm) * math.ceil(n / bn)
        k_tiles = math.ceil(k / bk)
        limit = min(arch.smem_per_sm // tile_smem_bytes(a, elem), arch.max_threads_per_sm // threads,
                    arch.max_blocks_per_sm)
        tiles_per_sm = math.ceil(tiles / arch.sms)
        if instruction == FFMA:
            def resident_with(registers: int) -> int:
                return max(1, min(limit, REGISTERS_PER_SM // (threads * registers), tiles_per_sm))
            resident = resident_with(a["registers"])
            # A cap that does not raise the blocks an SM holds only risks spills.
            cap_buys_nothing = a["registers"] < FULL_REGISTER_FILE and resident == resident_with(FULL_REGISTER_FILE)
        else:
            resident = max(1, min(limit, tiles_per_sm))
        busy_sms = min(tiles, arch.sms)
        # Warps in flight hide latency; fewer than ~8 per SM leave the math units idle.
        occupancy = min(1.0, resident * threads / 32 / 8)
        gathers = sum(a[f"loader_{x}"] == "gather" for x in "ab")
        if instruction == MMA:
            wm, wn = bm // a["warps_m"], bn // a["warps_n"]
            mmas, loads = (wm // 16) * (wn // 8), wm // 16 + wn // 16  # per k16 step of one warp
            issue = mmas / (mmas + loads)
            math_us = tiles_per_sm * bm * bn * k_tiles * bk * 2 / (rate * issue * occupancy)
            latency_us = tiles_per_sm * k_tiles * K_TILE_LATENCY_US * (1 + gathers) / ((a["stages"] - 1) * resident)
        else:
            # The SM runs its tiles' k-tiles one after another at the rate issue or the data path allows,
            # and each k-tile's barrier idles the block (hidden by the other resident blocks' warps).
            math_us = tiles_per_sm * k_tiles * ffma_k_tile_clocks(views, a) / (clk * occupancy)
            math_us += math.ceil(tiles_per_sm / resident) * k_tiles * SYNC_CLOCKS / (resident * clk)
            # A cp.async k-tile is issued STAGES - 1 k-tiles ahead, a register-staged one as many as it holds sets.
            depth = [staged_depth(a, x) or a["stages"] - 1 for x in "ab"]
            latency_us = (tiles_per_sm * k_tiles * K_TILE_LATENCY_US * (1 + gathers) / resident
                          * sum(1 / d for d in depth) / len(depth))
            math_us *= 1.01 if cap_buys_nothing else 1.0
        # Half the re-reads hit L2, but every input byte comes from DRAM once (the floor binds for
        # small-M products, where each B byte is read by one tile).
        streamed = max(tiles * (bm + bn) * k_tiles * bk * elem * 0.5, ab_bytes) + c_bytes
        mem_us = streamed / (arch.dram_gbps * 1e3 * min(1.0, busy_sms / (arch.sms / 2)))
        # The small latency term breaks ties towards deeper pipelines and fewer k-tiles. LAUNCH_US is
        # what every launch pays before the first tile's data arrives and after its last store; it
        # only matters against the other families (docs/design/cta.md, "Cost": calibrated on measured tunes).
        return max(scale * math_us, scale * mem_us, latency_us) + 0.05 * latency_us + LAUNCH_US

    return cost


def ffma_k_tile_clocks(views: ProblemViews, a: Assignment) -> float:
    """Clocks one block's k-tile of FFMA work occupies an SM: the larger of issue (FFMAs, shared loads,
    the loaders' instructions and the loop's bookkeeping, one instruction a clock per scheduler) and the
    L1 / shared-memory data path (fragment loads, the loaders' global sectors and shared stores)."""
    return _k_tile_clocks(views.operands["A"], views.operands["B"], a["block_m"], a["block_n"], a["block_k"],
                          a["thread_m"], a["thread_n"], block_threads(a, FFMA), a["loader_a"], a["loader_b"],
                          a["smem_inner_a"], a["smem_inner_b"])


# Pure in its arguments: the planner's search prices the same k-tile under every stage count, split and register
# cap (a run-time f32 spec asks for it half a million times, for a few thousand distinct tiles).
@functools.lru_cache(maxsize=1 << 16)
def _k_tile_clocks(facts_a: OperandFacts, facts_b: OperandFacts, bm: int, bn: int, bk: int, tm: int, tn: int,
                   threads: int, loader_a: str, loader_b: str, inner_a: str, inner_b: str) -> float:
    warps = threads // 32
    vm, vn = fragment_vector(tm), fragment_vector(tn)
    slots = bk * (tm * tn + tm // vm + tn // vn) + LOOP_SLOTS
    # A warp spans lanes_n threads along n and lanes_m along m: its A loads of a k step touch lanes_m
    # distinct vectors (the rest broadcast), its B loads lanes_n; 128 distinct bytes a wavefront.
    lanes_n = min(bn // tn, 32)
    lanes_m = max(1, 32 // lanes_n)
    wavefronts = (tm // vm) * math.ceil(lanes_m * vm * 4 / DATA_PATH_BYTES_PER_CLK) \
        + (tn // vn) * math.ceil(lanes_n * vn * 4 / DATA_PATH_BYTES_PER_CLK)
    data_clocks = warps * bk * wavefronts
    for facts, loader, inner, extent in ((facts_a, loader_a, inner_a, bm), (facts_b, loader_b, inner_b, bn)):
        loader_slots, loader_clocks = _loader_work(facts, loader, inner, extent, bk, threads)
        slots += loader_slots
        data_clocks += loader_clocks
    # The small data-path term breaks ties towards fewer wavefronts: they queue, and the fragments a
    # warp waits for arrive later.
    return max(warps * slots / SCHEDULERS_PER_SM, data_clocks) + 0.05 * data_clocks


def _loader_work(facts: OperandFacts, kind: str, inner: str, extent: int, bk: int,
                 threads: int) -> tuple[float, float]:
    """One k-tile of one input (FFMA cost model): issue slots a thread spends on it, and clocks of the
    block's L1 / shared data path it takes (global sectors read, shared words written)."""
    elems = extent * bk
    per_thread = math.ceil(elems / threads)
    if kind == "cp_async":
        vec, coalesced, store_ways = copy_elems(facts, inner, aligned=True), inner == facts.unit_role, 1
        slots = math.ceil(per_thread / vec) * COPY_SLOTS
    elif kind == "transpose":
        vec, coalesced = facts.vector_elems_aligned, True
        store_ways = transposed_store_ways(extent, bk, vec, extent + SMEM_PAD_BYTES // facts.elem_bytes)
        slots = math.ceil(per_thread / vec) * COPY_SLOTS + per_thread  # + one shared store an element
    else:  # gather: element loads, then element stores
        coalesced, store_ways = inner == facts.unit_role, 1
        slots = per_thread * (COPY_SLOTS + 1)
    # A warp walking the stride-1 dim uses whole sectors; across it, every element costs a sector.
    sectors = elems * facts.elem_bytes / SECTOR_BYTES if coalesced else elems
    data_bytes = sectors * SECTOR_BYTES + elems * facts.elem_bytes * store_ways
    return slots, data_bytes / DATA_PATH_BYTES_PER_CLK


@functools.cache  # pure in its four ints; the FFMA cost model asks for the same few tilings many times
def transposed_store_ways(extent: int, bk: int, vec: int, pitch: int) -> int:
    """Bank conflicts (ways) of a transposing loader's shared stores: lane l of a warp loads chunk l of
    the tile (chunks of `vec` along k, a row's BK / vec chunks consecutive) and stores element j of it at
    [k][row], a row of `pitch` words."""
    chunks_per_row = bk // vec
    worst = 1
    for j in range(vec):
        words: dict[int, set[int]] = {}
        for lane in range(min(32, extent * chunks_per_row)):
            row, chunk = divmod(lane, chunks_per_row)
            word = (chunk * vec + j) * pitch + row
            words.setdefault(word % 32, set()).add(word)
        worst = max(worst, *(len(w) for w in words.values()))
    return worst
