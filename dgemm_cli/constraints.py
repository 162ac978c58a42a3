"""A small constraint graph and its solver (pure, no CUDA knowledge).

Nodes are the plan's choices, each with a finite domain. Constraints are named predicates over a
few nodes, each tagged with where it comes from (arch, view, problem, instruction). The solver
enumerates every assignment that satisfies all constraints (backtracking, checking each
constraint as soon as its nodes are assigned, each verdict remembered for the values it read),
then keeps the one with the lowest cost.

For `explain`, every node gets a `Decision`: for each value it did not take, either the first
constraint that rules it out with the other choices held fixed, or how much more it would cost.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Assignment = dict[str, Any]


@dataclass(frozen=True)
class Node:
    name: str
    domain: tuple[Any, ...]
    doc: str
    # The value an assignment made before the node existed stands for (a tuned plan in a database written
    # by an older deepgemm); None: such an assignment no longer fits.
    default: Any = None


@dataclass(frozen=True)
class Constraint:
    name: str
    source: str  # "arch" | "view" | "problem" | "instruction"
    nodes: tuple[str, ...]
    # Returns None when the assignment satisfies the constraint, else a short reason.
    check: Callable[[Assignment], str | None]
    doc: str = ""


# How a Rejection's reason starts when the value lost on the cost model's estimate, or on cost or time (tune)
# rather than to a constraint.
MODEL_REASONS = ("costs", "ties")
COST_REASONS = MODEL_REASONS + ("measured +",)


@dataclass(frozen=True)
class Rejection:
    value: Any
    why: str  # "<constraint>: <reason>", "costs +x% (cost model)" or "ties (cost model): ..."


@dataclass(frozen=True)
class Decision:
    node: str
    value: Any
    doc: str
    rejected: tuple[Rejection, ...]

    def to_dict(self) -> dict[str, Any]:
        """For plan.json: the value, why, and every rejected value with its reason."""
        return {"node": self.node, "value": self.value, "why": self.summary(),
                "rejected": [{"value": r.value, "why": r.why} for r in self.rejected]}

    def reason(self) -> tuple[str, str]:
        """What decided the value: its kind ("only candidate", "measured", "forced", "ties", "cheapest") and the
        detail (how many values competed, the constraints that ruled the others out)."""
        # "measured +x% (deepgemm tune ...)" is a timing; "measured configurations: ..." a constraint's name.
        ruled = [r for r in self.rejected if not r.why.startswith(COST_REASONS)]
        if not self.rejected:
            return "only candidate", ""
        if all(r.why.startswith("measured +") for r in self.rejected):
            return "measured", f"of {len(self.rejected) + 1}"
        if ruled and len(ruled) == len(self.rejected):
            return "forced", ", ".join(sorted({r.why.split(":")[0] for r in ruled}))
        priced = [r for r in self.rejected if r.why.startswith(MODEL_REASONS)]
        if priced and all(r.why.startswith("ties") for r in priced):
            return "ties", f"of {len(priced) + 1}"
        return "cheapest", f"of {len(self.rejected) + 1}"

    def summary(self) -> str:
        """One line: the value and the constraint that decided it."""
        kind, detail = self.reason()
        value = f"{self.node} = {self.value}"
        return value + {
            "only candidate": " (only candidate)",
            "measured": f" (fastest {detail} measured by deepgemm tune)",
            "forced": f" (forced by {detail})",
            "ties": f" (ties by the cost model: the first {detail} in the domain)",
            "cheapest": f" (cheapest {detail} by the cost model)",
        }[kind]


# How decision_lines names each kind of reason, in this order.
_GROUPS = {"cheapest": "cheapest by the cost model", "ties": "ties by the cost model (the first in the domain)",
           "measured": "fastest measured by deepgemm tune", "forced": "forced", "only candidate": "only candidate"}


def decision_lines(decisions: Sequence[Decision], width: int = 114) -> list[str]:
    """`decisions` grouped by what decided them, a group a line (wrapped at `width`, continued two spaces in):
    "cheapest by the cost model: block_m = 16 (of 4), stages = 4 (of 3)", "forced: warps_m = 1 (mma warp tile)".
    The .cu's header states its plans this way; `explain` prints each decision's summary()."""
    groups: dict[str, list[str]] = {kind: [] for kind in _GROUPS}
    for d in decisions:
        kind, detail = d.reason()
        groups[kind].append(f"{d.node} = {d.value}" + (f" ({detail})" if detail else ""))
    lines: list[str] = []
    for kind, items in groups.items():
        line = f"{_GROUPS[kind]}:"
        for i, item in enumerate(items):
            item += "," if i < len(items) - 1 else ""
            if len(line) + 1 + len(item) > width and not line.endswith(":"):
                lines.append(line)
                line = " "
            line += f" {item}"
        if items:
            lines.append(line)
    return lines


@dataclass
class ConstraintGraph:
    nodes: list[Node] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)

    def node(self, name: str, domain: Sequence[Any], doc: str, default: Any = None) -> None:
        assert name not in {n.name for n in self.nodes}, name
        assert default is None or default in domain, (name, default)
        self.nodes.append(Node(name, tuple(domain), doc, default))

    def constrain(self, name: str, source: str, nodes: Sequence[str],
                  check: Callable[[Assignment], str | None], doc: str = "") -> None:
        known = {n.name for n in self.nodes}
        assert all(n in known for n in nodes), (name, nodes)
        self.constraints.append(Constraint(name, source, tuple(nodes), check, doc))

    def restrict(self, assignment: Assignment) -> tuple[Assignment, list[str]]:
        """`assignment` cut to this graph's nodes, and what is wrong with it: missing nodes, values outside
        a node's domain (a domain can depend on the views: the hopper family's tile widths for an n-major B),
        then the constraints it breaks (e.g. a tuned plan read back after the graph changed). A node the
        assignment lacks takes its default, where it has one."""
        a = {n.name: assignment.get(n.name, n.default) for n in self.nodes}
        missing = [f"no value for {name}" for name, v in a.items() if v is None]
        outside = [f"{n.name} = {a[n.name]} is not one of {', '.join(map(str, n.domain))} ({n.doc})"
                   for n in self.nodes if a[n.name] is not None and a[n.name] not in n.domain]
        return a, missing or outside or self.violations(a)

    def violations(self, assignment: Assignment) -> list[str]:
        out = []
        for c in self.constraints:
            why = c.check(assignment)
            if why is not None:
                out.append(f"{c.name}: {why}")
        return out


@dataclass(frozen=True)
class Solution:
    assignment: Assignment
    cost: float
    decisions: tuple[Decision, ...]
    feasible: int  # how many assignments satisfied every constraint
    ranked: tuple[tuple[float, Assignment], ...] = ()  # (cost, assignment), cheapest first


class Unsatisfiable(Exception):
    """No assignment satisfies the graph; `reasons` are the constraints that pruned the most."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__("; ".join(reasons))


