"""One line a benched kernel (a run-time kernel: one a size) over a device call's bench_1..3.json: µs each round,
cuBLAS's range, the best ratio; then the verify count.   python3 tools/session19/variant_table.py OUT"""
import collections
import json
import sys

out = sys.argv[1]
rows = collections.defaultdict(list)
for r in (1, 2, 3):
    try:
        for x in json.load(open(f"{out}/bench_{r}.json")):
            for y in x.get("m_rows") or [x]:
                name = x["name"] + (f" m={y['m']}" if x.get("m_rows") else "")
                rows[name].append((y["us"], y["baseline_us"]))
    except (OSError, ValueError) as e:
        print("bench", r, "unreadable:", e)
for name in sorted(rows):
    us = " ".join(f"{a:6.2f}" for a, _ in rows[name])
    base = [b for _, b in rows[name]]
    best = max(b / a for a, b in rows[name])
    print(f"{name:42s} {us}   cuBLAS {min(base):6.2f}-{max(base):6.2f}   best ratio {best:.3f}")
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v))
