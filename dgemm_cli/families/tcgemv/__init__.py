"""Kernel family `tcgemv`: products with 2..16 rows (multi-token decode) on the tensor cores, streaming the
weight B straight from memory into registers (pure).

Why: at M = 2..16 a product still reads every byte of B once, but the FMAs of the `gemv` family no longer
hide behind the loads, and the `hopper` family's TMA box order reads B more slowly, even with no math, than
plain loads of whole 128-byte lines (measured on the H200; docs/design/tcgemv.md). This family keeps gemv's
loads and does the math with mma.sync.m16n8k16 in swapped roles (C^T = B^T A^T):
  - the mma's B operand is 8 weight rows (columns of C), its A operand 16 tokens (rows of C): rows 8..15 zero
    when M <= 8, and a token past M reads row M - 1 (rows never stored; the loads need no per-lane predicate);
  - a k-sum ignores k's order, so a lane feeds any 8 contiguous k of its row as the k-slots it holds, as long
    as the activation's lane with the same t feeds the same k;
  - each load takes 4 rows x 128 bytes (whole lines): rows 2q and 2q + 1 (q = lane / 8) in two loads whose
    chunks are swapped between lane and lane ^ 4 with one shuffle a word, so that lane (g, t) ends with chunks
    t and t + 4 of its row g: four mmas a 64-k segment;
  - the activation comes through L1 (the weight's loads do not allocate there), loaded with the weight's round
    rather than just before its mmas, where they would wait behind the next round's weight loads.
The warps of a block split K and sum in order through shared memory: bit-identical run to run, no workspace.

At 9..16 tokens over a wide weight the activation can instead sit in shared memory (`a_stage` "shared"): TMA
loads A's whole K once a block in 128-byte-swizzled boxes of 16 tokens x 64 k, and a block holds `row_groups`
groups of 2 warps (2 octets each, K split in two), so that one block an SM covers N in one wave and the activation
crosses L2 once an SM rather than once every 16 columns (117 MB at [16,4096]x[4096,14336] in 2-warp blocks). It
runs alike with hopper (measured), so it is priced just above hopper and left to `deepgemm tune`; at 8 tokens it
is slower than the L1 kernel: 16 tokens only.
Needs B and A k-contiguous with 16-byte vectors (the nn.Linear layout; the pointers checked at run time where
the spec does not promise them), f16 or bf16, and sm_90a (mma.sync runs from sm_80, but the family is measured
on the H200 only, and for sm_80..sm_89 its register budget leaves a stack frame). One kernel serves M up to 8
or up to 16 at run time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import INT32_MAX, ProblemViews

NAME = "tcgemv"
SUMMARY = ("M = 2..16 rows on the tensor cores: B streamed into registers in whole 128-byte lines, mma.sync with "
           "the roles swapped")
# The rows are a kernel argument (the tokens past M are zero in the fragments): one kernel serves a range.
RUNTIME_ROWS = True
MAX_M = 16
SEGMENT = 64  # k elements of a row one pair of loads covers (a 128-byte line of f16/bf16)
VEC = 8  # elements of a 16-byte chunk
ROUND_SEGMENTS = 2  # 64-k segments a round per row (two rounds in flight): the measured configurations
RED_PAD = 4  # floats of padding per row of a partial tile
# The tilings (octets, k_warps) timed on the H200 for each token count: the only candidates. The others (1 warp,
# 16 tokens at 8 warps, 4 octets) ran slower; 8 tokens at 1 octet is untimed (docs/design/tcgemv.md).
MEASURED = {8: ((2, 2), (2, 4), (2, 8)), 16: ((1, 4), (2, 2), (2, 4))}  # 16 x (2, 2): short K only (below)
# The activation in shared memory (module doc): 16 tokens, 2 octets x 2 warps along K in every row group, and
# 6, 7 or 8 row groups (12, 14, 16 warps) a block: the timed configurations.
SHARED_TILING = (16, 2, 2)  # tokens, octets, k_warps
ROW_GROUPS = (6, 7, 8)
SHARED_FILL = 0.9  # the least share of the SMs one wave of such blocks must reach (128 of 132 at N = 14336)
# 64-k segments an mbarrier of the staged activation covers: a round's (groups of 8 measured slower).
SHARED_GROUP_SEGMENTS = 2
SHARED_ALIGN = 1024  # the 128-byte swizzle's atom: the staged activation starts 1024-byte aligned
SHARED_REGS = 128  # 14 warps an SM: 4 on some sub-partition, 16K registers each
# The register-stream kernel's first rounds of the weight, prefetched into L2 before its wait for the previous grid
# (with coherent loads after it, and a trigger for the next grid after its last load), where a warp streams at least
# PREFETCH_MIN_ROUNDS rounds: there it measured about 2% faster chained on the H200; shorter streams gain nothing,
# and more rounds prefetched or the prefetch without the trigger ran slower.
PREFETCH_ROUNDS = 2
PREFETCH_MIN_ROUNDS = 16
# Registers a thread may use (the launch bound): two rounds of the weight (32 words a round at 2 octets), the
# activation's chunks of those rounds (8 or 16 words each), accumulators and addresses. With 16 tokens and 2
# octets 128 spilled; 168 leaves 3 blocks of 128 threads an SM.
REGS = {(8, 1): 128, (8, 2): 128, (16, 1): 128, (16, 2): 168}
# Cost model constants (µs and shares), only to rank candidates and families. Fitted to eight H200 timings of the
# register-stream kernel at N = 4096 and 14336 (8 and 16 tokens), on the hopper family's scale (its estimates run
# at about 0.9 of its measured times there).
# fitted: tools/fit_calibration.py, table families/calibration.csv
LAUNCH_US = 1.5  # as gemv and hopper
MEMORY_LATENCY_US = 1.0
STREAM_SHARE = {8: 1.063, 16: 1.02}  # of the DRAM bandwidth hopper's estimate takes whole, by tokens a kernel
# A partly filled last wave of blocks leaves bandwidth unused: time x (1 + WAVE_TAIL x the idle share of it).
WAVE_TAIL = 0.212
# With 16 tokens the activation's reads through L1 match the weight's; past one wave of blocks they cost more than
# the wave model says: x (1 + this x the share of blocks after the first wave).
EXTRA_WAVES_16 = 0.18
# fitted: tools/fit_calibration.py, table families/calibration.csv
THREADS_SHARE = 0.96  # 256-thread blocks against 128-thread ones at the same wave fill (measured slower)
# The shared-activation kernel's share: it runs alike with hopper within the runs' spread (measured), so its
# estimate sits just above hopper's: the model keeps hopper, and `deepgemm tune`, which times both, takes it where
# it measures faster.
STREAM_SHARE_SHARED = 1.005


@dataclass(frozen=True)
class TcGemvPlan:
    family = NAME
    tokens: int  # rows of C an mma tile holds: 8 (M <= 8) or 16
    octets: int  # 8-row groups of B (columns of C) a warp streams
    k_warps: int  # warps of a row group, splitting K
    unroll: int  # 64-k segments a round per row
    threads: int
    block_n: int  # columns of C a block: 8 x octets x row_groups
    tiles_n: int  # column tiles of one product
    blocks: int  # tiles_n x the batch: a block a column tile of every product
    k_slice: int  # elements of K a warp (a multiple of 64)
    regs: int  # registers a thread may use (the launch bound)
    red_pitch: int
    smem_bytes: int  # the warps' partial tiles (static); with a_stage "shared" also the activation (dynamic)
    whole_segments: bool  # K is whole 64-k segments: a segment is in a warp's slice or past it, no per-lane test
    whole_blocks: bool  # N is whole blocks: every row of B a block reads exists
    a_check: int  # bytes A's view pointer must be aligned to at run time (0: the spec promises it)
    b_check: int
    index_type: str
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    a_stage: str = "l1"  # "l1": each warp loads A through L1; "shared": TMA stages A's whole K in shared memory
    row_groups: int = 1  # groups of k_warps warps a block, each 8 x octets columns
    a_row_stride: int = 0  # "shared": elements between A's rows (tokens), for its tensor map
    act_bytes: int = 0  # "shared": the staged activation, TOKENS x the 64-k segments of K x 128 bytes
    barriers: int = 0  # "shared": mbarriers, one a group of SHARED_GROUP_SEGMENTS segments of each warp's K slice
    assignment: dict[str, Any] = field(default_factory=dict)

    @property
    def arch_features(self) -> frozenset[str]:
        """The staged activation comes by TMA; the register-stream kernel is a programmatic dependent launch."""
        return frozenset({"tma"}) if self.shared_act else frozenset({"griddepcontrol"})

    @property
    def min_blocks(self) -> int:
        return 65536 // (self.threads * self.regs)

    @property
    def shared_act(self) -> bool:
        return self.a_stage == "shared"

    @property
    def rounds(self) -> int:
        """Rounds a warp streams: its K slice in steps of `unroll` 64-k segments."""
        return self.k_slice // (self.unroll * SEGMENT)

    @property
    def prefetch_rounds(self) -> int:
        """Rounds of its weight a warp of the register-stream kernel prefetches into L2 before its wait (0: none):
        PREFETCH_ROUNDS where it streams PREFETCH_MIN_ROUNDS or more."""
        return PREFETCH_ROUNDS if not self.shared_act and self.rounds >= PREFETCH_MIN_ROUNDS else 0

    @property
    def runtime_align(self) -> dict[str, int]:
        """16-byte loads of A and B: pointers the spec does not promise are checked, else the fallback."""
        return {x: n for x, n in (("A", self.a_check), ("B", self.b_check)) if n}

    @property
    def summary(self) -> str:
        groups = f"{self.row_groups} row groups of " if self.row_groups > 1 else ""
        stage = ("A staged in shared memory by TMA once a block" if self.shared_act
                 else "A through L1 with each round")
        return (f"tensor-core GEMV (mma.sync m16n8k16, roles swapped), {self.tokens} tokens a tile, {self.octets} "
                f"octet(s) of columns a warp, {groups}{self.k_warps} warps along K ({self.k_slice} each), "
                f"{self.unroll}x64-k segments a round, {stage}, {self.threads} threads, {self.block_n} columns a "
                f"block, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        warps = (f"{self.row_groups} x {self.k_warps} warps: each of {self.row_groups} groups {8 * self.octets} "
                 f"columns, each warp {self.k_slice} of K" if self.row_groups > 1 else
                 f"{self.k_warps} warps, each {self.k_slice} of K for the block's {self.block_n} columns")
        smem = (f"{self.smem_bytes} B dynamic shared memory (A's {self.tokens} x K in {self.act_bytes} B, "
                f"{self.barriers} mbarriers, the warps' partial sums)" if self.shared_act else
                f"{self.smem_bytes} B shared memory (the warps' partial sums, added in order)")
        out = [f"=> {self.blocks} blocks of {self.threads} threads ({warps}), at most {self.regs} registers a "
               f"thread ({self.min_blocks} blocks an SM); {smem}"]
        if self.runtime_align:
            out.append("16-byte loads of " + " and ".join(self.runtime_align) + ": the pointers are checked at run "
                       "time (the spec promises less), else the fallback")
        if not self.shared_act:
            out.append(f"{self.rounds} rounds a warp: " + (
                f"its first {self.prefetch_rounds} prefetched into L2 before the wait for the previous grid, coherent "
                "weight loads, the next grid let in after the last load" if self.prefetch_rounds else
                f"no prefetch before the wait (it pays from {PREFETCH_MIN_ROUNDS} rounds: measured slower alone and "
                "level chained below), `.nc` weight loads"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "prefetch_rounds": self.prefetch_rounds,
                "decisions": [x.to_dict() for x in self.decisions]}


def _k_contiguous(views: ProblemViews, name: str) -> str | None:
    """Why `name` cannot stream in 16-byte chunks along k, or None: k its innermost role in one segment of
    stride 1, whole 16-byte vectors when the pointer is 16-byte aligned."""
    facts = views.operands[name]
    k_role = views.roles["k"]
    if facts.unit_role != "k" or len(k_role.segments) != 1 or k_role.segments[0].stride(name) != 1:
        return f"{name} is not contiguous along k in one run"
    if facts.vector_elems_aligned < VEC:
        return f"{name}'s rows are not whole 16-byte vectors apart ({facts.vector_limit_aligned})"
    return None


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    out = []
    if arch.cc < (9, 0):
        out.append(("measured arch", f"sm_90a only ({arch.name}): the family is measured on the H200 alone, and "
                                     "compiled for sm_80..sm_89 its 128-register budget leaves an 8-byte stack "
                                     "frame"))
    dtypes = {views.operands[x].dtype for x in "AB"}
    if dtypes - {"f16", "bf16"} or len(dtypes) > 1:
        out.append(("input types", f"A and B must both be f16 or both bf16 (they are {'/'.join(sorted(dtypes))})"))
    if views.m > MAX_M:
        out.append(("few rows", f"M = {views.m} rows: more than the {MAX_M} tokens of one mma tile"))
    if views.m == 1:
        out.append(("one row", "M = 1: no mma work to share; gemv's FMA stream is measured faster"))
    for x in "AB":
        why = _k_contiguous(views, x)
        if why:
            out.append((f"{x} along k", why))
    if views.k % VEC:
        out.append(("whole chunks", f"K = {views.k} is not a whole number of 8-element (16-byte) chunks"))
    least = min(warps for tiling in MEASURED.values() for _, warps in tiling)
    if views.k <= SEGMENT * (least - 1):
        out.append(("K for every warp", f"K = {views.k}: fewer 64-k segments than the {least} warps a block splits "
                                        "K over at the least"))
    # The widest blocks count only where their warps each get a 64-k segment (the tiling graph's "a segment a warp"):
    # 16 tokens at 1 octet takes 4 warps, so at K = 144 (3 segments) only 2-octet blocks remain, and those may not
    # fill the SMs (a random spec, N = 2002, planned no tiling past these gates).
    segments = _segments(views)
    tokens = _tokens(views.m)
    octets = min((o for o, warps in MEASURED[tokens]
                  if warps <= segments and not _short_k_only(tokens, (o, warps), segments)),
                 default=max(o for o, _ in MEASURED[tokens]))
    columns = 8 * octets
    if _blocks(views, octets) < arch.sms:
        out.append(("work for every SM", f"{_products(views)}N = {views.n}: fewer {columns}-column blocks than the "
                                         f"{arch.sms} SMs, and the family splits K only within a block (gemv and "
                                         "splitk split it over a cluster)"))
    return out


def _short_k_only(tokens: int, tiling: tuple[int, int], segments: int) -> bool:
    """16 tokens at 2 octets x 2 warps (168 registers): measured only at short K, where 4 warps would idle."""
    return tokens == 16 and tiling == (2, 2) and segments >= 4


def _products(views: ProblemViews) -> str:
    return f"a batch of {views.batch} products of " if views.batch > 1 else ""


def _blocks(views: ProblemViews, octets: int, row_groups: int = 1) -> int:
    """Blocks of a tiling: a column tile of 8 x octets x row_groups columns of every product of the batch."""
    return views.batch * math.ceil(views.n / (8 * octets * row_groups))


def _segments(views: ProblemViews) -> int:
    return math.ceil(views.k / SEGMENT)


def _shared_layout(views: ProblemViews, k_warps: int) -> tuple[int, int]:
    """The staged activation's bytes (16 tokens x every 64-k segment x 128 bytes) and its mbarriers: one a group of
    SHARED_GROUP_SEGMENTS segments of each warp's K slice."""
    slice_segments = _k_slice(views.k, k_warps) // SEGMENT  # whole groups where the plan stages A (K % 512 == 0)
    return (SHARED_TILING[0] * _segments(views) * 128,
            k_warps * math.ceil(slice_segments / SHARED_GROUP_SEGMENTS))