def solve(graph: ConstraintGraph, cost: Callable[[Assignment], float], keep: int = 1) -> Solution:
    """The cheapest assignment (with every node's decision) and the `keep` cheapest, ranked.

    The search visits every assignment that satisfies all constraints in enumeration order (the nodes' order,
    each domain in its order), so `feasible` counts them all and ties rank as a plain enumeration ranks them."""
    steps = _steps(graph)
    # The `keep` cheapest assignments (a max-heap on cost; the counter breaks ties by enumeration order,
    # so the ranking is deterministic).
    kept: list[tuple[float, int, Assignment]] = []
    feasible = 0
    assignment: Assignment = {}
    last = len(steps) - 1

    def visit(depth: int) -> None:
        nonlocal feasible
        step = steps[depth]
        for value in step.allowed(assignment):
            assignment[step.name] = value
            if depth < last:
                visit(depth + 1)
                continue
            feasible += 1
            entry = (-cost(assignment), -feasible)
            if len(kept) < keep:
                heapq.heappush(kept, (*entry, dict(assignment)))
            elif entry > kept[0][:2]:
                heapq.heapreplace(kept, (*entry, dict(assignment)))
        assignment.pop(step.name, None)

    if steps:
        visit(0)
    else:  # no node: the empty assignment is the one candidate
        feasible = 1
        kept.append((-cost(assignment), -1, {}))
    if not kept:
        raise _unsatisfiable(steps)
    ranked = tuple((-c, a) for c, _, a in sorted(kept, reverse=True))
    best_cost, chosen = ranked[0]
    return Solution(chosen, best_cost, tuple(_explain(graph, chosen, best_cost, cost)), feasible, ranked)


