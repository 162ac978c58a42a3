"""Kernel family `wqtc`: 4-bit weights in deepgemm's dg layout (`deepgemm pack --to dg`) or in GPTQ's words of eight
k, or 8-bit weights contiguous along k (nn.Linear's [n, k]), dequantized in registers into mma.sync fragments, times
f16/bf16 activations on the tensor cores, for decode (up to 64 rows, run-time rows too; pure;
docs/design/weight-only.md, templates/dg/wqtc.cuh).

In either layout lane t's mma k slots take the chunk's k 16t..16t+15 (the sum's order is free), so a lane's
activations of a chunk are one run of 16 k of a row and lie under one scale. The dg layout holds each lane's A
fragments of a 16 n x 64 k chunk in one 16-byte word run, so the weights stream from DRAM in whole 512-byte chunks a
warp, dequantized by lop3 and the magic exponent (two instructions a pair of weights, three with zero points) and
never staged. GPTQ's words are read as they lie: a lane loads 4 words a chunk (a byte permute more a pair); 8-bit
weights too: a lane loads its 16 k of each of its two columns, one 16-byte load each. The
tiling graph decides the block's K split (WK warps), the strips a warp (NS: the activations' fragments,
read through L1, serve NS strips) and the chunks in flight a strip (DEPTH); the row tiles (MT) follow M. The cost
model is the weight stream at the DRAM rate, stretched by the waves of blocks, the bytes in flight and the L1
traffic of the activations; set a priori.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import INT32_MAX, ProblemViews, grid_too_large

NAME = "wqtc"
SUMMARY = ("4-bit weights (dg layout, GPTQ's words) or k-contiguous 8-bit ones dequantized in registers into mma.sync "
           "fragments, f16/bf16 activations on the tensor cores: decode up to 64 rows at the weight stream's speed")
RUNTIME_ROWS = True  # the rows are masked against a run-time M; MT tiles cover the most
MAX_M = 64  # rows: 8 mma tiles of 8
CHUNK_K, STRIP_N = 64, 16  # a chunk: 16 columns x 64 k, 512 bytes of 4-bit weights (1024 of 8-bit)
WARPS_K = (2, 4, 8)  # warps a block, each a slice of K
STRIPS = (1, 2, 4)  # 16-column strips a warp
DEPTHS = (1, 2, 4)  # chunks in flight a strip (1: none ahead); the cost model prices them alike (_cost)
MAX_SUMS = 32  # f32 sums a lane (NS x MT x 4): registers beside the weights in flight and the fragments
# A thread's registers, estimated (dg/wqtc.cuh's kernel): the sums, the ring (a chunk's 4 words, and
# its scales and zero points, a register each, a strip), the activations' fragments (a chunk's four k tiles for up
# to two row tiles, else one), the converted scale pairs and the addressing; at most REGISTER_BUDGET, 8 under the
# 128 that ptxas may use: the estimate leaves out the epilogue's live values (C read back, alpha, beta), and an
# estimate of 124 (4 row tiles, depth 4, a scale a 16-k tile, f32 C read back) spilled.
BASE_REGISTERS = 48
REGISTER_BUDGET = 120
# Cost model (a priori): a launch; the DRAM stream of the packed weights; the bytes a warp keeps in flight against
# what the DRAM's latency needs (IN_FLIGHT_BYTES an SM); L1 moving the activations' fragments (L1_BYTES_CLK an SM).
LAUNCH_US = 2.0
IN_FLIGHT_BYTES = 32 * 1024
L1_BYTES_CLK = 64
RESIDENT_WARPS = 16  # warps an SM holds at about 128 registers a thread


def blocks_per_sm(wk: int) -> int:
    """Blocks of WK warps an SM holds at RESIDENT_WARPS: what the cost model counts and the launch bound asks for."""
    return max(1, RESIDENT_WARPS // wk)


@dataclass(frozen=True)
class WqtcPlan:
    """WK warps a block over NS strips of 16 columns, MT tiles of 8 rows, DEPTH chunks in flight a strip."""

    family = NAME
    wk: int
    ns: int
    mt: int
    depth: int
    strips: int  # ceil(N / 16)
    k_chunks: int  # ceil(K / 64)
    blocks: int
    group_k: int  # k indices one scale covers (K or more: one a column)
    quant_loads: int  # scale (and zero-point) loads a chunk of a strip (0 or 1): quant_loads_a_chunk, the traits' QPC
    layout: str  # "dg" (deepgemm's chunks), "k_words" (eight consecutive k a word, GPTQ's) or "k_bytes" (8-bit)
    a_pairs: bool  # A's (k, k + 1) pairs are one 32-bit load
    a_vec16: bool  # A's 8 k from a multiple of 8 are one 16-byte load
    a_pairs_why: str
    b_checked_align: int  # k_bytes with less than 16 bytes promised: the launcher checks B for 16 (0: no check)
    index_type: str
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)

    arch_features = frozenset()

    @property
    def threads(self) -> int:
        return 32 * self.wk

    @property
    def min_blocks(self) -> int:
        """Blocks an SM the kernel's launch bound asks for: RESIDENT_WARPS warps, so that ptxas may take the 128
        registers a thread that the register estimate and the cost model assume (without the bound it aims lower
        and spills)."""
        return blocks_per_sm(self.wk)

    @property
    def runtime_align(self) -> dict[str, int]:
        """8-bit weights whose spec promises less than 16 bytes: B checked for 16 at run time (the wq fallback takes
        the other pointers); else nothing beyond the spec's promise (the gates ask it for the dg layout's loads and
        A's pairs)."""
        return {"B": self.b_checked_align} if self.b_checked_align else {}

    @property
    def smem_bytes(self) -> int:
        return 0  # dynamic: none (the parked sums are static shared memory)

    @property
    def static_smem_bytes(self) -> int:
        return max(self.wk - 1, 1) * self.ns * self.mt * 4 * 32 * 4

    @property
    def summary(self) -> str:
        return (f"{self.wk} warps a block split K, {self.ns} strip(s) of 16 columns a warp, {self.mt} tile(s) of 8 "
                f"rows, {self.depth} chunks in flight a strip, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        b_lines = {
            "dg": "B: one 16-byte load a lane a chunk (the lane's four mma A fragments), not allocated in L1; "
                  "dequantized by lop3 into the magic exponent, a subtraction and a multiply (fma with zero points)",
            "k_words": "B: GPTQ's words read as they lie, 4 a lane a chunk (lane t's mma k slots take the chunk's k "
                       "16 t .. 16 t + 15: two words of each of its two columns); a byte permute and a lop3 into the "
                       "magic exponent make a register's pair, one fma the integers, a multiply (fma with zero "
                       "points) the weights",
            "k_bytes": "B: bytes read as they lie, one 16-byte load a lane for each of its two columns a chunk (lane "
                       "t's mma k slots take the chunk's k 16 t .. 16 t + 15), not allocated in L1; a byte permute "
                       "into the magic exponent and a subtraction make a register's pair (bf16: through f32), a "
                       "multiply the weights",
        }
        return [f"=> {self.blocks} blocks of {self.threads} threads over {self.strips} strips of 16 columns; warp w "
                f"takes chunks w, w + {self.wk}, ... of its strips' {self.k_chunks} (64 k, "
                f"{chunk_bytes(self.layout)} bytes each), index type {self.index_type}",
                b_lines[self.layout] + f"; a scale covers {self.group_k} k"
                + ("; B's pointer is checked for 16-byte alignment at run time (the spec promises less), the wq "
                   "fallback takes the others" if self.b_checked_align else ""),
                f"A: {self.a_pairs_why}; its fragments through L1, zero past M and K",
                f"sums: f32 in mma.m16n8k16 (C^T tiles 16 n x 8 m); warps 1..{self.wk - 1} park theirs in "
                f"{self.static_smem_bytes} B of shared memory and warp 0 adds them in warp order (bit-identical run "
                "to run)"]

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "threads": self.threads, "smem_bytes": self.smem_bytes,
                "decisions": [x.to_dict() for x in self.decisions]}


