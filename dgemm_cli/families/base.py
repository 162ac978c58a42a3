"""The interface every kernel family implements: `KernelFamily` (registered once, in families/__init__.py) and
`FamilyPlan` (what every plan a family makes exposes to planning, rendering, building, tuning and `explain`).

A family is planning code: its renderer is named by module path and imported only by `render`, so planning never
imports rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Decision
from dgemm_cli.families.solving import Problem
from dgemm_cli.views import ProblemViews

# (constraint, reason) pairs: what rules a family out of a problem ([]: nothing does).
Gates = list[tuple[str, str]]


@runtime_checkable
class FamilyPlan(Protocol):
    """One kernel's plan, whatever its family."""

    family: str
    cost_us: float  # the cost model's estimate, comparable across families
    decisions: tuple[Decision, ...]  # each value of the tiling graph and what decided it
    feasible: int  # assignments the tiling graph allowed
    smem_bytes: int  # dynamic shared memory a block

    @property
    def summary(self) -> str: ...

    @property
    def threads(self) -> int: ...

    @property
    def arch_features(self) -> frozenset[str]: ...  # names from arch.FEATURES

    @property
    def runtime_align(self) -> dict[str, int]: ...  # operand -> bytes the plan needs beyond the spec's promise

    def detail_lines(self) -> list[str]: ...  # what `explain` prints below the decisions

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class KernelFamily:
    name: str
    summary: str
    runtime_rows: bool  # one kernel serves a range of run-time rows (else only buckets of one size)
    gates: Callable[[ProblemViews, Arch], Gates]
    problem: Callable[[ProblemViews, Arch], Problem]  # the tiling graph, cost model and plan maker (solving.py)
    plan_types: tuple[type, ...]  # the plan classes `problem` makes
    renderer: str  # the module whose render_body(env, spec, views, plan, base) renders its plans
    # The inputs it takes (spec.Spec.inputs): "float" (f16, bf16, f32), "e4m3" with their scales
    # (docs/design/fp8.md), or "weight-only" (f16/bf16 activations, integer weights; docs/design/weight-only.md).
    inputs: str = "float"
    backend: str = "cuda"  # the arch.Arch backend whose targets it renders for; only those targets see it
    # The module whose models(views, plan, name) states its kernels' index maps for `verify --formal`
    # (dgemm_cli.formal.model.KernelModel); "" where the family has none yet.
    formal: str = ""
    # The family whose plan runs beside this one's where a pointer fails its run-time alignment check (its plans'
    # `runtime_align`), and what that plan becomes as such a fallback (`as_fallback`, on the fallback family).
    fallback: str = "cta"
    as_fallback: Callable[[Any], Any] = lambda plan: plan
