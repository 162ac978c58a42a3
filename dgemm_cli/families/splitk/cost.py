"""The `splitk` family's cost model (pure): a tiling's estimate (µs, only to rank candidates against each other and
the other families), with the shared memory and residency it reads. Its fitted constants (families/ksplit.py, shared
with the dot family) come from the measurements in families/calibration.csv (tools/fit_calibration.py)."""

from __future__ import annotations

import math

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment
from dgemm_cli.families import cta
from dgemm_cli.families.ksplit import GROUPS_US, LAUNCH_US, MEMORY_LATENCY_US, WARPS_TO_HIDE_LATENCY
from dgemm_cli.views import ProblemViews

RED_PAD = 4  # floats of padding per row of the partial tile in shared memory
# Cost model constants (µs), only to rank candidates and families; the launch, DRAM and groups constants it shares
# with the dot family (families/ksplit.py, where they are fitted). Set a priori, checked against level-1 tunes of
# the decode benchmarks on the H200.
REDUCE_US = 0.4  # cluster barriers and the DSMEM sum of one tile
ISSUE_CLOCKS = 8  # clocks a thread spends issuing one 16-byte copy (address math included)


def red_pitch(block_n: int) -> int:
    return block_n + RED_PAD


def smem_bytes(a: Assignment, elem: int) -> int:
    pipeline = cta.tile_smem_bytes(a, elem)
    return max(pipeline, a["block_m"] * red_pitch(a["block_n"]) * 4)


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