def _k_letter(views: ProblemViews) -> str | None:
    letters = views.roles["k"].letters
    return letters[0] if len(letters) == 1 else None


def chunk_bytes(layout: str) -> int:
    """Bytes of a 16-column x 64-k chunk of B."""
    return 1024 if layout == "k_bytes" else 512


def layout_of(views: ProblemViews) -> str | None:
    """How the family reads B: "dg" (deepgemm's chunks), "k_words" (4-bit values packed along the k letter in the
    linear order: GPTQ's qweight, any strides), "k_bytes" (8-bit values whose k letter is contiguous), or None (not
    this family's: AWQ's order, packed along n, 8-bit with k strided)."""
    b = views.spec.B
    k = _k_letter(views)
    if b.dtype in ("int8", "uint8"):
        return "k_bytes" if k is not None and b.stride_of(k) == 1 else None
    if b.dtype not in ("int4", "uint4") or b.packing is None:
        return None
    if b.packing.order == "dg":
        return "dg"
    if b.packing.order == "linear" and k is not None and b.packing.along == k:
        return "k_words"
    return None


def group_k(views: ProblemViews) -> int:
    """The k indices one scale (and zero point) covers: the scales' block along the k letter (K or more: one a
    column)."""
    sc, = views.spec.scales
    return sc.block(_k_letter(views))


