"""The `hopper` family's cost model (pure): estimated µs of a tiling, only to rank candidates against each other and
the other families. Its fitted constants come from the measurements in families/calibration.csv
(tools/fit_calibration.py fits or checks them)."""

from __future__ import annotations

import math

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment
from dgemm_cli.families.hopper.views import (
    SWIZZLE_BYTES,
    SWIZZLE_ROWS,
    _round_up,
    _size,
    a_box_rows,
    a_rows_follow_m,
    block_k,
    problem_k_iters,
    tile_grid,
    tile_loops,
    weight_streams_once,
)
from dgemm_cli.views import ProblemViews

# wgmma's share of the tensor-core peak by tile width (shared-memory bytes per FLOP fall as N grows), set at the
# powers of two and interpolated between them (32: not measured, below 64 by 64's step below 128).
WGMMA_EFF = {32: 0.44, 64: 0.62, 128: 0.8, 256: 0.9}
# fitted: tools/fit_calibration.py, table families/calibration.csv
LAUNCH_US = 1.5  # fixed cost of a launch in the cost model (barrier setup, tensor-map prefetch, the last tile)
ACC_CHAINS_SPLIT_US = 0.1  # what the K-split kernel gains with two sets in the model (measured 0.05-0.4 µs)
# The rate A streams at from DRAM through a multicast cluster, at the model's scale. Fitted to one spec on the H200
# ([4096,4096]x[4096,44] f16, roles swapped), where the multicast kernel streams slower than the K split, for reasons
# not yet understood: priced so that the split stays ahead and `tune` can still measure the multicast plan.
MULTICAST_STREAM_GBPS = 3250
# And a fixed cost on top, fitted to three measured specs: the model's picks come out right on two of them (on
# 3 x [1024,512]x[512,36] with A shared it takes the unsplit plan, which measured 8% slower).
MULTICAST_FIXED_US = 2.0
# The K split's reduction and its cluster launch: two cluster barriers and the partial tile's round trip through
# shared memory, then its DSMEM reads at about 32 bytes a clock an SM. Priced at what the 64x64 split plan measured
# over its estimate on the H200, against gemv and tcgemv at 1..16 rows. Bounded above by the splitk family (its own
# reduce priced 0.4): a higher price hands GQA P.V over a KV cache to splitk, which measured slower there.
CLUSTER_REDUCE_US = 0.8
DSMEM_BYTES_PER_CLK = 32
# The round trip of a TMA load that misses L2 while DRAM is busy (half the SMs or more streaming). Where the weight
# streams from DRAM once (one tile row), an SM can read it no faster than `stages` boxes a round trip (Little's
# law), whatever DRAM's whole bandwidth; with fewer SMs streaming the trip shortens towards the idle 0.8 µs (a
# tile or two of a small weight). Not counted where A streams (one tile column): not measured there. Fitted on the
# H200 to the unsplit 64x64 plan on 64 of the 132 SMs at [17..64, 2048]x[2048, 4096] bf16, at the model's scale.
# At 8 stages this bound stays under the DRAM time wherever the tiles fill the GPU (64x64 split 2 at N = 4096, 128
# tiles at N = 14336), so those plans keep their estimates.
STREAM_LATENCY_US = 1.6
# The model's factor on the DRAM time without promotion where the weight streams: below the measured mean gain (1.5%),
# since the model already prices hopper close to gemv at one row, where gemv measures faster. Counted only on unsplit
# plans with A boxes of 9..64 rows: split plans and boxes of one swizzle atom (1..8 rows) are contested by gemv and
# tcgemv, which the model already prices hopper too low against, so counting the gain there would hand them to hopper.
# Those plans still take no promotion: their costs tie and "none" comes first.
STREAM_NO_PROMOTION = 0.99
STREAM_A_ROWS = (SWIZZLE_ROWS + 1, 64)  # A's box rows beside the streamed weight where the gain is counted
REUSE_NO_PROMOTION = 1.08  # ... and on the whole (the tiles' or the DRAM time) elsewhere
# Where one block an SM runs two or more tiles, each later tile's first loads are issued during the tile before it
# and the earlier tiles' stores drain while the next one computes. Fitted to 21 small problems timed in 7-8 tilings
# each on an H100 (families/calibration.csv, "hopper tilings of a small problem"): plans of one tile an SM (one wave:
# every block's first loads miss L2 together, every epilogue drains at once) measured 1.3-1.5x their estimates, plans
# of two or more at 1.0x. Credited to the latter, so that one-wave estimates, which the other families' are ranked
# against at small sizes, stay as they were; no more than the later tiles' own time, and not where the main loop
# does not bound the plan (DRAM streaming). Not credited with two blocks an SM (the model already overlaps one
# block's epilogue with the other's main loop) nor to tiles of fewer than LATER_TILES_MIN_K k-iterations: the grid
# did not fit those, and at one k-iteration the credit handed problems to hopper plans that measured 1.5-2.8x
# slower than the cta family's.
LATER_TILES_HIDE_US = 2.5
LATER_TILES_MIN_K = 4
# L2's bandwidth as a multiple of DRAM's, shared over the busy SMs: higher where the grid is one tile an SM (one
# wave). Fitted on an H100 to four settings' picks of the 46 problems any of them moved, every plan timed in one run
# (families/calibration.csv, "each L2-share setting's pick"): 2.5 for both handed one-wave grids wide tiles that ran
# 6-24% behind 64-wide ones; 3.0 for both handed multi-wave problems 64-row single-consumer tiles that ran up to 1.5x
# slower. The fp8_hopper family takes the multi-wave share on one wave too (its one one-wave pick that moved under
# 3.0 ran 19% slower).
L2_SHARE_ONE_WAVE = 3.0
L2_SHARE_MULTI_WAVE = 2.75


