"""Kernel family `cpu`: the host backend's one family (pure). BLIS's loops over strided views, the TBLIS way.

The generated C++ (dg/cpu_gemm.hpp, instantiated by the family's traits) never indexes a view in its inner loop:
per call it builds, for each operand and role, the element offset of every index of that role (a scatter vector:
the view's segments in mixed radix), and packs blocks of A and B through them into contiguous micro-panels of
f32, converting 16-bit inputs on the way. The micro-kernel then reads only packed panels, so a contraction over
any strides runs at GEMM speed without a transposed copy of a whole operand; where a packed range is contiguous in
the view, packing copies it with vector loads.

Loops (BLIS): n in panels of NC, k in blocks of KC (B's KC x NC panel packed once and shared by the threads),
m in blocks of MC (A's MC x KC block packed by the thread that owns it, OpenMP over these), then the register
micro-tile MR x NR of the ISA the compiler targets (-march: AVX-512, AVX2 + FMA, or portable C++). The sum over k
of each output element ends in f32 and goes through the traits' `finish_run` once: alpha, beta * C, the epilogue's
steps, the store in the output's dtype. Small M (decode) streams B once without packing it.

KC, MC and NC default to what the engine derives at run time from the host's cache sizes (sysconf), the analytical
model of Low et al. 2016; a spec's `plan:` may pin them (`kc`, `mc`, `nc`).
Modules: cost.py prices a plan; render.py renders its traits (templates/cpu/); this one holds the plan, the gates,
the graph and the family.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.cpu.cost import HOST, MICRO_TILES, cpu_cost
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import ROLES, ProblemViews

NAME = "cpu"
SUMMARY = ("the host (C++17): operands packed through scatter vectors into micro-panels, a register micro-tile of "
           "the ISA -march targets (AVX-512, AVX2, portable), OpenMP over the blocks")
RUNTIME_ROWS = True  # the engine takes the rows' extent at run time (Args::m_extent)
MAX_SEGMENTS = 8  # dg::cpu::kMaxSegs: (size, stride) pairs a role
# The block sizes a spec may pin; 0 is the engine's own, from the host's caches at run time.
KC = (0, 64, 128, 192, 256, 384, 512, 768, 1024)
MC = (0, 48, 96, 144, 192, 288, 384, 576, 768)
NC = (0, 256, 512, 1024, 2048, 4096, 8192)
ELEM = 4  # packed panels hold f32
SMALL_M = 4  # dg::cpu::kSmallM: rows up to this take the unpacked small-M path where B allows it


@dataclass(frozen=True)
class CpuPlan:
    family = NAME
    kc: int  # k of a packed block (0: from the host's L1 at run time)
    mc: int  # rows of a packed A block (0: from the host's L2)
    nc: int  # columns of a packed B panel (0: from the host's L3)
    packing: dict[str, str]  # A, B -> how packing reads the view (contiguous runs or a gather)
    b_streams: str | None  # the direction B is contiguous along (n or k) for the unpacked small-M path, or None
    transposed: bool  # the output is contiguous along m, not n: the engine runs C^T = B^T A^T
    # The paths the engine takes at the rows the spec allows (engine_paths), the only ones its traits instantiate:
    # bit m - 1 of small_rows for m rows on the small-M path; bit 0 of blocked the blocked path as A B, bit 1 as
    # C^T = B^T A^T (A B where it takes none: the fallback).
    small_rows: int
    blocked: int
    segments: dict[str, int]  # role -> (size, stride) segments of the role
    decisions: tuple[Decision, ...]
    feasible: int
    cost_us: float
    assignment: dict[str, Any] = field(default_factory=dict)

    smem_bytes = 0
    threads = 0  # OpenMP's, or the caller's `threads` argument
    arch_features = frozenset()  # no CUDA feature (arch.FEATURES)

    @property
    def runtime_align(self) -> dict[str, int]:
        return {}  # element accesses and unaligned vector loads: nothing beyond the spec's promise

    @property
    def summary(self) -> str:
        blocks = ", ".join(f"{name} {v}" if v else f"{name} from the host's caches"
                           for name, v in (("KC", self.kc), ("MC", self.mc), ("NC", self.nc)))
        return f"packed micro-panels, {blocks}, OpenMP over the blocks"

    def detail_lines(self) -> list[str]:
        """What `explain` prints and the .cpp's header comment states below the decisions."""
        tiles = "; ".join(f"{isa}: {mr} x {nr}" for isa, (mr, nr) in MICRO_TILES.items())
        rows, cols = ("B", "A") if self.transposed else ("A", "B")
        out = [f"micro-tile MR x NR of the ISA the compiler targets (-march): {tiles}",
               "roles as (size, stride) segments: " + ", ".join(f"{r} {n}" for r, n in self.segments.items() if n),
               f"{rows} packed into MR-row micro-panels (MC x KC a block, one a thread), {cols} into NR-column "
               "micro-panels (a KC x NC panel shared by the threads), both f32: " + "; ".join(
                   f"{x}: {how}" for x, how in self.packing.items()),
               "each output element's f32 sum goes once through alpha, beta * C, the epilogue and the store in "
               "the output's dtype, along the output's contiguous direction",
               ("the output is contiguous along m and not n: the engine computes C^T = B^T A^T, so that a "
                "micro-tile's rows are runs of consecutive outputs" if self.transposed else
                "the output's micro-tiles run along n"),
               (f"at run time, M <= {SMALL_M} rows stream B once unpacked (B is contiguous along {self.b_streams}: "
                + ("rows of B, each thread its share of k" if self.b_streams == "n" else
                   "dot products, each thread its share of the columns") + ")" if self.b_streams else
                f"B is contiguous along neither n nor k: M <= {SMALL_M} rows run the packed path too"),
               "threads: the caller's `threads`, or OpenMP's default when it passes 0"]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **asdict(self), "decisions": [x.to_dict() for x in self.decisions]}


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    out = []
    if arch.backend != "cpu":
        out.append(("backend", f"{arch.name} is a GPU target; the cpu family renders C++ for the host"))
    deep = [f"{r} has {len(views.roles[r].segments)}" for r in ROLES if len(views.roles[r].segments) > MAX_SEGMENTS]
    if deep:
        out.append(("segments", f"{'; '.join(deep)} (size, stride) segments, more than the engine's "
                                f"{MAX_SEGMENTS} (dg::cpu::kMaxSegs)"))
    return out


