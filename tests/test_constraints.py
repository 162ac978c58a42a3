"""The constraint solver (dgemm_cli/constraints.py): its memoised search finds what a plain enumeration of every
assignment finds: the same cheapest assignment, ties kept in enumeration order, the same ranked candidates, the
same count of feasible assignments and, when nothing fits, the same constraints named."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.constraints import ConstraintGraph, Unsatisfiable, solve


def _enumerate(graph: ConstraintGraph, cost, keep: int):
    """The reference: every assignment in enumeration order, each constraint checked once its last node is set."""
    order = [n.name for n in graph.nodes]
    due = {i: [c for c in graph.constraints if max(order.index(n) for n in c.nodes) == i] for i in range(len(order))}
    kept, pruned_by, feasible, a = [], {}, 0, {}

    def visit(depth):
        nonlocal feasible
        if depth == len(order):
            feasible += 1
            entry = (-cost(a), -feasible, dict(a))
            if len(kept) < keep:
                heapq.heappush(kept, entry)
            elif entry > kept[0]:
                heapq.heapreplace(kept, entry)
            return
        for value in graph.nodes[depth].domain:
            a[order[depth]] = value
            failed = next((c for c in due[depth] if c.check(a) is not None), None)
            if failed is None:
                visit(depth + 1)
            else:
                pruned_by[failed.name] = pruned_by.get(failed.name, 0) + 1
        del a[order[depth]]

    visit(0)
    if not kept:
        top = sorted(pruned_by.items(), key=lambda kv: -kv[1])[:3]
        return [f"{name} (pruned {count} candidates)" for name, count in top]
    return feasible, tuple((-c, x) for c, _, x in sorted(kept, reverse=True))


@st.composite
def graphs(draw):
    """Up to 6 nodes of up to 5 small values; constraints over 1-3 nodes that rule out a residue of a weighted
    sum (names repeat, so ties in the pruning counts happen); costs from a small range (ties) or a wide one."""
    nodes = [(f"n{i}", tuple(draw(st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True))))
             for i in range(draw(st.integers(1, 6)))]
    names = [n for n, _ in nodes]
    cons = [(f"c{draw(st.integers(0, 3))}", draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)),
             draw(st.integers(2, 4)), draw(st.integers(0, 1))) for _ in range(draw(st.integers(0, 7)))]
    g = ConstraintGraph()
    for name, domain in nodes:
        g.node(name, domain, "a number")
    for cname, over, mod, rem in cons:
        g.constrain(cname, "problem", over, lambda a, over=tuple(over), mod=mod, rem=rem:
                    f"residue {rem}" if sum(a[n] * (i + 1) for i, n in enumerate(over)) % mod == rem else None)
    spread = draw(st.sampled_from([3, 1000]))
    return g, (lambda a: float(hash(tuple(sorted(a.items()))) % spread)), draw(st.sampled_from([1, 2, 5, 16]))


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_the_search_finds_what_a_plain_enumeration_finds(case):
    graph, cost, keep = case
    want = _enumerate(graph, cost, keep)
    if isinstance(want, list):
        with pytest.raises(Unsatisfiable) as err:
            solve(graph, cost, keep)
        assert err.value.reasons == want
        return
    sol = solve(graph, cost, keep)
    assert (sol.feasible, sol.ranked) == want
    assert (sol.cost, sol.assignment) == want[1][0]


def test_a_check_that_reads_a_node_it_does_not_name_fails_loudly():
    # Verdicts are remembered per tuple of the nodes a constraint names: one reading another node would be
    # remembered wrongly, so the check sees only its own nodes.
    g = ConstraintGraph()
    g.node("x", (1, 2), "a number")
    g.node("y", (1, 2), "a number")
    g.constrain("sum", "problem", ["y"], lambda a: None if a["x"] + a["y"] < 4 else "too big")
    with pytest.raises(KeyError):
        solve(g, lambda a: 0.0)
