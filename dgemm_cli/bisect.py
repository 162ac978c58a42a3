"""`deepgemm bisect`'s pure part: the variants of a spec's plan with one `--disable` option each, and the verdict
over their verify results. The command (cli/bisect_cmd.py) generates, builds and verifies them.

A variant whose plan is the baseline's (the option touches no family the problem runs) is not built: it cannot
change the result. A variant the planner cannot make (the spec's `plan:` pins what the option forbids) is reported
with the planner's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.disable import OPTIONS
from dgemm_cli.errors import DeepGemmError
from dgemm_cli.plan import BucketPlan, Plan, make_plan
from dgemm_cli.views import ProblemViews

BASELINE = "baseline"  # the label of the plan as planned, without --disable


@dataclass(frozen=True)
class Variant:
    """The spec planned with one option disabled (`option` None: the baseline)."""

    option: str | None
    plan: Plan | BucketPlan | None  # None: the planner could not make it (`why`)
    changed: bool  # the plan differs from the baseline's: worth building and verifying
    why: str = ""

    @property
    def label(self) -> str:
        return self.option or BASELINE


def kernels_key(plan: Plan | BucketPlan) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """What a plan's kernels are (every bucket's, fallbacks included): each one's family, summary and tiling values.
    Equal for plans that render the same kernels, whatever their decisions' reasons say."""
    plans = [b.plan for b in plan.buckets] if isinstance(plan, BucketPlan) else [plan]
    return [(k.family, k.summary, sorted(getattr(k, "assignment", {}).items())) for p in plans for k in p.kernels]


def variants(views: ProblemViews, arch: Arch) -> list[Variant]:
    """The baseline, then one variant an option (disable.OPTIONS's order)."""
    base = make_plan(views, arch)
    out = [Variant(None, base, True)]
    for name in OPTIONS:
        try:
            plan = make_plan(views, arch, disabled=(name,))
        except DeepGemmError as err:
            out.append(Variant(name, None, False, f"cannot plan without it: {err}"))
            continue
        changed = kernels_key(plan) != kernels_key(base)
        out.append(Variant(name, plan, changed, "" if changed else "the plan is the baseline's: no family here "
                                                                   "changes without it"))
    return out


@dataclass(frozen=True)
class StepResult:
    """A variant and what running it gave: `passed` None where it was not run (unchanged, unplannable, a build
    that failed: `why`)."""

    variant: Variant
    passed: bool | None
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"option": self.variant.option, "label": self.variant.label, "changed": self.variant.changed,
                "family": self.variant.plan.family if self.variant.plan is not None else None,
                "passed": self.passed, "why": self.why or self.variant.why}


@dataclass(frozen=True)
class Verdict:
    baseline_passed: bool
    suspects: tuple[str, ...]  # options whose variant passes where the baseline fails
    still_failing: tuple[str, ...]  # options whose variant fails too
    not_run: tuple[str, ...]  # options that change no plan here, cannot be planned, or whose variant did not build

    def summary(self) -> str:
        if self.baseline_passed:
            return "the baseline passes verify: nothing to bisect"
        if not self.suspects:
            return ("the failure stays with every option disabled in turn: no single optimization is the suspect"
                    + (f" (still failing: {', '.join(self.still_failing)})" if self.still_failing else ""))
        return (f"the failure disappears with --disable {' / '.join(self.suspects)}: suspect "
                + ", ".join(self.suspects)
                + (f" (still failing: {', '.join(self.still_failing)})" if self.still_failing else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"baseline_passed": self.baseline_passed, "suspects": list(self.suspects),
                "still_failing": list(self.still_failing), "not_run": list(self.not_run),
                "summary": self.summary()}


def verdict(results: list[StepResult]) -> Verdict:
    """The verdict over the baseline's result (first) and the variants' that followed it."""
    base, rest = results[0], results[1:]
    assert base.variant.option is None
    return Verdict(bool(base.passed),
                   tuple(r.variant.label for r in rest if r.passed is True),
                   tuple(r.variant.label for r in rest if r.passed is False),
                   tuple(r.variant.label for r in rest if r.passed is None))
