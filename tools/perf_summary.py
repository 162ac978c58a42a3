"""The performance suite's summary: the distribution of the ratio to cuBLAS (cuBLAS µs / ours; > 1 is faster)
over a `deepgemm bench --json` list, by class (the `perf_<class>_<n>` names of `random-specs --perf`), and the
worst problems with their plans (read from each folder's plan.json).

    python3 tools/perf_summary.py BENCH.json GEN_DIR [--verify VERIFY.json] [--worst 10] [--json OUT.json]

With --verify (a `deepgemm verify --json` list), a problem whose verify failed is left out of the distribution and
named; the summary counts the problems verified, failed and not verified (a verify cut short by its time limit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def quantile(values: list[float], q: float) -> float:
    """The q-quantile, linear between order statistics (numpy's default)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def distribution(values: list[float]) -> dict[str, float]:
    return {"count": len(values), "min": min(values), "p10": quantile(values, 0.1),
            "median": statistics.median(values), "p90": quantile(values, 0.9), "max": max(values)}


def plan_line(folder: Path) -> str:
    """The family and tile of a folder's plan (each bucket's, for a run-time size)."""
    plan = json.loads((folder / "plan.json").read_text())["plan"]
    return "; ".join(_tile(b) for b in plan["buckets"]) if "buckets" in plan else _tile(plan)


def _tile(plan: dict) -> str:
    prim = plan.get("primary", plan)
    tile = "x".join(str(prim[k]) for k in ("block_m", "block_n", "block_k") if k in prim)
    splits = prim.get("k_splits", 1)
    return f"{plan.get('family', prim.get('family', '?'))} {tile}" + (f" k/{splits}" if splits and splits > 1 else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json")
    p.add_argument("gen_dir", type=Path)
    p.add_argument("--verify", help="verify --json of the same folders: failures are left out")
    p.add_argument("--worst", type=int, default=10)
    p.add_argument("--json", help="write the summary here too")
    args = p.parse_args()
    rows = json.loads(Path(args.bench_json).read_text())
    verified = json.loads(Path(args.verify).read_text()) if args.verify else []
    failed = sorted({v["name"] for v in verified if not v.get("passed")})
    ratios: dict[str, float] = {}
    errors = [f"{name}: failed verify, left out" for name in failed]
    for r in rows:
        if r.get("name") in failed:
            continue
        if r.get("error") or r.get("ratio") is None or r["ratio"] == "nan":
            errors.append(f"{r.get('name')}: {r.get('error') or 'no ratio'}")
            continue
        ratios[r["name"]] = float(r["ratio"])
    if not ratios:
        print("no ratios", file=sys.stderr)
        return 1
    by_class: dict[str, list[float]] = {}
    for name, ratio in ratios.items():
        cls = name[len("perf_"):].rsplit("_", 1)[0] if name.startswith("perf_") else "other"
        by_class.setdefault(cls, []).append(ratio)
    by_name = {r["name"]: r for r in rows}
    worst = sorted(ratios, key=ratios.get)[:args.worst]
    summary = {"all": distribution(list(ratios.values())),
               "classes": {c: distribution(v) for c, v in sorted(by_class.items())},
               "below_0.95": sum(v < 0.95 for v in ratios.values()),
               "verified": {"passed": sum(bool(v.get("passed")) for v in verified), "failed": len(failed),
                            "not_verified": len({r.get("name") for r in rows} - {v["name"] for v in verified})}
               if args.verify else None,
               "worst": [{"name": n, "ratio": ratios[n], "us": by_name[n].get("us"),
                          "baseline_us": by_name[n].get("baseline_us"),
                          "baseline_formulation": by_name[n].get("baseline_formulation"),
                          "plan": plan_line(args.gen_dir / n)} for n in worst],
               "errors": errors}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    d = summary["all"]
    print(f"{d['count']} problems: min {d['min']:.2f}  p10 {d['p10']:.2f}  median {d['median']:.2f}  "
          f"p90 {d['p90']:.2f}  max {d['max']:.2f};  {summary['below_0.95']} below 0.95x;  {len(errors)} errors")
    if summary["verified"] is not None:
        v = summary["verified"]
        print(f"verify: {v['passed']} passed, {v['failed']} failed (left out), {v['not_verified']} not verified")
    print(f"{'class':<10} {'n':>4} {'min':>6} {'median':>7} {'p90':>6}")
    for c, d in summary["classes"].items():
        print(f"{c:<10} {d['count']:>4} {d['min']:>6.2f} {d['median']:>7.2f} {d['p90']:>6.2f}")
    print("worst:")
    for w in summary["worst"]:
        print(f"  {w['ratio']:.2f}  {w['name']}  ours {w['us']} us, cuBLAS {w['baseline_us']} us "
              f"({w['baseline_formulation']})  plan: {w['plan']}")
    for e in errors:
        print(f"  error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