def _shared_smem(views: ProblemViews, row_groups: int) -> int:
    tokens, octets, k_warps = SHARED_TILING
    act, barriers = _shared_layout(views, k_warps)
    partial = k_warps * tokens * (8 * octets * row_groups + RED_PAD) * 4
    return SHARED_ALIGN + act + 8 * barriers + partial


def _a_by_tma(views: ProblemViews) -> str | None:
    """Why A cannot be staged by one 2-d tensor map [M, K] (K innermost), or None."""
    if views.batch > 1:
        return "a batch of products (the staged activation is one product's)"
    m_role = views.roles["m"]
    if len(m_role.segments) != 1:
        return "A's rows are not one strided run (more than one m segment)"
    elem = views.operands["A"].elem_bytes
    stride_bytes = m_role.segments[0].stride("A") * elem
    if stride_bytes % 16 or not views.k * elem <= stride_bytes < 2 ** 40:
        return (f"A's rows are {stride_bytes} bytes apart (TMA: a multiple of 16 below 2^40, no less than a row's "
                f"{views.k * elem})")
    return None


def _tokens(m: int) -> int:
    return 8 if m <= 8 else 16


def _k_slice(k: int, warps: int) -> int:
    return math.ceil(k / warps / SEGMENT) * SEGMENT


