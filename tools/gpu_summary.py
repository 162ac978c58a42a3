"""The short table a device call prints last (tools/gpu_run.sh, tools/session*/call*.sh): builds, every
verify*.json (failures, runs whose bits changed under --repeat), every bench*.json, every tuning*.json
(winner, the model's pick, each family's fastest), sanitizer and SASS."""

from __future__ import annotations

import json
import pathlib
import sys


def load(out: pathlib.Path, name: str):
    p = out / name
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        print(f"{name}: unreadable ({e})")
        return None


def fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


def bench_table(rows: list) -> None:
    if not rows:
        return
    print(f"{'kernel':<28} {'us':>9} {'TFLOP/s':>8} {'GB/s':>7} {'us_strm':>8} {'base us':>9} {'ratio':>6}  "
          "formulation")
    for r in rows:
        if r.get("error"):
            print(f"{r['name']:<28} ERROR {r['error'][:100]}")
            continue
        # A run-time size: one row a size (m_rows), named by it.
        letter = (r.get("dynamic") or {}).get("letter")
        for size in r.get("m_rows") or [r]:
            name = f"{r['name']} {letter}={size['m']}" if letter else r["name"]
            print(f"{name:<28} {fmt(size['us']):>9} {fmt(size['tflops']):>8} {fmt(size['gbps']):>7} "
                  f"{fmt(size.get('us_stream')):>8} {fmt(size['baseline_us']):>9} {fmt(size['ratio']):>6}  "
                  f"{str(size.get('baseline_formulation') or size.get('baseline'))[:60]}")
    copies = [r["copy_gbps"] for r in rows if isinstance(r.get("copy_gbps"), (int, float))]
    if copies:
        print(f"device copy of 3x L2, same runs: {fmt(min(copies))}..{fmt(max(copies))} GB/s (read + write)")


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    builds = load(out, "build.json") or []
    bad = [b for b in builds if not b["ok"]]
    spills = [(b["name"], k["kernel"][:70]) for b in builds for k in b["kernels"]
              if k["spill_store_bytes"] or k["spill_load_bytes"]]
    print(f"build: {len(builds) - len(bad)}/{len(builds)} ok, {len(spills)} spilling kernels")
    for b in bad[:4]:
        print("  BUILD FAIL", b["name"], b["error"][-700:])
    for s in spills[:4]:
        print("  SPILL", *s)
    for name in sorted(p.name for p in out.glob("verify*.json")):
        rows = load(out, name)
        if not rows:
            continue
        fails = [r for r in rows if not r["passed"]]
        changed = [r["name"] for r in rows if (r.get("report") or {}).get("repeat_differed")]
        print(f"{name}: {len(rows) - len(fails)}/{len(rows)} passed; bits changed under --repeat: {changed or 'none'}")
        for r in fails[:14]:
            rep = r.get("report", {})
            # A run-time size: its failing runs first (the runs name their m), and the sizes that failed.
            runs = sorted(rep.get("runs", []), key=lambda x: bool(x.get("passed")))
            runs = [((x["m"],) if "m" in x else ()) + (x.get("shifted"), x.get("passed"), x.get("bad_elements"),
                                                       x.get("nan_elements"), x.get("holes_written"),
                                                       fmt(x.get("rel_err"))) for x in runs]
            print("  FAIL", r["name"], r.get("error"), "rel", fmt(r.get("rel_err")),
                  json.dumps(r.get("first_fail"))[:160], "api", rep.get("api_null_rejected"),
                  rep.get("api_misaligned_rejected"), runs[:4])
            if rep.get("dynamic"):
                failed_sizes = [c["m"] for c in rep.get("m_cases", []) if not c["passed"]]
                print(f"       {rep['dynamic']['letter']} in {rep['dynamic']['lo']}..{rep['dynamic']['hi']}: failed at "
                      f"{failed_sizes}, sizes outside the range refused: {rep.get('api_m_rejected')}")
    for name in sorted(p.name for p in out.glob("bench*.json")):
        rows = load(out, name) or []
        if rows:
            print(f"{name}:")  # a call benches variants and rounds into files of their own
        bench_table(rows)
    indep = load(out, "indep.json")
    if indep:
        print("independent (torch, graph-timed):")
        for r in indep["rows"]:
            print(f"  {r['us']:9.2f} us  {r['case']}")
    for name in sorted(p.name for p in out.glob("tuning*.json")):
        tuning = load(out, name)
        if not tuning:
            continue
        print(f"{name} (measured winner vs the model's pick; each family's fastest):")
        for e in tuning["entries"].values():
            w = e["winner"]
            timed = sorted((m for m in e["measured"] if m.get("us")), key=lambda m: m["us"])
            model = next((m for m in e["measured"] if m["model_rank"] == 0 and m["family"] == w["family"]), None)
            fastest = {}
            for m in timed:
                fastest.setdefault(m["family"], m)
            print(f"  {e['name']:<28} {w['id']:<10} {fmt(w['us']):>9} us ratio {fmt(w.get('ratio')):>6}  "
                  f"model's pick {fmt(model['us'] if model else None):>9}  {len(timed)}/{len(e['measured'])} timed  "
                  + ", ".join(f"{m['id']} {fmt(m['us'])}" for m in fastest.values()))
    for name in ("sanitize.txt", "sass.txt"):
        p = out / name
        if p.exists():
            print(f"{name}: " + " | ".join(p.read_text().split("\n")))


if __name__ == "__main__":
    main()