def wgmma_eff(block_n: int) -> float:
    """WGMMA_EFF at block_n, linear between its widths."""
    widths = sorted(WGMMA_EFF)
    lo = max(w for w in widths if w <= block_n)
    hi = min(w for w in widths if w >= block_n)
    if lo == hi:
        return WGMMA_EFF[lo]
    return WGMMA_EFF[lo] + (WGMMA_EFF[hi] - WGMMA_EFF[lo]) * (block_n - lo) / (hi - lo)



def cost_model(views: ProblemViews, arch: Arch, l2_share_one_wave: float = L2_SHARE_ONE_WAVE):
    """Estimated µs, only to rank candidates (against each other and the other families): the busiest
    SM's tiles, each the slowest of its math, its loads at the depth the pipeline allows, and its share
    of L2 traffic; at least the DRAM time of the unique bytes; plus the persistent kernel's start."""
    elem = views.operands["A"].elem_bytes
    c_elem = views.operands["C"].elem_bytes
    grid = tile_grid(views)
    m_inner = _size(views, "m")
    k_iters_all = problem_k_iters(views)
    clk = arch.clock_ghz * 1e3
    follow = a_rows_follow_m(views)
    loops = tile_loops(views)
    unique = (views.operands["A"].span * elem + views.operands["B"].span * elem
              + views.batch * views.m * views.n * c_elem * (2 if views.spec.beta else 1))
    dram_us = unique / (arch.dram_gbps * 1e3)
    a_bytes = views.operands["A"].span * elem
    tma_latency_us = 0.8

    def cost(a: Assignment) -> float:
        bm, bn, cons, ctas, splits = a["block_m"], a["block_n"], a["consumers"], a["ctas_per_sm"], a["k_splits"]
        # A K split makes `splits` blocks of every tile, each with a slice of its k-iterations.
        parts = a["a_multicast"]
        groups, tiles_m, tiles_n, flat = grid(bm, bn, splits)
        tiles = groups * tiles_m * _round_up(tiles_n, parts) * splits
        streams_once = weight_streams_once(loops, tiles_m, flat)
        k_iters = math.ceil(k_iters_all / splits)
        tiles_per_sm = math.ceil(tiles / arch.sms)
        busy = min(tiles, arch.sms)
        # wgmma efficiency: shared-memory bytes per FLOP fall as N grows; one consumer warpgroup
        # leaves the tensor cores idle while it waits on its own barriers and epilogue.
        eff = wgmma_eff(bn) * (1.0 if cons == 2 else 0.8)
        math_us = bm * bn * k_iters * block_k(elem) * 2 / (arch.wgmma_flops_per_sm_clk * (2 // elem) * clk * eff)
        a_rows = a_box_rows(m_inner, bm) if follow else bm  # the box's rows: what TMA delivers
        stage = (a_rows // parts + bn) * SWIZZLE_BYTES  # what an SM reads through L2 a stage
        load_us = k_iters * tma_latency_us / a["stages"]  # `stages` loads in flight, each ~latency
        share = l2_share_one_wave if tiles_per_sm == 1 else L2_SHARE_MULTI_WAVE
        l2_share = arch.dram_gbps * share * 1e3 / busy  # bytes/µs of L2 bandwidth one busy SM gets
        l2_us = k_iters * stage / l2_share
        epi_us = bm * bn * c_elem / (arch.dram_gbps * 1e3 / busy)
        # One block an SM runs its epilogue after its main loop (only the producer's prefetch overlaps);
        # with two, the other block's main loop fills that time. Two blocks share the SM's tensor cores
        # and its L2 share, so their math and loads still add up per SM.
        load_us *= ctas
        exposed_epi = epi_us if ctas == 1 else 0.1 * epi_us
        tile_us = max(math_us, load_us, l2_us) + exposed_epi
        # A split's reduction runs after the whole K slice has streamed: nothing overlaps it.
        reduce_us = CLUSTER_REDUCE_US + bm * bn * 4 / (DSMEM_BYTES_PER_CLK * clk) if splits > 1 else 0.0
        # Without L2 promotion the weight reads from DRAM faster where it streams once (one tile row) beside
        # an A box of at most 64 rows (the gain counted at 9..64 rows, unsplit); elsewhere it runs slower
        # (L2_PROMOTIONS).
        stream_us, reread = dram_us, 1.0
        if a["l2_promotion"] == "none":
            if tiles_m == 1 and a_rows <= STREAM_A_ROWS[1]:
                if splits == 1 and a_rows >= STREAM_A_ROWS[0]:
                    stream_us *= STREAM_NO_PROMOTION
            else:
                reread = REUSE_NO_PROMOTION
        # Where the weight streams once (one tile row, no tile group reading it again), each SM reads it at most
        # `stages` boxes a round trip a block: a GPU the tiles leave half empty streams at about half the rate. The
        # round trip lengthens from the idle one as more SMs stream, to STREAM_LATENCY_US from half of them on.
        if parts > 1:  # A through a multicast cluster streams no faster than measured (MULTICAST_STREAM_GBPS)
            stream_us = max(stream_us, a_bytes / (MULTICAST_STREAM_GBPS * 1e3))
        if streams_once:
            trip_us = tma_latency_us + (STREAM_LATENCY_US - tma_latency_us) * min(1.0, 2 * busy / arch.sms)
            stream_us = max(stream_us, tiles_per_sm * k_iters * trip_us / (a["stages"] * ctas))
        if splits > 1 and a["acc_chains"] == 2:  # the slice's wgmmas in two chains (ACC_CHAINS)
            reduce_us -= ACC_CHAINS_SPLIT_US
        if parts > 1:  # measured slower than the model had it (MULTICAST_FIXED_US)
            reduce_us += MULTICAST_FIXED_US
        # The small terms break ties (memory-bound problems, where the DRAM time is the same for every
        # tiling) towards tiles that keep more warps busy and towards deeper pipelines: two consumer warpgroups
        # measured much faster than one on a memory-bound conv (32x64x56x56).
        hidden_us = (min(LATER_TILES_HIDE_US, (tiles_per_sm - 1) * tile_us)
                     if ctas == 1 and k_iters >= LATER_TILES_MIN_K else 0.0)
        return (reread * max(tiles_per_sm * tile_us - hidden_us, stream_us) + reduce_us + LAUNCH_US
                + 0.05 * tiles_per_sm * (tile_us + math_us) + 0.01 * tiles_per_sm * load_us)

    return cost