def build_tiling_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    g = ConstraintGraph()
    g.node("tokens", (_tokens(views.m),), "rows of C an mma tile holds: 8 (M <= 8; the mma's rows 8..15 are zero) "
                                          "or 16 (twice the activation's loads)")
    g.node("octets", (1, 2), "8-column groups of C (8 rows of B) a warp streams; 2 share the activation's loads")
    g.node("k_warps", (2, 4, 8), "warps of a row group, each a slice of K (summed through shared memory in order)")
    g.node("a_stage", ("l1", "shared"), "the activation: through L1 by every warp with its round, or staged in "
                                        "shared memory by TMA once a block", default="l1")
    g.node("row_groups", (1, *ROW_GROUPS), "groups of k_warps warps a block, each its own columns (one block an SM "
                                           "shares the staged activation)", default=1)

    segments = _segments(views)

    def measured(a: Assignment) -> str | None:
        tiling = (a["octets"], a["k_warps"])
        if a["a_stage"] == "shared":
            if a["row_groups"] == 1:
                return "a staged activation is shared by row groups: one block an SM holds several"
            if (a["tokens"], *tiling) != SHARED_TILING:
                return (f"A in shared memory is timed at {SHARED_TILING[0]} tokens, {SHARED_TILING[1]} octets x "
                        f"{SHARED_TILING[2]} warps a row group only (at 8 tokens it is measured slower than "
                        "through L1)")
            return None
        if a["row_groups"] != 1:
            return "row groups share a staged activation: through L1 a block is one group"
        if _short_k_only(a["tokens"], tiling, segments):
            return ("16 tokens at 2 octets x 2 warps (168 registers) is measured only where 4 warps would idle (K "
                    "under 4 segments); at long K it is measured slower than 1 octet x 4 warps")
        if tiling in MEASURED[a["tokens"]]:
            return None
        return (f"{a['tokens']} tokens: {tiling[0]} octet(s) x {tiling[1]} warps is not among the timed tilings "
                f"{MEASURED[a['tokens']]}")
    g.constrain("measured configurations", "problem", ["tokens", "octets", "k_warps", "a_stage", "row_groups"],
                measured, "the tilings timed on the H200 (single and batched products; A through L1 or staged in "
                          "shared memory)")

    def a_segment_a_warp(a: Assignment) -> str | None:
        if a["k_warps"] <= segments:
            return None
        return (f"K = {views.k} is {segments} 64-k segment(s): {a['k_warps']} warps would leave "
                f"{a['k_warps'] - segments} without one (idle warps measured slower)")
    # Not stricter: the slices are whole segments of one size, so with more segments than warps the last warp may
    # still get none (K = 264 at 4 warps: 128, 128, 8, 0); ruling that out left 16 tokens at K = 576 no tiling.
    g.constrain("a segment a warp", "problem", ["k_warps"], a_segment_a_warp,
                "the warps of a block split K in whole 64-k segments: no more warps than segments")

    def fills(a: Assignment) -> str | None:
        blocks = _blocks(views, a["octets"], a["row_groups"])
        if blocks > INT32_MAX:
            return f"{blocks} blocks exceed one launch's grid"
        if a["a_stage"] == "shared":
            if blocks > arch.sms:
                return f"{blocks} blocks of one an SM (the staged activation) take more than one wave of {arch.sms}"
            if blocks < SHARED_FILL * arch.sms:
                return f"{blocks} blocks of one an SM leave more than {1 - SHARED_FILL:.0%} of the {arch.sms} SMs idle"
            return None
        return None if blocks >= arch.sms else f"{blocks} blocks leave SMs idle ({arch.sms})"
    g.constrain("blocks", "arch", ["octets", "row_groups", "a_stage"], fills,
                "a block for every SM at least (the cost model has no launch-floor terms: it is fitted at N >= 4096); "
                "with A in shared memory one block an SM, in one wave")

    a_tma = _a_by_tma(views)

    def staged(a: Assignment) -> str | None:
        if a["a_stage"] != "shared":
            return None
        if a_tma:
            return a_tma
        k_slice = _k_slice(views.k, SHARED_TILING[2])
        if views.k != SHARED_TILING[2] * k_slice or k_slice % (2 * ROUND_SEGMENTS * SEGMENT):
            return (f"K = {views.k} is not {SHARED_TILING[2]} slices of whole round pairs (a multiple of "
                    f"{2 * SHARED_TILING[2] * ROUND_SEGMENTS * SEGMENT}): a guarded loop is measured slower than "
                    "hopper")
        need = _shared_smem(views, a["row_groups"])
        return None if need <= arch.smem_per_block else (
            f"A's {SHARED_TILING[0]} x {views.k} staged with the partial sums take {need} B > {arch.smem_per_block} B")
    g.constrain("A staged by TMA", "problem", ["a_stage", "row_groups"], staged,
                "one 2-d tensor map of A (one product, rows a strided run of 16-byte multiples); its whole K fits "
                "the block's shared memory, in whole round pairs a warp (the measured loop, with no guard)")
    return g


