#!/usr/bin/env python3
"""How well today's cost model ranks the kernel families against a measured family sweep, and what per-family
correction would make it rank them as measured (issue 7: the model prices hopper 4-11% too low against gemv and
tcgemv at decode shapes, and the picks rest on margins under 1%).

Input: a sweep generated once a family (`deepgemm gen --family F ... -o ROOT/F`, as tools/session16/call2.sh does)
and each family's `deepgemm bench --json` output, named bench_F.json:
    python tools/family_fit.py ROOT bench_gemv.json bench_tcgemv.json bench_hopper.json
For every problem it prints each family's measured µs beside today's model estimate of the same plan (recomputed
from plan.json's spec and assignment, so a changed constant shows at once), the measured fastest family and the
model's pick among the measured ones, with the time the pick loses. Then, per family, measured / model and
measured - model (median and spread), and how many picks each correction (a scale or an offset per family,
hopper's left as it is) would get right. Run from a checkout (no GPU needed)."""
from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.errors import PlanError  # noqa: E402
from dgemm_cli.families import FAMILIES  # noqa: E402
from dgemm_cli.families.solving import of_assignment  # noqa: E402
from dgemm_cli.spec import parse_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402

REFERENCE = "hopper"  # the family whose estimates the corrections are relative to


def model_us(plan_json: dict) -> tuple[str, float]:
    """The plan's family and today's model estimate of its assignment (its recorded one if the graph has
    dropped it)."""
    primary = plan_json["plan"]["primary"]
    spec = parse_spec(plan_json["spec"])
    views = analyse(spec)
    try:
        cost = of_assignment(FAMILIES[primary["family"]].problem(views, get_arch(spec.arch)),
                             primary["assignment"]).cost_us
    except PlanError:
        cost = primary["cost_us"]
    return primary["family"], cost


def load(root: Path, bench_paths: list[Path]) -> dict[str, dict[str, tuple[float, float]]]:
    """problem name -> family -> (measured µs, model µs)."""
    out: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    for path in bench_paths:
        asked = path.stem.removeprefix("bench_")
        for row in json.loads(path.read_text()):
            if row.get("error") or not isinstance(row.get("us"), (int, float)):
                print(f"{path.name}: {row['name']}: no time ({(row.get('error') or '')[:80]})")
                continue
            plan_path = root / asked / row["name"] / "plan.json"
            family, cost = model_us(json.loads(plan_path.read_text()))
            out[row["name"]][family] = (row["us"], cost)
    return out


def picks(data: dict[str, dict[str, tuple[float, float]]], adjust) -> tuple[int, int, float]:
    """Problems with two or more families measured: how many the adjusted model picks the fastest of, how many
    there are, and the mean share the picks lose to the fastest."""
    right = total = 0
    losses = []
    for fams in data.values():
        if len(fams) < 2:
            continue
        total += 1
        fastest = min(fams, key=lambda f: fams[f][0])
        pick = min(fams, key=lambda f: adjust(f, fams[f][1]))
        right += pick == fastest
        losses.append(fams[pick][0] / fams[fastest][0] - 1)
    return right, total, statistics.mean(losses) if losses else 0.0


def main(root: Path, bench_paths: list[Path]) -> None:
    data = load(root, bench_paths)
    families = sorted({f for fams in data.values() for f in fams})
    print(f"{'problem':<22} " + " ".join(f"{f + ' us/model':>20}" for f in families)
          + f"  {'fastest':<8} {'pick':<8} loss")
    for name in sorted(data, key=lambda n: (tuple(int(x) for x in re.findall(r"\d+", n)), n)):
        fams = data[name]
        cells = " ".join(f"{fams[f][0]:9.2f}/{fams[f][1]:<10.2f}" if f in fams else f"{'-':>20}" for f in families)
        fastest = min(fams, key=lambda f: fams[f][0])
        pick = min(fams, key=lambda f: fams[f][1])
        print(f"{name:<22} {cells}  {fastest:<8} {pick:<8} {(fams[pick][0] / fams[fastest][0] - 1) * 100:4.1f}%")

    ratio, diff = defaultdict(list), defaultdict(list)
    for fams in data.values():
        for f, (us, est) in fams.items():
            ratio[f].append(us / est)
            diff[f].append(us - est)
    print("\nper family: measured / model and measured - model (µs): median [min, max]")
    for f in families:
        print(f"  {f:<8} {statistics.median(ratio[f]):.3f} [{min(ratio[f]):.3f}, {max(ratio[f]):.3f}]   "
              f"{statistics.median(diff[f]):+.2f} [{min(diff[f]):+.2f}, {max(diff[f]):+.2f}]  "
              f"({len(ratio[f])} kernels)")

    ref_ratio = statistics.median(ratio[REFERENCE]) if ratio[REFERENCE] else 1.0
    ref_diff = statistics.median(diff[REFERENCE]) if diff[REFERENCE] else 0.0
    scale = {f: statistics.median(ratio[f]) / ref_ratio for f in families}
    offset = {f: statistics.median(diff[f]) - ref_diff for f in families}
    print(f"\npicks of the fastest family among those measured (relative to {REFERENCE}):")
    for label, adjust in (("today's model", lambda f, est: est),
                          ("x scale " + ", ".join(f"{f} {s:.3f}" for f, s in scale.items()),
                           lambda f, est: est * scale[f]),
                          ("+ offset " + ", ".join(f"{f} {o:+.2f}" for f, o in offset.items()),
                           lambda f, est: est + offset[f])):
        right, total, loss = picks(data, adjust)
        print(f"  {label}: {right} of {total} right, picks lose {loss * 100:.1f}% on the mean")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
