"""The `hopper` family's tiling graph (pure): its nodes' domains (tile widths, pipeline depths, the K split, A
multicast, accumulator sets, L2 promotion) and the constraints that rule assignments out (warpgroup rows, registers,
shared memory, where a K split or a multicast pays), with the shared-memory and register arithmetic they check and
the plan reads back. The family's module holds the plan and the gates; views.py reads the views these use.
"""

from __future__ import annotations

import math

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph
from dgemm_cli.families.hopper.views import (
    BOX_MN,
    SWIZZLE_BYTES,
    _inner_is_run_time,
    _size,
    a_box_rows,
    a_rows_follow_m,
    c_vector,
    epi_bytes,
    packed_store,
    problem_k_iters,
    tile_grid,
    tma_operand,
)
from dgemm_cli.views import ProblemViews

PRODUCER_REGS = 40
# Tile widths (the wgmma N, a multiple of 16 here). Past the powers of two, widths that let the tile count fill
# the SMs or the output exactly: N = 14336 is 112 tiles of 128 for 132 SMs (20 idle), 128 tiles of 112; N = 576
# (MLA's kv_a projection) is 4 tiles of 144 (cuBLAS's nvjet tile there), where 160 computes 640 columns. An MN-major
# B is loaded in 64-wide boxes, so it takes only multiples of 64.
# Below 64 (NARROW_N), only in A-multicast clusters: the tokens' side of decode with the roles swapped.
BLOCK_N = (32, 48, 64, 96, 112, 128, 144, 160, 192, 224, 256)
NARROW_N = 64
MAX_ACC_REGS = 128  # f32 accumulators per consumer thread
CONSUMER_OVERHEAD_REGS = 48  # descriptors, addresses, loop state and the epilogue beside the accumulators
SMEM_RESERVED_PER_BLOCK = 1024  # what the hardware keeps of an SM's shared memory for each resident block
SMEM_ALIGN = 1024  # 128B-swizzled TMA destinations: the kernel rounds its shared-memory base up to this
# TMA pipeline depths: at most DEEP_STAGES, deeper rings only in A-multicast clusters, whose 64x32 stages are small
# (docs/design/hopper.md says why these depths).
STAGES = (3, 4, 5, 6, 8, 10, 12, 16)
DEEP_STAGES = 8
# Blocks of a cluster that share one tile's k-iterations: at most 2, in one wave (clusters of 4 blocks with a whole
# SM's shared memory each do not all fit at once; docs/design/hopper.md).
K_SPLITS = (1, 2)
# Blocks of a cluster along n that share one A box a k-iteration, each loading half of its rows and multicasting
# them to both (a_multicast). Where N is a few tiles and M many (the weight as A: decode with the roles swapped,
# C^T = W X^T, as cuBLAS's nvjet kernels run [41..64,4096]x[4096,4096] in 1x2 clusters), A streams from DRAM once
# and through L2 once without a K split and its cluster reduce; cost.py prices it (MULTICAST_STREAM_GBPS,
# MULTICAST_FIXED_US).
A_MULTICAST = (1, 2)
# Accumulator sets a consumer's wgmmas alternate between, k16 step by k16 step: with one, every wgmma of a tile waits
# on the previous one's accumulators; with two, neighbours are independent and the sets are summed once at the
# tile's end. Two sets only with the K split, whose slices are long chains of k-iterations (docs/design/hopper.md);
# the model credits them ACC_CHAINS_SPLIT_US.
ACC_CHAINS = (1, 2)
RED_PAD = 4  # floats of padding a row (or column) of the parked partial tile: 16-byte aligned vectors
# The tensor maps' L2 promotion (what an L2 miss of a TMA load fetches from DRAM): none where the weight streams
# once beside a small A box, else 256 bytes (cost.py; docs/design/hopper.md). First in the domain: where the costs
# tie (a split plan), the plan takes no promotion.
L2_PROMOTIONS = ("none", "256B")


def red_pitch(a: Assignment, c_unit: str | None) -> int:
    """Floats a row of the parked partial tile ([row][col]; [col][row] when C is m-contiguous)."""
    return (a["block_m"] if c_unit == "m" else a["block_n"]) + RED_PAD


def k_split_slices(k_iters: int, splits: int) -> tuple[int, str | None]:
    """(k-iterations a slice, why the split does not fit): every block of the cluster needs a slice."""
    per = math.ceil(k_iters / splits)
    if (splits - 1) * per >= k_iters:
        return per, f"{k_iters} k-iteration(s) in slices of {per} leave block {splits - 1} without one"
    return per, None