def _cost(views: ProblemViews, arch: Arch):
    """Estimated µs, only to rank candidates: B's bytes at the fitted share of DRAM bandwidth over the SMs the
    blocks reach, stretched by a partly filled last wave (and, with 16 tokens through L1, by waves past the first).
    With A in shared memory: one wave of one block an SM at its own fitted share."""
    elem = views.operands["B"].elem_bytes
    dram = arch.dram_gbps * 1e3  # bytes per µs

    def cost(a: Assignment) -> float:
        tokens = a["tokens"]
        threads = 32 * a["k_warps"] * a["row_groups"]
        bn = 8 * a["octets"] * a["row_groups"]
        blocks = _blocks(views, a["octets"], a["row_groups"])
        if a["a_stage"] == "shared":
            busy = min(blocks, arch.sms)
            return (LAUNCH_US + MEMORY_LATENCY_US
                    + blocks * bn * views.k * elem / (STREAM_SHARE_SHARED * dram * busy / arch.sms))
        regs = REGS[(tokens, a["octets"])]
        resident = max(1, min(arch.regs_per_sm // (threads * regs), arch.max_threads_per_sm // threads,
                              arch.max_blocks_per_sm))
        waves = blocks / (arch.sms * resident)
        idle = 1.0 - waves / math.ceil(waves)
        busy = min(blocks, arch.sms)
        stream = blocks * bn * views.k * elem / (STREAM_SHARE[tokens] * dram * busy / arch.sms)
        stream *= (1 + WAVE_TAIL * idle) / THREADS_SHARE ** math.log2(threads / 128)
        if tokens == 16:
            stream *= 1 + EXTRA_WAVES_16 * max(0.0, waves - 1) / waves
        return LAUNCH_US + MEMORY_LATENCY_US + stream

    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    return gated_problem(NAME, views, arch, gates, build_tiling_graph, _cost, _plan)


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> TcGemvPlan:
    tokens, groups = a["tokens"], a["row_groups"]
    bn = 8 * a["octets"] * groups
    tiles_n = math.ceil(views.n / bn)
    threads = 32 * a["k_warps"] * groups
    checks = {x: 16 if views.operands[x].vector_elems < VEC else 0 for x in "AB"}
    shared = a["a_stage"] == "shared"
    act_bytes, barriers = _shared_layout(views, a["k_warps"]) if shared else (0, 0)
    partial = a["k_warps"] * tokens * (bn + RED_PAD) * 4
    return TcGemvPlan(
        tokens=tokens, octets=a["octets"], k_warps=a["k_warps"], unroll=ROUND_SEGMENTS, threads=threads,
        block_n=bn, tiles_n=tiles_n, blocks=_blocks(views, a["octets"], groups),
        k_slice=_k_slice(views.k, a["k_warps"]),
        regs=SHARED_REGS if shared else REGS[(tokens, a["octets"])], red_pitch=bn + RED_PAD,
        smem_bytes=_shared_smem(views, groups) if shared else partial, whole_segments=views.k % SEGMENT == 0,
        whole_blocks=views.n % bn == 0, a_check=checks["A"], b_check=checks["B"],
        index_type="long long" if views.needs_int64 else "int",
        decisions=decisions, feasible=feasible, cost_us=cost_us,
        a_stage=a["a_stage"], row_groups=groups,
        a_row_stride=views.roles["m"].segments[0].stride("A") if shared else 0,
        act_bytes=act_bytes, barriers=barriers, assignment=dict(a),
    )


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (TcGemvPlan,), "dgemm_cli.families.tcgemv.render",
                      formal="dgemm_cli.families.tcgemv.index")
