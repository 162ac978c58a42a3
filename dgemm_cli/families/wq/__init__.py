"""Kernel family `wq`: integer weights (int4/uint4 packed eight to a 32-bit word, int8/uint8) with their scales and
zero points, dequantized in registers and multiplied on the CUDA cores in f32 (pure; docs/design/weight-only.md).

It runs every view, packed layout (GPTQ's, AWQ's, any `{along, order}`, deepgemm's `dg`), scale and zero-point
layout and any M: the family that makes every weight-only spec a correct kernel. A block owns COLS columns (a
thread each, so that consecutive lanes read consecutive columns' words) and MT rows; its thread rows split K, and
each thread dequantizes a weight once for its MT rows. The partial sums meet in shared memory in a fixed order
(bit-identical run to run). Each value reads its word through L1, so a word of eight values packed along k is
fetched once and hit seven times: the kernel moves the packed bytes from DRAM, not eight times as many.

Its speed is the CUDA cores': it is a decode kernel at best (M of a few rows), far from the 4-bit stream that the
tensor-core decode family `wqtc` reaches on the dg layout, and compute-bound past a few rows (the tiled kernel of
docs/design/weight-only.md's slice 4). `explain` says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import INT32_MAX, ProblemViews, grid_too_large

NAME = "wq"
SUMMARY = ("integer weights (int4/uint4 packed, int8/uint8) dequantized in registers with their scales and zero "
           "points, on the CUDA cores: every view and packed layout, any M")
# One kernel serves a range of run-time rows: the rows are a loop bound (MT a block), not a register array's size.
RUNTIME_ROWS = True
THREADS = (128, 256)
COLS = 32  # columns a block: a warp's lanes along n
ROWS = (1, 2, 4, 8)  # rows a block (a thread's sums)
# Cost model (µs), only to rank this family's candidates: the launch, the packed bytes at DRAM speed, and the FMAs
# with a dequantization each (shifts, masks, the scale's load) at a share of the FFMA rate; set a priori.
LAUNCH_US = 2.0
DEQUANT_ISSUE = 0.15  # share of the FFMA peak a weight's dequantization and its MT FMAs reach together


@dataclass(frozen=True)
class WqPlan:
    """COLS columns and MT rows a block; THREADS / COLS thread rows split K."""

    family = NAME
    threads: int
    cols: int
    rows: int  # MT
    ksplit: int  # thread rows along K
    tiles_n: int
    blocks: int  # at the largest M
    b_reads: str  # how a warp's loads of B meet memory, for `explain`
    index_type: str
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)

    arch_features = frozenset()

    @property
    def runtime_align(self) -> dict[str, int]:
        """Nothing beyond the spec's promise: every load is of one element (word)."""
        return {}

    @property
    def smem_bytes(self) -> int:
        return 0  # dynamic: none (the partial sums are static shared memory)

    @property
    def static_smem_bytes(self) -> int:
        return self.ksplit * self.rows * self.cols * 4

    @property
    def summary(self) -> str:
        return (f"{self.cols} columns x {self.rows} row(s) a block of {self.threads} threads, K split over "
                f"{self.ksplit} thread rows, {self.blocks} blocks")

    def detail_lines(self) -> list[str]:
        return [f"=> {self.blocks} blocks = {self.tiles_n} column tiles x row tiles of {self.rows}; {self.threads} "
                f"threads, index type {self.index_type}",
                f"thread (row s, column c) dequantizes B at (k, c) for k = s, s + {self.ksplit}, ... (its word "
                "through L1) and adds it times A into its rows' f32 sums; the block adds the "
                f"{self.ksplit} partial sums in order ({self.static_smem_bytes} B of shared memory): bit-identical "
                "run to run",
                f"B: {self.b_reads}",
                "speed: the CUDA cores' (a decode kernel of a few rows); wqtc runs the dg layout on the tensor cores "
                "(`deepgemm pack --to dg`), the tiled kernel for large M is docs/design/weight-only.md's slice 4"]

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "smem_bytes": self.smem_bytes,
                "decisions": [x.to_dict() for x in self.decisions]}


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    if views.spec.inputs != "weight-only":
        return [("integer weights", "this family runs integer weights only (docs/design/weight-only.md)")]
    out = []
    if views.roles["batch"].size > 1:
        out.append(("batch", "a batch of weight matrices (a letter of A, B and C): not taken yet"))
    return out