def _packing(views: ProblemViews, operand: str) -> str:
    """How packing reads `operand`: along its stride-1 role in runs (vector loads across a micro-panel's width, or
    in order along k), else as a gather through the scatter vectors."""
    unit = views.operands[operand].unit_role
    if unit is None:
        return "no stride-1 role (a gather through the scatter vectors)"
    seg = views.roles[unit].inner()
    return f"contiguous along {unit} (runs of {seg.size})"


def scatter_steps_by_one(views: ProblemViews, operand: str, role: str) -> bool:
    """Whether `operand`'s whole scatter vector of `role` is 0, 1, 2, ... (the engine's is_contiguous over the role's
    offset table): each segment's stride the product of the sizes inside it, the innermost 1 (a role of size 1
    too)."""
    inner = 1
    for seg in reversed(views.roles[role].segments):
        if seg.stride(operand) != inner:
            return False
        inner *= seg.size
    return True


def steps_one(views: ProblemViews, operand: str, role: str) -> bool:
    """The role's first two indices are one element apart in `operand` (its innermost segment has stride 1)."""
    inner = views.roles[role].inner()
    return inner is not None and inner.stride(operand) == 1


def lead_slot(views: ProblemViews) -> str:
    """The traits' kLeadSlot: the output, whose layout orders finish_block's walk and the transposition."""
    return views.spec.output.name


def rows_ranges(views: ProblemViews) -> tuple[int, int, int] | None:
    """(lo, hi, unit) of the run-time letter: m_extent = m x unit for m in lo..hi; None where the rows are fixed."""
    rt = views.spec.run_time_letter
    if rt is None or rt[1] == rt[2]:
        return None
    _, lo, hi = rt
    return lo, hi, views.m // hi


@dataclass(frozen=True)
class Paths:
    """What the engine takes over the rows' extents: `small` the small-M path's B direction ("n": rows streamed, "k":
    dot products) over the extents `small_extents`; `blocked` (transposed, lo, hi) for each orientation of the blocked
    path. The traits say which the engine instantiates (render.py), the formal model proves each (index.py)."""

    small: str | None
    small_extents: tuple[int, ...]
    blocked: tuple[tuple[bool, int, int], ...]

    @property
    def small_rows(self) -> tuple[int, int] | None:
        return (min(self.small_extents), max(self.small_extents)) if self.small_extents else None