def row_tiles(views: ProblemViews) -> int:
    """8-row mma tiles of C a warp holds (MT): ceil(M / 8)."""
    return -(-views.m // 8)


def quant_loads_a_chunk(views: ProblemViews) -> int:
    """Scale (and zero-point) loads a 64-k chunk of a strip: none where one scale a column covers K (read once), else
    one (a lane's k of a chunk are one 16-k tile, in one group: the gates ask groups of whole tiles); rendered as the
    traits' QPC."""
    return 0 if group_k(views) >= views.k else 1


def a_loads(views: ProblemViews) -> tuple[bool, bool, str]:
    """How the activations load, and why: whether a pair (k, k + 1), k even, of a row of A is one aligned 32-bit
    load; whether 8 k from a multiple of 8 are one aligned 16-byte load (a lane takes 16 consecutive k of a chunk)."""
    spec = views.spec
    a, k = spec.A, _k_letter(views)
    if a.stride_of(k) != 1:
        return False, False, f"k is not A's contiguous letter (stride {a.stride_of(k)}): element loads"

    def misaligned(elements: int, nbytes: int) -> str | None:
        off = [x for x in views.roles["m"].letters if a.stride_of(x) % elements]
        return (f"letter {off[0]}'s stride {a.stride_of(off[0])} is not a multiple of {elements}" if off else
                f"the offset {a.offset} is not a multiple of {elements}" if a.offset % elements else
                f"align {a.align} promises less than {nbytes} bytes" if a.align < nbytes else None)

    why_not_pairs = misaligned(2, 4)
    if why_not_pairs:
        return False, False, f"k-contiguous, but {why_not_pairs}: element loads"
    why_not_vec = misaligned(8, 16)
    if why_not_vec:
        return True, False, f"k-contiguous, but {why_not_vec}: a lane's 16 k of a chunk in 32-bit pairs"
    return True, True, "k-contiguous, rows 16-byte aligned: a lane's 16 k of a chunk in two 16-byte loads"


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    spec = views.spec
    if spec.inputs != "weight-only":
        return [("integer weights", "this family runs integer weights only (docs/design/weight-only.md)")]
    out = []
    b = spec.B
    if layout_of(views) is None:
        out.append(("weight layout", f"B is {b.dtype}{' (' + b.packing.describe(b.strides) + ')' if b.packing else ''}"
                                     ": this family reads 4-bit weights in the dg layout (`deepgemm pack --to dg`) or "
                                     "in words of eight consecutive k (GPTQ's, `deepgemm pack --to gptq`), and 8-bit "
                                     "ones contiguous along k (nn.Linear's [n, k])"))
    if arch.cc < (8, 0):
        out.append(("mma.sync", f"{arch.name} has no bf16 mma.sync: sm_80 and later"))
    if views.roles["batch"].size > 1:
        out.append(("batch", "a batch of weight matrices (a letter of A, B and C): not taken"))
    if views.m > MAX_M:
        out.append(("decode rows", f"M = {views.m}: more than the {MAX_M} rows of 8 mma tiles (the tiled kernel is "
                                   "docs/design/weight-only.md's slice 4)"))
    if _k_letter(views) is None or len(views.roles["n"].letters) != 1:
        out.append(("one k and one n", "the dg layout packs one k letter by one n letter"))
    elif layout_of(views) == "dg" and b.align < 16:
        out.append(("16-byte loads", f"B's align {b.align}: a lane loads its 16 bytes of a chunk at once. Fix: "
                                     "`align: 16` (deepgemm pack's words are a dense run)"))
    elif layout_of(views) == "k_bytes" and (why := _byte_runs_refusal(views)):
        out.append(("16-byte loads", why))
    elif (g := group_k(views)) % 16 and g < views.k:
        out.append(("whole k tiles", f"a scale covers {g} k: not a multiple of the 16-k mma tile"))
    return out


def _byte_runs_refusal(views: ProblemViews) -> str | None:
    """Why a lane's 16 k of a column of 8-bit weights cannot be one 16-byte load on a 16-byte aligned pointer, or
    None. (The pointer itself is checked at run time where the spec promises less: `b_checked_align`.)"""
    b = views.spec.B
    n = views.roles["n"].letters[0]
    why = (f"B's stride {b.stride_of(n)} along {n} is not a multiple of 16" if b.stride_of(n) % 16 else
           f"B's offset {b.offset} is not a multiple of 16" if b.offset % 16 else None)
    return None if why is None else (f"{why}: a lane loads 16 k of a column at once, so every column must start "
                                     "16 bytes apart from the pointer")


def registers(views: ProblemViews, ns: int, depth: int) -> int:
    """A thread's registers, estimated (REGISTER_BUDGET's comment)."""
    mt = row_tiles(views)
    quant = quant_loads_a_chunk(views) * (2 + (2 if views.spec.zeros else 0))  # rows g, g + 8: scale, zero point
    words = chunk_bytes(layout_of(views)) // 128  # the lane's words of a chunk
    return 4 * ns * mt + depth * ns * (words + quant) + (4 if mt <= 2 else 1) * mt * 2 + 4 * ns + BASE_REGISTERS


def build_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    g = ConstraintGraph()
    g.node("warps_k", WARPS_K, "warps a block, each a slice of K's chunks; their sums meet in shared memory")
    g.node("strips", STRIPS, "16-column strips a warp: the activations' fragments serve each")
    g.node("depth", DEPTHS, "64-k chunks a strip kept in flight (16-byte loads a lane)")
    mt = row_tiles(views)
    # A tiling choice forced by M: a kernel's mma and activation work grow with it, so run-time ranges planned
    # alike but for their row tiles keep kernels of their own.
    g.node("row_tiles", (mt,), "8-row mma tiles of C a warp holds: ceil(M / 8)")
    chunks = -(-views.k // CHUNK_K)
    strips = -(-views.n // STRIP_N)

    def sums_fit(a: Assignment) -> str | None:
        if a["strips"] * mt * 4 > MAX_SUMS:
            return f"{a['strips']} strips x {mt} row tiles x 4 = {a['strips'] * mt * 4} f32 sums a lane (> {MAX_SUMS})"
        return None

    def warps_used(a: Assignment) -> str | None:
        if a["warps_k"] > 2 and a["warps_k"] // 2 >= chunks:
            return f"K = {views.k} has {chunks} chunks: half of {a['warps_k']} warps would idle"
        return None

    def strips_used(a: Assignment) -> str | None:
        if a["strips"] > 1 and a["strips"] // 2 >= strips:
            return f"N = {views.n} has {strips} strips: half of a warp's {a['strips']} would be empty"
        return None

    def registers_fit(a: Assignment) -> str | None:
        ns, depth = a["strips"], a["depth"]
        regs = registers(views, ns, depth)
        if regs > REGISTER_BUDGET:
            return f"about {regs} registers a thread (> {REGISTER_BUDGET}): {depth} chunks in flight of {ns} strip(s)"
        return None

    g.constrain("sums in registers", "registers", ["strips"], sums_fit, f"at most {MAX_SUMS} f32 sums a lane")
    g.constrain("registers", "registers", ["strips", "depth"], registers_fit,
                f"at most about {REGISTER_BUDGET} registers a thread (no spills)")
    g.constrain("warps used", "problem", ["warps_k"], warps_used, "no warp without chunks")
    g.constrain("strips used", "problem", ["strips"], strips_used, "no warp with empty strips")
    return g


def _cost(views: ProblemViews, arch: Arch):
    spec = views.spec
    weight_bytes = spec.B.span * spec.B.elem_bytes
    other_bytes = views.m * views.k * spec.A.elem_bytes + views.m * views.n * spec.C.elem_bytes
    mem_us = (weight_bytes + other_bytes) / (arch.dram_gbps * 1e3)
    strips = -(-views.n // STRIP_N)
    chunks = -(-views.k // CHUNK_K)
    mt = row_tiles(views)
    chunk = chunk_bytes(layout_of(views))

    def cost(a: Assignment) -> float:
        wk, ns = a["warps_k"], a["strips"]  # the ring's depth: priced alike, the tie goes to one chunk
        blocks = -(-strips // ns)
        per_sm = blocks_per_sm(wk)
        resident = min(blocks, arch.resident_blocks(per_sm))
        waves = -(-blocks // resident)
        wave_use = blocks / (waves * resident)  # the last wave's empty slots stretch the stream
        # Bytes an SM has requested at once: a chunk a strip of each resident warp. The ring's deeper chunks are
        # left out: level-2 tunes at M = 1 and 16 (GPTQ words, 4096 -> 14336, H100) ran a ring of one chunk fastest
        # at the fastest warps and strips, and deeper rings level or slower (docs/RESULTS.md, "Weight-only").
        in_flight = resident * wk * ns * chunk / arch.sms
        latency = min(1.0, in_flight / IN_FLIGHT_BYTES)
        # Each chunk of a strip reads MT fragments of 8 rows x 64 k through L1, once for NS strips.
        l1_us = strips * chunks * mt * 8 * CHUNK_K * spec.A.elem_bytes / ns / (
            L1_BYTES_CLK * arch.sms * arch.clock_ghz * 1e3)
        return LAUNCH_US + max(mem_us / (wave_use * latency), l1_us) + 0.05 * wk
    return cost


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> WqtcPlan:
    strips = -(-views.n // STRIP_N)
    blocks = -(-strips // a["strips"])
    if blocks > INT32_MAX:
        raise grid_too_large(views, blocks, "blocks")
    pairs, vec16, why = a_loads(views)
    layout = layout_of(views)
    return WqtcPlan(wk=a["warps_k"], ns=a["strips"], mt=a["row_tiles"], depth=a["depth"], strips=strips,
                    k_chunks=-(-views.k // CHUNK_K), blocks=blocks, group_k=group_k(views),
                    quant_loads=quant_loads_a_chunk(views), layout=layout,
                    a_pairs=pairs, a_vec16=vec16, a_pairs_why=why,
                    b_checked_align=16 if layout == "k_bytes" and views.spec.B.align < 16 else 0,
                    index_type="long long" if views.needs_int64 else "int", decisions=decisions,
                    feasible=feasible, cost_us=cost_us, assignment=dict(a))


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The tiling graph and the cost model, once the gates allow the problem."""
    return gated_problem(NAME, views, arch, gates, build_graph, _cost, _plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (WqtcPlan,), "dgemm_cli.families.wqtc.render",
                      inputs="weight-only", formal="dgemm_cli.families.wqtc.index", fallback="wq")
