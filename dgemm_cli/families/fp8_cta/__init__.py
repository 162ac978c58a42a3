"""Kernel family `fp8_cta`: e4m3 A and B with f32 scales through mma.sync m16n8k32 (sm_89 and later), any view (pure).

The cta family's block tile (its loaders, tile order, shared-memory stages and store; dg/cta.cuh) with e4m3
fragments and promotion (dg/fp8_cta.cuh). It takes what the fp8_hopper family's gates refuse: sm_89, views that are
not k-contiguous (8-bit mma reads both operands K-major from shared memory, so such a view is gathered into [rows][k]
tiles), several letters a role and batches, pointers TMA cannot take, and scales whose k blocks are not multiples of
128. Promotion: every k-tile (32, 64 or 128 k) is summed on the tensor core apart, then added into f32 accumulators
times its scales; the tiling graph makes every scale constant over a k-tile (scales.py).

Its plan is the cta family's TilePlan (the mma path, shared tiles k-inner) with the scale views; its cost is the cta
family's mma model (not fitted to FP8 measurements: it ranks this family's tilings, and below fp8_hopper's where
both run).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision
from dgemm_cli.families.base import KernelFamily
from dgemm_cli.families.cta import (
    MAX_GATHER_PER_THREAD,
    MMA,
    OTHER,
    TilePlan,
    _cost,
    block_threads,
    copy_elems,
    staged_per_thread,
    tile_plan,
    tile_smem_bytes,
)
from dgemm_cli.families.fp8_cta.scales import ScaleRoles, scale_roles
from dgemm_cli.families.solving import Problem, gated_problem
from dgemm_cli.views import ProblemViews

NAME = "fp8_cta"
SUMMARY = ("CTA-tiled e4m3 mma.sync m16n8k32, promotion to f32 every k-tile with the scales, cp.async / gather "
           "loaders (sm_89+, e4m3, any view)")
RUNTIME_ROWS = False  # e4m3 specs size every letter at generation (spec/parse.py)
BLOCK_K = (32, 64, 128)  # a k-tile, the promotion interval: at most 128 k on the tensor core between promotions
# f32 accumulators a thread keeps, twice over (the tensor core's k-tile sum and the promoted ones), with its
# fragments and scales: at 32 each, the 64 x 64 tile of 4 warps and BK = 128 compiles to 254 registers, no spills.
MAX_ACCUM_PER_THREAD = 32


@dataclass(frozen=True)
class Fp8CtaPlan(TilePlan):
    family = NAME
    scales: tuple[ScaleRoles, ...] = ()  # A's, then B's
    # Gathered operands contiguous along their row (column) role, whose gather's lanes walk that role
    # (dg/cta.cuh's LoadGather with AlongRows) instead of k.
    gathers_along_rows: tuple[str, ...] = ()

    @property
    def promotion_k(self) -> int:
        return self.block_k

    @property
    def summary(self) -> str:
        def loader(kind: str, vec: int) -> str:
            return f"{kind}{vec if kind == 'cp_async' else ''}"
        return (f"e4m3 mma.sync m16n8k32, promotion to f32 every {self.promotion_k} k, tile {self.block_m}x"
                f"{self.block_n}x{self.block_k}, {self.threads} threads, {self.stages} stages, A "
                f"{loader(self.a.kind, self.a.vector_elems)}, B {loader(self.b.kind, self.b.vector_elems)}, "
                f"{self.smem_bytes} B smem, {self.tiles} blocks")

    def detail_lines(self) -> list[str]:
        out = super().detail_lines()
        out.insert(1, f"promotion: every {self.promotion_k} k (one k-tile) each thread adds the tensor core's sums "
                      "into f32 accumulators, times the k-tile's scales; scales constant along k multiply them once "
                      "before the store")
        for i, s in enumerate(self.scales):
            out.insert(2 + i, s.describe())
        out.extend(f"{x}: its gather's lanes walk {OTHER[x]}, the view's contiguous role, so that a warp's loads share "
                   "sectors" for x in self.gathers_along_rows)
        out.extend(f"note: {hint}" for s in self.scales if (hint := s.layout_hint()))
        return out


def gates(views: ProblemViews, arch: Arch) -> list[tuple[str, str]]:
    """(constraint, reason) for everything that rules the family out of this problem; [] if none."""
    out = []
    if arch.cc < (8, 9):
        out.append(("FP8 tensor cores", f"{arch.name} has no FP8 tensor cores: e4m3 inputs need sm_89 or later"))
    spec = views.spec
    if spec.A.dtype != "e4m3":
        out.append(("e4m3 inputs", f"A and B are {spec.A.dtype}: this family runs e4m3 inputs with scales"))
        return out
    for s in (scale_roles(views, sc) for sc in spec.scales):
        period = s.k_period
        if s.k_varying and not any(period % bk == 0 for bk in BLOCK_K):
            out.append(("scale k blocks", f"{s.name} changes every {period} k of the flattened k: the kernel promotes "
                                          f"every k-tile of {', '.join(map(str, BLOCK_K))} k, so a scale must stay "
                                          "constant over whole k-tiles"))
    return out


def _graph(views: ProblemViews, arch: Arch) -> ConstraintGraph:
    """The cta family's mma tiling with both shared tiles k-inner, BK the promotion interval, two accumulator sets."""
    elem = 1
    scales = [scale_roles(views, sc) for sc in views.spec.scales]
    g = ConstraintGraph()
    g.node("block_m", (16, 32, 64, 128), "rows of C per block")
    g.node("block_n", (16, 32, 64, 128), "columns of C per block")
    g.node("block_k", BLOCK_K, "depth of one k-tile in shared memory, summed on the tensor core between promotions")
    g.node("warps_m", (1, 2, 4), "warps along M (each warp owns a (block_m/warps_m) x (block_n/warps_n) tile)")
    g.node("warps_n", (1, 2, 4), "warps along N")
    g.node("stages", (2, 3, 4), "shared-memory pipeline depth")
    g.node("smem_inner_a", ("k",), "A's shared tile is [m][k]: 8-bit mma reads both operands K-major")
    g.node("smem_inner_b", ("k",), "B's shared tile is [n][k]: 8-bit mma reads both operands K-major")
    g.node("loader_a", ("cp_async", "gather"), "how A tiles reach shared memory")
    g.node("loader_b", ("cp_async", "gather"), "how B tiles reach shared memory")

    def warp_tile(a: Assignment) -> str | None:
        if a["block_m"] % (16 * a["warps_m"]) or a["block_n"] % (16 * a["warps_n"]):
            return f"warp tile {a['block_m']}/{a['warps_m']} x {a['block_n']}/{a['warps_n']} is not made of 16x16"
        return None
    g.constrain("mma warp tile", "instruction", ["block_m", "block_n", "warps_m", "warps_n"], warp_tile,
                "each warp covers whole m16 rows and n16 columns (two n8 mma per ldmatrix.x4 of B)")

    def threads_ok(a: Assignment) -> str | None:
        t = block_threads(a, MMA)
        return None if 32 <= t <= 256 else f"{t} threads, want [32, 256]"
    g.constrain("threads per block", "arch", ["warps_m", "warps_n"], threads_ok)

    def accum_ok(a: Assignment) -> str | None:
        acc = a["block_m"] * a["block_n"] // block_threads(a, MMA)
        return (None if acc <= MAX_ACCUM_PER_THREAD else
                f"{acc} f32 accumulators a thread, twice (the k-tile's and the promoted; > {MAX_ACCUM_PER_THREAD})")
    g.constrain("promotion registers", "arch", ["block_m", "block_n", "warps_m", "warps_n"], accum_ok,
                "a thread holds the promoted accumulators, the tensor core's k-tile sums and its scales in registers")

    def smem_ok(a: Assignment) -> str | None:
        need = tile_smem_bytes(a, elem)
        return None if need <= arch.smem_per_block else f"{need} B > {arch.smem_per_block} B per block"
    g.constrain("shared memory", "arch", ["block_m", "block_n", "block_k", "stages", "smem_inner_a", "smem_inner_b"],
                smem_ok)

    for op in ("a", "b"):
        facts = views.operands[op.upper()]
        loader = f"loader_{op}"

        def cp_async_ok(a: Assignment, facts=facts, loader=loader) -> str | None:
            if a[loader] != "cp_async":
                return None
            vec = copy_elems(facts, "k", aligned=True)
            if vec < 4:
                why = (facts.vector_limit_aligned if facts.unit_role == "k"
                       else f"{facts.name} is not contiguous along k, the shared tile's inner role")
                return f"cp.async copies >= 4 bytes; {facts.name} allows {vec} ({why})"
            if a["block_k"] % vec:
                return f"k-tiles of {a['block_k']} are not whole {vec}-byte vectors"
            return None
        g.constrain(f"cp.async {facts.name}", "view", [loader, "block_k"], cp_async_ok)

        def staging(a: Assignment, op=op, loader=loader) -> str | None:
            if a[loader] != "gather":
                return None
            n = staged_per_thread(a, op, MMA)
            return None if n <= MAX_GATHER_PER_THREAD else f"{n} staged bytes a thread (> {MAX_GATHER_PER_THREAD})"
        g.constrain(f"gather staging {facts.name}", "arch",
                    [loader, "block_m", "block_n", "block_k", "warps_m", "warps_n"], staging,
                    "a gather stages the next k-tile in registers (a byte a register) while the current one computes")

    g.constrain("pipeline depth", "problem", ["loader_a", "loader_b", "stages"],
                lambda a: "register-staged gathers overlap exactly one k-tile: 2 stages"
                if "gather" in (a["loader_a"], a["loader_b"]) and a["stages"] != 2 else None)

    varying = [s for s in scales if s.k_varying]

    def promotion_interval(a: Assignment) -> str | None:
        for s in varying:
            if s.k_period % a["block_k"]:
                return (f"{s.name} changes every {s.k_period} k: a k-tile of {a['block_k']} would span two of its "
                        "scales")
        return None
    g.constrain("scale blocks", "problem", ["block_k"], promotion_interval,
                "each k-tile lies inside one k block of every scale, applied at its promotion")
    return g