def build_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    g = ConstraintGraph()
    g.node("threads", THREADS, f"threads of a block: {COLS} columns x threads / {COLS} thread rows along K")
    g.node("rows", ROWS, "rows (flat m) a block: each thread's f32 sums, a weight dequantized once for all of them")
    m = views.m

    def rows_fit(a: Assignment) -> str | None:
        if a["rows"] > 1 and a["rows"] // 2 >= m:
            return f"M = {m}: a block of {a['rows']} rows leaves half of them empty"
        return None
    g.constrain("rows used", "problem", ["rows"], rows_fit, "no row tile twice the rows there are")
    return g


def _cost(views: ProblemViews, arch: Arch):
    b = views.spec.B
    weight_bytes = b.span * b.elem_bytes
    a_bytes = views.m * views.k * views.spec.A.elem_bytes
    mem_us = (weight_bytes + a_bytes) / (arch.dram_gbps * 1e3)
    fma_us_per = 1.0 / (arch.fma_flops_per_sm_clk / 2 * arch.sms * arch.clock_ghz * 1e3)  # µs an FMA, whole GPU

    def cost(a: Assignment) -> float:
        tiles_m = -(-views.m // a["rows"])
        # Each weight is dequantized once a row tile; its MT FMAs follow (empty rows of the last tile included).
        work = views.n * views.k * tiles_m * (a["rows"] + 4)
        return LAUNCH_US + max(mem_us * tiles_m, work * fma_us_per / DEQUANT_ISSUE) + 0.01 * a["threads"] / 128
    return cost


def b_reads(views: ProblemViews) -> str:
    """How a warp's 32 lanes (32 consecutive columns, one k) read B: whole words in a row where B's innermost n
    letter steps one word (or byte), else one sector a lane, and what layout reads coalesced."""
    b = views.spec.B
    inner_n = views.roles["n"].letters[-1] if views.roles["n"].letters else None
    if b.packing is not None and b.packing.order == "dg":
        return ("dg layout: 8 consecutive columns' words at one k are 16 words apart (one a lane of their mma tile): "
                "a warp's 32 words span 16 lines; the layout is the tensor-core decode kernel's (wqtc)")
    if inner_n is not None and b.stride_of(inner_n) == 1:
        if b.packing is not None and b.packing.along == inner_n:
            return "coalesced: the 32 columns are 4 consecutive words (eight columns a word)"
        unit = "bytes" if b.packing is None else "words"
        return f"coalesced: the 32 columns' values of one k are consecutive {unit}"
    faster = ("`deepgemm pack --to gptq` ([k/8, n] row-major words) or `--to awq`" if b.packing is not None else
              "the weight stored [k, n] (n-contiguous bytes)")
    return (f"strided: consecutive columns are {b.stride_of(inner_n) if inner_n else 0} elements apart, a sector "
            f"a lane; n-contiguous weights read coalesced: {faster}")


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> WqPlan:
    tiles_n = -(-views.n // COLS)
    blocks = tiles_n * -(-views.m // a["rows"])
    if blocks > INT32_MAX:
        raise grid_too_large(views, blocks, "blocks")
    return WqPlan(threads=a["threads"], cols=COLS, rows=a["rows"], ksplit=a["threads"] // COLS, tiles_n=tiles_n,
                  blocks=blocks, b_reads=b_reads(views), index_type="long long" if views.needs_int64 else "int",
                  decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a))


def problem(views: ProblemViews, arch: Arch) -> Problem:
    """The tiling graph and the cost model, once the gates allow the problem."""
    return gated_problem(NAME, views, arch, gates, build_graph, _cost, _plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (WqPlan,), "dgemm_cli.families.wq.render",
                      inputs="weight-only", formal="dgemm_cli.families.wq.index")