class _Step:
    """One node of the search and the constraints due once it is assigned (those whose last node it is). Their
    verdicts on its values are remembered per tuple of the earlier nodes they name: a check sees only the nodes
    the step's constraints name, so one that reads any other node fails loudly (KeyError) instead of being
    remembered wrongly."""

    def __init__(self, node: Node, due: list[Constraint], parents: list[str]):
        self.name, self.domain, self.due, self.parents = node.name, node.domain, due, tuple(parents)
        # parents' values -> (the values every due constraint allows, each value with the first it breaks or None)
        self.memo: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[tuple[Any, str | None], ...]]] = {}

    def allowed(self, assignment: Assignment) -> tuple[Any, ...]:
        return self._verdicts(assignment)[0]

    def outcomes(self, assignment: Assignment) -> tuple[tuple[Any, str | None], ...]:
        return self._verdicts(assignment)[1]

    def _verdicts(self, assignment: Assignment) -> tuple[tuple[Any, ...], tuple[tuple[Any, str | None], ...]]:
        key = tuple([assignment[n] for n in self.parents])
        hit = self.memo.get(key)
        if hit is None:
            trial = dict(zip(self.parents, key))
            outcomes = []
            for value in self.domain:
                trial[self.name] = value
                failed = next((c.name for c in self.due if c.check(trial) is not None), None)
                outcomes.append((value, failed))
            hit = self.memo[key] = tuple(v for v, failed in outcomes if failed is None), tuple(outcomes)
        return hit


def _steps(graph: ConstraintGraph) -> list[_Step]:
    """The search's steps in node order; each constraint is due right after the last of its nodes is assigned."""
    order = [n.name for n in graph.nodes]
    position = {name: i for i, name in enumerate(order)}
    due: dict[int, list[Constraint]] = {i: [] for i in range(len(order))}
    for c in graph.constraints:
        due[max(position[n] for n in c.nodes) if c.nodes else 0].append(c)
    return [_Step(node, due[i], [n for n in order[:i] if any(n in c.nodes for c in due[i])])
            for i, node in enumerate(graph.nodes)]


def _unsatisfiable(steps: list[_Step]) -> Unsatisfiable:
    """No assignment fits: name the three constraints that ruled out the most values, each value counted at the
    first constraint it breaks as the enumeration meets it (ties in the order they first ruled one out)."""
    pruned_by: dict[str, int] = {}
    assignment: Assignment = {}

    def walk(depth: int) -> None:
        step = steps[depth]
        for value, failed in step.outcomes(assignment):
            if failed is not None:
                pruned_by[failed] = pruned_by.get(failed, 0) + 1
            elif depth < len(steps) - 1:
                assignment[step.name] = value
                walk(depth + 1)
        assignment.pop(step.name, None)

    walk(0)
    top = sorted(pruned_by.items(), key=lambda kv: -kv[1])[:3]
    return Unsatisfiable([f"{name} (pruned {count} candidates)" for name, count in top])


def explain_assignment(graph: ConstraintGraph, chosen: Assignment, cost: Callable[[Assignment], float]) -> tuple[
        Decision, ...]:
    """Every node's decision for an assignment other than the cheapest (a tuning candidate)."""
    return tuple(_explain(graph, chosen, cost(chosen), cost))


def _cost_reason(c: float, best_cost: float) -> str:
    """Why an allowed value lost on cost. An equal cost is a tie, kept by enumeration order (solve): the chosen
    value comes earlier in the domain. Under 1% the share keeps a decimal, so that a near tie does not read +0%."""
    if c == best_cost:
        return "ties (cost model): the earlier value in the domain is kept"
    extra = (c / best_cost - 1.0) * 100 if best_cost > 0 and math.isfinite(c) else float("inf")
    return f"costs +{extra:.1f}% (cost model)" if extra < 1 else f"costs +{extra:.0f}% (cost model)"


def _explain(graph: ConstraintGraph, chosen: Assignment, best_cost: float,
             cost: Callable[[Assignment], float]) -> list[Decision]:
    decisions = []
    for node in graph.nodes:
        rejected = []
        for value in node.domain:
            if value == chosen[node.name]:
                continue
            trial = dict(chosen, **{node.name: value})
            broken = next((c for c in graph.constraints if node.name in c.nodes and c.check(trial) is not None),
                          None)
            if broken is not None:
                rejected.append(Rejection(value, f"{broken.name}: {broken.check(trial)}"))
                continue
            # Allowed by this node's own constraints; it may still break a constraint elsewhere.
            others = graph.violations(trial)
            if others:
                rejected.append(Rejection(value, others[0]))
                continue
            rejected.append(Rejection(value, _cost_reason(cost(trial), best_cost)))
        decisions.append(Decision(node.name, chosen[node.name], node.doc, tuple(rejected)))
    return decisions