def _plan(views: ProblemViews, a: Assignment, decisions: tuple[Decision, ...], feasible: int,
          cost_us: float) -> Fp8CtaPlan:
    base = tile_plan(views, MMA, a, decisions, feasible, cost_us)
    values: dict[str, Any] = {f.name: getattr(base, f.name) for f in fields(TilePlan)}
    # The whole register file: two accumulator sets (see MAX_ACCUM_PER_THREAD).
    values["min_blocks_per_sm"] = 1
    along_rows = tuple(ld.operand for ld in (base.a, base.b)
                       if ld.kind == "gather" and views.operands[ld.operand].unit_role == OTHER[ld.operand])
    return Fp8CtaPlan(**values, scales=tuple(scale_roles(views, sc) for sc in views.spec.scales),
                      gathers_along_rows=along_rows)


def _cost_model(views: ProblemViews, arch: Arch):
    base = _cost(views, arch, MMA)

    def cost(a: Assignment) -> float:
        # The promotion: one FFMA an accumulator a k-tile, on the CUDA cores beside the mma (not yet fitted).
        return base(a) * (1.0 + 8.0 / a["block_k"])
    return cost


def problem(views: ProblemViews, arch: Arch) -> Problem:
    return gated_problem(NAME, views, arch, gates, _graph, _cost_model, _plan)


FAMILY = KernelFamily(NAME, SUMMARY, RUNTIME_ROWS, gates, problem, (Fp8CtaPlan,), "dgemm_cli.families.fp8_cta.render",
                      inputs="e4m3", formal="dgemm_cli.families.fp8_cta.index")