def smem_bytes(a: Assignment, c_unit: str | None, elem: int, packed: bool = False) -> int:
    """Stages, each consumer's epilogue staging (a K split parks its tile over the stages instead), barriers."""
    stage = (a["block_m"] + a["block_n"]) * SWIZZLE_BYTES  # a 128-byte row of k for each of A's and B's rows
    barriers = 2 * a["stages"] * 8  # a full and an empty mbarrier per stage
    staging = a["consumers"] * epi_bytes(c_unit, packed) if a.get("k_splits", 1) == 1 else 0
    return a["stages"] * stage + staging + barriers + SMEM_ALIGN


def entry_regs(consumers: int, ctas_per_sm: int) -> int:
    """Registers a thread starts with: what __launch_bounds__(threads, ctas_per_sm) allows, a multiple of 8."""
    threads = 128 * (consumers + 1)
    return min(255, 65536 // (threads * ctas_per_sm)) // 8 * 8


def consumer_regs(consumers: int, ctas_per_sm: int) -> int:
    """Registers a consumer thread asks for with setmaxnreg.inc: the block's pool (what its threads
    started with) minus what the producer warpgroup keeps, a multiple of 8, at most 240. Asking for
    more than the pool holds would block the consumers forever (setmaxnreg.inc waits for registers)."""
    pool = entry_regs(consumers, ctas_per_sm) * 128 * (consumers + 1)
    return min(240, (pool - 128 * PRODUCER_REGS) // (128 * consumers) // 8 * 8)


def build_tiling_graph(views: ProblemViews, arch: Arch, k_splits: tuple[int, ...] = K_SPLITS) -> ConstraintGraph:
    """The hopper kernels' tiling graph; `k_splits` the K splits a family's kernels offer (fp8_hopper's differ)."""
    elem = views.operands["A"].elem_bytes
    c_unit = c_vector(views)[0]
    packed = packed_store(views)
    g = ConstraintGraph()
    g.node("block_m", (64, 128, 256), "rows of C per tile")
    b_major = tma_operand(views, "B", BOX_MN)
    mn_major_b = not isinstance(b_major, str) and b_major.major == "mn"
    g.node("block_n", tuple(bn for bn in BLOCK_N if not mn_major_b or bn % BOX_MN == 0),
           "columns of C per tile (the wgmma N)" + (f"; B is n-major: {BOX_MN}-wide boxes" if mn_major_b else ""))
    g.node("consumers", (1, 2), "consumer warpgroups (each owns block_m / consumers rows)")
    g.node("ctas_per_sm", (1, 2), "resident blocks an SM (2: one block's epilogue overlaps the other's math)")
    g.node("stages", STAGES, "TMA pipeline depth (shared-memory stages)")
    g.node("k_splits", k_splits, "blocks of a cluster sharing one tile, each streaming a slice of K", default=1)
    g.node("a_multicast", A_MULTICAST, "blocks of a cluster along n sharing A's box, each loading a part of its rows "
           "into every block (TMA multicast)", default=1)
    g.node("acc_chains", ACC_CHAINS, "accumulator sets the k16 steps alternate between (2: consecutive wgmmas do not "
           "wait on each other's result)", default=1)
    g.node("l2_promotion", L2_PROMOTIONS, "what an L2 miss of the tensor maps' loads fetches from DRAM (256 bytes, or "
           "the line alone)", default="256B")

    def wg_rows(a: Assignment) -> str | None:
        wg_m = a["block_m"] // a["consumers"]
        return None if wg_m in (64, 128) else f"{wg_m} rows per warpgroup; wgmma takes one or two m64 blocks"
    g.constrain("warpgroup rows", "instruction", ["block_m", "consumers"], wg_rows,
                "each consumer warpgroup issues one or two m64 wgmmas per k step")

    def acc_regs(a: Assignment) -> str | None:
        regs = a["block_m"] // a["consumers"] // 64 * a["block_n"] // 2 * a["acc_chains"]
        if regs > MAX_ACC_REGS:
            return f"{regs} f32 accumulators per thread (> {MAX_ACC_REGS})"
        room = consumer_regs(a["consumers"], a["ctas_per_sm"]) - CONSUMER_OVERHEAD_REGS
        if regs > room:
            return (f"{regs} f32 accumulators per thread, but {a['ctas_per_sm']} block(s) an SM leave a consumer "
                    f"{room} beside its other registers")
        return None
    g.constrain("accumulator registers", "arch", ["block_m", "block_n", "consumers", "ctas_per_sm", "acc_chains"],
                acc_regs,
                "accumulators stay in registers next to the descriptors and the epilogue")

    g.constrain("two blocks an SM", "arch", ["consumers", "ctas_per_sm"],
                lambda a: "two 384-thread blocks an SM start at 80 registers a thread: not yet run on a GPU"
                if a["ctas_per_sm"] == 2 and a["consumers"] == 2 else None,
                "only the 256-thread block (one consumer) has run two to an SM")

    def smem_ok(a: Assignment) -> str | None:
        need = smem_bytes(a, c_unit, elem, packed)
        limit = min(arch.smem_per_block, arch.smem_per_sm // a["ctas_per_sm"] - SMEM_RESERVED_PER_BLOCK)
        return None if need <= limit else f"{need} B > {limit} B per block ({a['ctas_per_sm']} block(s) an SM)"
    g.constrain("shared memory", "arch", ["block_m", "block_n", "consumers", "ctas_per_sm", "stages", "k_splits"],
                smem_ok, "stages + per-consumer epilogue staging (none with a K split) + barriers")

    k_iters = problem_k_iters(views)
    grid = tile_grid(views)

    def k_split_ok(a: Assignment) -> str | None:
        s = a["k_splits"]
        if s == 1:
            return None
        groups, tiles_m, tiles_n, _ = grid(a["block_m"], a["block_n"], s)
        tiles = groups * tiles_m * tiles_n
        if tiles >= arch.sms:
            return f"{tiles} tiles already fill {arch.sms} SMs: a split would add its reduction and no SM"
        if tiles * s > arch.sms:
            return (f"{tiles} tiles x {s} = {tiles * s} blocks, more than one wave of {arch.sms} SMs (measured "
                    "slower: the clusters did not all fit at once)")
        why = k_split_slices(k_iters, s)[1]
        if why:
            return why
        part = (a["block_n"] if c_unit == "m" else a["block_m"]) * red_pitch(a, c_unit) * 4  # [col][row] or [row][col]
        stages = a["stages"] * (a["block_m"] + a["block_n"]) * SWIZZLE_BYTES
        return None if part <= stages else f"the {part} B partial tile does not fit the {stages} B of stages"
    a_k_major = a_rows_follow_m(views)  # K-major A: its box is whole rows, cut into parts of rows
    rows_cut_at_run_time = bool(views.spec.run_time_letter) and _inner_is_run_time(views, "m")

    def multicast_ok(a: Assignment) -> str | None:
        parts = a["a_multicast"]
        if parts == 1:
            return None
        if a["k_splits"] > 1:
            return "a K split's cluster already holds the tile's blocks"
        if not a_k_major:
            return "A is m-major: its box is cut into parts only along whole k-major rows"
        if rows_cut_at_run_time or a_box_rows(_size(views, "m"), a["block_m"]) < a["block_m"]:
            return "A's box is cut to the rows present: no whole box to share"
        groups, tiles_m, tiles_n, flat = grid(a["block_m"], a["block_n"], 1)
        if flat:
            return "flat rows load A a 64-row block at a time"
        if tiles_n != parts:
            return (f"{tiles_n} tile column(s): multicast where one cluster of {parts} covers N (A would otherwise "
                    "stream once a cluster; not measured)")
        return None
    g.constrain("narrow tiles", "problem", ["block_n", "a_multicast"],
                lambda a: f"{a['block_n']} columns: tiles under {NARROW_N} wide run only in A-multicast clusters"
                if a["block_n"] < NARROW_N and a["a_multicast"] == 1 else None,
                "narrow tiles only where A is shared over a cluster (decode with the roles swapped)")
    g.constrain("deep rings", "problem", ["stages", "a_multicast"],
                lambda a: f"{a['stages']} stages: more than {DEEP_STAGES} only in A-multicast clusters (measured "
                "slower elsewhere)" if a["stages"] > DEEP_STAGES and a["a_multicast"] == 1 else None,
                f"rings deeper than {DEEP_STAGES} stages only where A is shared over a cluster")
    g.constrain("accumulator sets", "problem", ["k_splits", "acc_chains"],
                lambda a: "two accumulator sets only with a K split (measured level or slower without one)"
                if a["acc_chains"] == 2 and a["k_splits"] == 1 else None,
                "a second accumulator set only where it was measured faster: the K-split kernel")
    g.constrain("A multicast", "problem", ["block_m", "block_n", "k_splits", "a_multicast"], multicast_ok,
                "A's box shared over a cluster along n only where the cluster covers N, A whole rows (K-major, "
                "not cut), no K split")
    g.constrain("k split", "problem", ["block_m", "block_n", "stages", "k_splits"], k_split_ok,
                "a K split only where the tiles leave SMs idle and the blocks fit one wave, every block with a slice, "
                "the f32 partial tile parked in the block's pipeline stages")
    return g
