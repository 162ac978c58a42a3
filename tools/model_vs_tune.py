#!/usr/bin/env python3
"""How far today's cost model is from a tuning database's measurements (issue 5: the model learns from
the database). For each spec (each bucket of a run-time spec) with an entry in DB:
  rho   Spearman's rank correlation between today's model cost and the measured µs, over the candidates
        that passed verify and were timed;
  pick  the plan `deepgemm gen --untuned` would render today (the family graph's choice), its measured
        µs if the tune timed it, and what it loses to the fastest measured candidate.
    python tools/model_vs_tune.py docs/results/2026-11-30-h200-tuning-specs-level2-1c97a3b.json specs/*.yaml
Run from a checkout (no GPU needed)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.errors import PlanError  # noqa: E402
from dgemm_cli.families import FAMILIES  # noqa: E402
from dgemm_cli.families.solving import of_assignment  # noqa: E402
from dgemm_cli.plan import BucketPlan, make_plan  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.tune import load_db, lookup, tuning_problems  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for t in range(i, j + 1):
            out[order[t]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else None


def main(db_path: str, spec_paths: list[str]) -> None:
    db = load_db(Path(db_path))
    print(f"{'problem':<24} {'timed':>5} {'rho':>6}  {'model pick':<12} {'pick µs':>9} {'best µs':>9} {'loss':>6}")
    rhos, losses = [], []
    for path in spec_paths:
        spec = load_spec(path)
        arch = get_arch(spec.arch)
        for problem in tuning_problems(spec):
            entry = lookup(db, problem, arch.name)
            if entry is None:
                continue
            views = analyse(problem)
            timed = list(entry.timed)
            model = []
            for m in timed:
                try:
                    model.append(of_assignment(FAMILIES[m.family].problem(views, arch), dict(m.assignment)).cost_us)
                except PlanError:
                    model.append(float("inf"))  # no longer a candidate of today's graph
            rho = spearman(model, [m.us for m in timed])
            plan = make_plan(views, arch)  # a range bucket is a run-time problem: its one bucket's plan
            primary = plan.buckets[0].plan.primary if isinstance(plan, BucketPlan) else plan.primary
            pick = next((m for m in timed if m.family == primary.family and dict(m.assignment) == primary.assignment),
                        None)
            best = min(m.us for m in timed)
            loss = pick.us / best - 1 if pick else None
            rhos += [rho] if rho is not None else []
            losses += [loss] if loss is not None else []
            print(f"{problem.name:<24} {len(timed):>5} {rho if rho is not None else float('nan'):+6.2f}  "
                  f"{(pick.id if pick else primary.family + ' (untimed)'):<12} "
                  f"{pick.us if pick else float('nan'):9.2f} {best:9.2f} "
                  f"{(f'{loss * 100:5.1f}%' if loss is not None else '     -')}")
    if rhos:
        print(f"mean rho {sum(rhos) / len(rhos):+.2f} over {len(rhos)}; mean loss "
              f"{sum(losses) / max(len(losses), 1) * 100:.1f}% over {len(losses)} timed picks")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
