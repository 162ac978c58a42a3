#!/usr/bin/env python3
"""What the cost model picks for every spec given (each bucket of a run-time spec): family and tiling, as JSON; or,
with --diff BEFORE.json, only the picks whose family or tiling differ from a survey taken before a model change.
How a change to the model's constants is checked against every spec it could move (docs/design/tuning.md,
"How a model change is checked"):
    python tools/pick_survey.py specs/*.yaml specs/*/*.yaml /tmp/rand/*.yaml > before.json
    (change the model)
    python tools/pick_survey.py --diff before.json specs/*.yaml specs/*/*.yaml /tmp/rand/*.yaml
Run from a checkout (no GPU needed)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.errors import DeepGemmError  # noqa: E402
from dgemm_cli.plan import BucketPlan, make_plan  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402


def picks(path: str) -> dict[str, dict]:
    """'<spec path>[ m=lo..hi]' -> the primary plan's family, assignment and estimate."""
    spec = load_spec(path)
    plan = make_plan(analyse(spec), get_arch(spec.arch))
    parts = ([(f" rows {b.lo}..{b.hi}", b.plan.primary)
              for b in plan.buckets] if isinstance(plan, BucketPlan) else [("", plan.primary)])
    return {f"{path}{label}": {"family": p.family, "assignment": p.assignment, "us": round(p.cost_us, 3)}
            for label, p in parts}


def survey(paths: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in paths:
        try:
            out.update(picks(path))
        except DeepGemmError as exc:  # a spec the planner refuses is recorded as such
            out[path] = {"error": str(exc).splitlines()[0]}
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["--diff"]:
        before = json.loads(Path(argv[1]).read_text())
        now = survey(argv[2:])
        def plan(entry: dict | None) -> tuple:
            entry = entry or {}
            return entry.get("family"), entry.get("assignment"), entry.get("error")
        changed = [k for k in now if plan(before.get(k)) != plan(now[k])]
        for key in changed:
            b, a = before.get(key, {}), now[key]
            what = (f"{b.get('family')} -> {a.get('family')}" if b.get("family") != a.get("family")
                    else f"{a.get('family')}: " + ", ".join(f"{n} {b['assignment'].get(n)} -> {v}"
                                                           for n, v in a.get("assignment", {}).items()
                                                           if b.get("assignment", {}).get(n) != v))
            print(f"{key}: {what} (estimate {b.get('us')} -> {a.get('us')} µs)")
        moved = sum(1 for k in now if k not in changed and before.get(k, {}).get("us") != now[k].get("us"))
        print(f"{len(changed)} of {len(now)} picks changed (family or tiling); {moved} others kept their plan at "
              "another estimate")
    elif argv:
        json.dump(survey(argv), sys.stdout, indent=0, sort_keys=True)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
