"""The measurements the cost models' fitted constants answer to (pure): calibration.csv, one row a plan timed on a
GPU, and the model's plan and estimate for each row. tests/test_calibration.py checks the model's ranking against it;
tools/fit_calibration.py fits the constants that are linear in the estimate and reports the ranking error.

Columns: family; spec (a spec file, relative to the repository); plan (JSON: the tiling-graph values that tell the
timed plan apart, {} for the family's own pick; the other nodes take the model's cheapest values with these fixed);
us (measured µs); gpu; commit (where the measurement is recorded); date; source (the run: rows of one source, spec
and commit were timed in one run and are compared with each other); check: what the model must get right in the run:
"pairs" (every two plans measured more than 5% apart ordered alike), "pick" (only that its cheapest plan is the
run's fastest: the splitk tile model overprices tilings of few warps an SM, docs/design/splitk.md, "Cost") or "mean"
(over all the runs of the source, what the model's picks lose to each run's fastest on average: a survey of many
problems that the model does not rank right one by one yet, kept so that a change cannot make them worse unseen).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dgemm_cli.arch import get_arch
from dgemm_cli.constraints import Unsatisfiable, solve
from dgemm_cli.families import FAMILIES
from dgemm_cli.spec import load_spec
from dgemm_cli.views import analyse

TABLE = Path(__file__).with_name("calibration.csv")
REPO = Path(__file__).resolve().parents[2]  # spec paths in the table are relative to the repository


@dataclass(frozen=True)
class Measurement:
    family: str
    spec: str
    plan: dict[str, Any]
    us: float
    gpu: str
    commit: str
    date: str
    source: str
    check: str  # "pairs", "pick" or "mean"

    @property
    def run(self) -> tuple[str, str, str]:
        """The rows timed together: one spec, one run."""
        return self.spec, self.source, self.commit


def measurements(table: Path = TABLE) -> list[Measurement]:
    with table.open(newline="") as f:
        return [Measurement(r["family"], r["spec"], json.loads(r["plan"]), float(r["us"]), r["gpu"], r["commit"],
                            r["date"], r["source"], r["check"]) for r in csv.DictReader(f)]


def runs(rows: list[Measurement]) -> dict[tuple[str, str, str], list[Measurement]]:
    out: dict[tuple[str, str, str], list[Measurement]] = {}
    for r in rows:
        out.setdefault(r.run, []).append(r)
    return out


def model_plan(row: Measurement, repo: Path = REPO) -> Any:
    """The family's plan for the row: the cheapest assignment by the cost model with the row's plan values fixed;
    None where the tiling graph rules those values out (a measurement that decided a constraint, not a cost)."""
    spec = load_spec(repo / row.spec)
    views = analyse(spec)
    problem = FAMILIES[row.family].problem(views, get_arch(spec.arch))
    unknown = set(row.plan) - {n.name for n in problem.graph.nodes}
    if unknown:
        raise ValueError(f"{TABLE.name}: {row.family} has no tiling node {sorted(unknown)} ({row.spec})")
    nodes = [replace(n, domain=(row.plan[n.name],)) if n.name in row.plan else n for n in problem.graph.nodes]
    graph = type(problem.graph)(nodes, problem.graph.constraints)
    try:
        sol = solve(graph, problem.cost)
    except Unsatisfiable:
        return None
    return problem.make(sol.assignment, (*problem.decided, *sol.decisions), sol.feasible, sol.cost)
