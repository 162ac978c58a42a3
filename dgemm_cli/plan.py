"""Stage 3: ProblemViews + Arch -> `Plan` (pure): which kernel family, and that family's plan.

The families (dgemm_cli/families/) each solve their own tiling graph. Here one more node, `family`,
chooses among them: each family's gates are constraints on it (TMA cannot take a strided innermost
dim, wgmma needs sm_90a, ...) and the cost is the family's best plan's estimate. When the chosen
family needs more pointer alignment at run time than the spec promises (TMA needs 16-byte aligned
views), the `cta` family's plan is rendered beside it and the launcher takes it when the check fails.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import ConstraintGraph, Decision, solve
from dgemm_cli.errors import PlanError
from dgemm_cli.families import FALLBACK, FAMILIES
from dgemm_cli.families.solving import best
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class Plan:
    primary: Any  # the chosen family's plan (families.cta.TilePlan, families.hopper.HopperPlan, ...)
    fallback: Any | None  # the `cta` plan taken at run time when the primary's pointer checks fail
    family_decision: Decision
    tuned: dict[str, Any] | None = None  # what `deepgemm tune` measured for this plan (tune.summary)

    @property
    def family(self) -> str:
        return self.primary.family

    @property
    def kernels(self) -> tuple[Any, ...]:
        return (self.primary,) if self.fallback is None else (self.primary, self.fallback)

    @property
    def smem_bytes(self) -> int:
        return max(k.smem_bytes for k in self.kernels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "family_decision": self.family_decision.to_dict(),
            "primary": self.primary.to_dict(),
            "fallback": self.fallback.to_dict() if self.fallback is not None else None,
            "runtime_align": dict(self.primary.runtime_align) if self.fallback is not None else {},
            "smem_bytes": self.smem_bytes,
            "tuned": self.tuned,
        }


@dataclass(frozen=True)
class PlanDetail:
    """Everything `explain` shows: the plan, the family graph and each family's own plan and graph."""

    plan: Plan
    family_graph: ConstraintGraph
    family_plans: dict[str, tuple[Any, ConstraintGraph] | None]  # None: gated out


def family_gates(views: ProblemViews, arch: Arch) -> dict[str, list[tuple[str, str]]]:
    """Each family's gates on this problem: (constraint, reason) pairs; [] where it can run it."""
    refuse_unrendered(views)
    return {name: module.gates(views, arch) for name, module in FAMILIES.items()}


def refuse_unrendered(views: ProblemViews) -> None:
    """What the spec language accepts but no family renders yet: an epilogue, a separate output view D
    and a run-time size are parsed and checked (spec.py), and refused here rather than silently dropped."""
    spec = views.spec
    what = [x for x, there in (("`epilogue:`", bool(spec.epilogue)), ("`operands.D`", spec.D is not None)) if there]
    if what:
        raise PlanError(f"{spec.source}: {' and '.join(what)} parsed and checked, but no kernel family renders "
                        "epilogues or a separate output view yet (issue 8); leave them out and apply the epilogue "
                        "after the kernel for now")
    if spec.dynamic:
        (x, (lo, hi)), = spec.dynamic.items()
        raise PlanError(f"{spec.source}: the run-time size of '{x}' ({lo}..{hi}) is parsed and checked, but kernels "
                        "for run-time M are not generated yet (issue 7); give it a fixed size (one spec per "
                        "batch size) for now")


def _family_graph(gated: dict[str, list[tuple[str, str]]], prefer: str | None) -> ConstraintGraph:
    g = ConstraintGraph()
    g.node("family", tuple(FAMILIES), "the kernel family (dgemm_cli/families/)")
    for name, reasons in gated.items():
        for constraint, reason in reasons:
            g.constrain(f"{name}: {constraint}", "view" if "TMA" in constraint else "arch", ["family"],
                        lambda a, name=name, reason=reason: reason if a["family"] == name else None)
    if prefer is not None and not gated[prefer]:
        g.constrain("requested family", "problem", ["family"],
                    lambda a: f"--family {prefer} was asked for" if a["family"] != prefer else None)
    return g


def plan_detail(views: ProblemViews, arch: Arch, prefer: str | None = None) -> PlanDetail:
    """`prefer`: take this family whenever its gates allow (gen --family), instead of the cheapest."""
    if prefer is not None and prefer not in FAMILIES:
        raise PlanError(f"unknown kernel family '{prefer}': use one of {', '.join(FAMILIES)}")
    gated = family_gates(views, arch)
    graph = _family_graph(gated, prefer)
    solved: dict[str, tuple[Any, ConstraintGraph] | None] = {
        name: None if gated[name] else best(module.problem(views, arch)) for name, module in FAMILIES.items()}
    sol = solve(graph, lambda a: solved[a["family"]][0].cost_us)
    primary = solved[sol.assignment["family"]][0]
    fallback = as_fallback(solved[FALLBACK][0]) if needs_fallback(primary) else None
    return PlanDetail(Plan(primary, fallback, sol.decisions[0]), graph, solved)


def needs_fallback(primary: Any) -> bool:
    """The primary needs pointer alignment the spec does not promise: the cta plan goes beside it."""
    return primary.family != FALLBACK and bool(primary.runtime_align)


def fallback_plan(views: ProblemViews, arch: Arch) -> Any:
    """The cta family's best plan, as a run-time fallback."""
    refuse_unrendered(views)
    return as_fallback(best(FAMILIES[FALLBACK].problem(views, arch))[0])


def as_fallback(plan: Any) -> Any:
    """The cta plan as a run-time fallback: the whole register file (min blocks 1). It runs only for
    pointers that fail the primary's check; under the 128-register cap three such kernels spilled."""
    return dataclasses.replace(plan, min_blocks_per_sm=1, runtime_fallback=True)


def make_plan(views: ProblemViews, arch: Arch, prefer: str | None = None) -> Plan:
    return plan_detail(views, arch, prefer).plan
