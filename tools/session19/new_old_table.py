"""Issue 7's table from a call4.sh run: one line a kernel (a run-time kernel: one a size), µs new (this session's
launches) and old (as before) each round, cuBLAS's range, new's best ratio and weight GB/s; the copy bandwidth;
the verify count.   python3 tools/session19/new_old_table.py OUT"""
import collections
import glob
import json
import sys

out = sys.argv[1]
rows = collections.defaultdict(lambda: {"new": [], "old": [], "gbps": 0.0})  # new / old: (µs, cuBLAS µs) a run
copy = []
for path in sorted(glob.glob(f"{out}/bench_*.json")):
    side = "old" if "old_" in path else "new"
    try:
        data = json.load(open(path))
    except ValueError as e:
        print(path, "unreadable:", e)
        continue
    for x in data:
        copy.append(x.get("copy_gbps") or 0)
        name = x["name"].removesuffix("_old")
        for y in x.get("m_rows") or [x]:
            key = name + (f" m={y['m']}" if x.get("m_rows") else "")
            r = rows[key]
            r[side].append((y["us"], y["baseline_us"]))
            if side == "new":
                r["gbps"] = max(r["gbps"], y.get("gbps") or 0)
print(f"{'kernel':36s} {'new µs':>22s} {'old µs':>22s} {'cuBLAS':>15s} {'ratio':>6s} {'GB/s':>6s} {'old/new':>7s}")
for key in sorted(rows):
    r = rows[key]
    if not r["new"]:
        continue
    new, old = [u for u, _ in r["new"]], [u for u, _ in r["old"]]
    base = [b for _, b in r["new"] + r["old"]]
    ratios = [b / u for u, b in r["new"]]
    speed = min(old) / min(new) if old else 0
    print(f"{key:36s} {' '.join(f'{v:6.2f}' for v in new):>22s} {' '.join(f'{v:6.2f}' for v in old):>22s} "
          f"{min(base):6.2f}-{max(base):6.2f} {min(ratios):.3f}-{max(ratios):.3f} {r['gbps']:6.0f} {speed:7.3f}")
copy = [c for c in copy if c]
if copy:
    print(f"copy bandwidth in the same runs: {min(copy):.0f}-{max(copy):.0f} GB/s")
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v))