def engine_paths(views: ProblemViews) -> Paths:
    """The engine's choice at each row extent m it can be called with (dg::cpu::gemm): small-M where m <= kSmallM and
    B's n or k scatter vector is contiguous, else the blocked path, transposed where m >= 2 and the lead slot (the
    output) steps by one along m (m_at[first][1] == m_at[first][0] + 1) and not along n."""
    rt = rows_ranges(views)
    extents = [views.m] if rt is None else [r * rt[2] for r in range(rt[0], rt[1] + 1)]
    small = next((r for r in ("n", "k") if scatter_steps_by_one(views, "B", r)), None)  # the plan's b_streams
    lead = lead_slot(views)
    n_unit = views.n >= 2 and steps_one(views, lead, "n")
    m_step_one = steps_one(views, lead, "m")
    small_m = tuple(m for m in extents if small and m <= SMALL_M)
    blocked: dict[bool, list[int]] = {}
    for m in extents:
        if not (small and m <= SMALL_M):
            blocked.setdefault(m >= 2 and m_step_one and not n_unit, []).append(m)
    return Paths(small if small_m else None, small_m,
                 tuple((t, min(ms), max(ms)) for t, ms in sorted(blocked.items())))


def build_cpu_graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    g = ConstraintGraph()
    g.node("kc", KC, "k of a packed block of A and B (0: the engine's, from the host's L1 at run time)")
    g.node("mc", MC, "rows of a packed block of A (0: the engine's, from the host's L2 at run time; a pin is rounded "
                     "up to whole micro-tiles)")
    g.node("nc", NC, "columns of a packed panel of B (0: the engine's, from the host's L3 at run time; a pin is "
                     "rounded up to whole micro-tiles)")
    nr = max(nr for _, nr in MICRO_TILES.values())

    def fits(a: Assignment) -> str | None:
        kc, mc, nc = a["kc"], a["mc"], a["nc"]
        if kc and kc * nr * ELEM > HOST.l1_bytes:
            return f"a KC x NR micro-panel of B ({kc} x {nr} f32) is larger than the {HOST.l1_bytes // 1024} KiB L1"
        if kc and mc and mc * kc * ELEM > HOST.l2_bytes:
            return f"an MC x KC block of A ({mc} x {kc} f32) is larger than the {HOST.l2_bytes // 1024} KiB L2"
        if kc and nc and kc * nc * ELEM > HOST.l3_bytes:
            return f"a KC x NC panel of B ({kc} x {nc} f32) is larger than the {HOST.l3_bytes >> 20} MiB L3"
        return None
    g.constrain("blocks fit the caches", "arch", ["kc", "mc", "nc"], fits,
                f"pinned blocks fit the reference host's caches ({HOST.part})")
    return g


def _cpu_plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
              cost_us: float) -> CpuPlan:
    out = views.spec.output.name
    paths = engine_paths(views)
    return CpuPlan(kc=a["kc"], mc=a["mc"], nc=a["nc"],
                   packing={"A": _packing(views, "A"), "B": _packing(views, "B")},
                   b_streams=next((r for r in ("n", "k") if scatter_steps_by_one(views, "B", r)), None),
                   transposed=views.operands[out].unit_role == "m" and steps_one(views, out, "m")
                   and not steps_one(views, out, "n"),
                   small_rows=sum(1 << (m - 1) for m in paths.small_extents),
                   blocked=sum(2 if transposed else 1 for transposed, _, _ in paths.blocked) or 1,
                   segments={r: len(views.roles[r].segments) for r in ROLES},
                   decisions=decisions, feasible=feasible, cost_us=cost_us, assignment=dict(a))


def problem(views: ProblemViews, arch: Arch) -> Problem:
    return gated_problem(NAME, views, arch, gates, build_cpu_graph, cpu_cost, _cpu_plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (CpuPlan,), "dgemm_cli.families.cpu.render",
                      backend="cpu", formal="dgemm_cli.families.cpu.index")
