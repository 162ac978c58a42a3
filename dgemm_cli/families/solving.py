"""What every family does with its tiling graph (pure): the best plan, the ranked candidates `tune`
measures, and the plan of a tuned assignment. A family describes its problem once as a `Problem`
(its `problem(views, arch)`); plan.py and tune.py call these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment, ConstraintGraph, Decision, Unsatisfiable, explain_assignment, solve
from dgemm_cli.errors import PlanError
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class Problem:
    family: str
    source: str  # the spec file, for errors
    graph: ConstraintGraph
    cost: Callable[[Assignment], float]
    # (assignment, decisions, feasible, cost) -> the family's plan
    make: Callable[[Assignment, tuple[Decision, ...], int, float], Any]
    decided: tuple[Decision, ...] = ()  # decisions taken before the graph (the cta family's instruction)


def gated(family: str, source: str, blocked: list[tuple[str, str]]) -> None:
    """Planning a family its gates rule out is a caller's mistake the message explains."""
    if blocked:
        raise PlanError(f"{source}: the {family} family cannot run this problem: "
                        + "; ".join(f"{n}: {why}" for n, why in blocked))


def gated_problem(family: str, views: ProblemViews, arch: Arch, gates: Callable, graph: Callable, cost: Callable,
                  plan: Callable) -> Problem:
    """A family's Problem once its gates allow the problem: `gates(views, arch)` (the blockers), `graph(views, arch)`
    (the tiling graph), `cost(views, arch)` (the cost model) and `plan(views, assignment, decisions, feasible,
    cost)` (the family's plan), for the families whose problem is just that (gemv, hopper, tcgemv)."""
    gated(family, views.spec.source, gates(views, arch))
    return Problem(family, views.spec.source, graph(views, arch), cost(views, arch),
                   lambda a, decisions, feasible, c: plan(views, a, decisions, feasible, c))


PINNED = "the spec's plan"  # the constraint a pinned node's other values break ("forced by the spec's plan")


def domain_value(domain: tuple[Any, ...], value: Any) -> Any:
    """The element of `domain` that `value` (as a spec writes it: a number or a name, in any case) stands for, or
    None."""
    return next((d for d in domain if d == value or str(d).lower() == str(value).strip().lower()), None)


def pinned(p: Problem, pins: dict[str, Any]) -> tuple[Problem, str | None]:
    """`p` with the nodes of its graph that `pins` (node -> value, a spec's `plan:`) names fixed to their values,
    and why the pins rule the family out where a value is outside its node's domain (None: they do not)."""
    # The pins first, so that the decision names them: "a_multicast = 2 (forced by the spec's plan)".
    graph = ConstraintGraph(list(p.graph.nodes), [])
    for node in graph.nodes:
        if node.name not in pins:
            continue
        value = domain_value(node.domain, pins[node.name])
        if value is None:
            return p, (f"{node.name} = {pins[node.name]} is not one of its values here "
                       f"({', '.join(map(str, node.domain))})")
        graph.constrain(PINNED, "problem", [node.name],
                        lambda a, name=node.name, value=value: f"{name} = {value}" if a[name] != value else None)
    graph.constraints.extend(p.graph.constraints)
    return replace(p, graph=graph), None


def best(p: Problem) -> tuple[Any, ConstraintGraph]:
    """The cheapest plan and the graph it was solved from (for `explain`). A family's gates must rule
    out every problem its graph cannot satisfy; an unsatisfiable graph here is a planner bug."""
    try:
        sol = solve(p.graph, p.cost)
    except Unsatisfiable as exc:
        raise PlanError(f"{p.source}: no {p.family} plan satisfies the constraints: {exc}") from None
    return p.make(sol.assignment, (*p.decided, *sol.decisions), sol.feasible, sol.cost), p.graph


def best_or_why(p: Problem) -> tuple[Any, ConstraintGraph] | str:
    """best(p), or why the graph has no assignment (a spec's pins can leave it none)."""
    try:
        sol = solve(p.graph, p.cost)
    except Unsatisfiable as exc:
        return str(exc)
    return p.make(sol.assignment, (*p.decided, *sol.decisions), sol.feasible, sol.cost), p.graph


def ranked(p: Problem, count: int) -> list[Any]:
    """The `count` cheapest plans by the cost model, cheapest first (what `tune` measures)."""
    sol = solve(p.graph, p.cost, keep=count)
    return [p.make(a, (*p.decided, *explain_assignment(p.graph, a, p.cost)), sol.feasible, c) for c, a in sol.ranked]


def of_assignment(p: Problem, assignment: Assignment) -> Any:
    """The plan of one given assignment (a tuned one, read back from the database)."""
    a, broken = p.graph.restrict(assignment)
    if broken:
        raise PlanError(f"{p.source}: the tuned {p.family} plan {assignment} no longer fits: {broken[0]}")
    return p.make(a, (*p.decided, *explain_assignment(p.graph, a, p.cost)), 1, p.cost(a))
