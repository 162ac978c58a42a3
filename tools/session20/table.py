"""One line a benched kernel (a run-time kernel: one a size) over a session-20 call's bench_[123].json,
bench_dyn_*.json and bench_others.json: µs each run, cuBLAS's range, the best ratio, weight GB/s; the copy
bandwidth; the verify counts.   python3 tools/session20/table.py OUT"""
import glob
import json
import sys

out = sys.argv[1]
rows = {}
paths = glob.glob(f"{out}/bench_[123].json") + glob.glob(f"{out}/bench_dyn_*.json") + [f"{out}/bench_others.json"]
for path in sorted(paths):
    try:
        data = json.load(open(path))
    except (OSError, ValueError) as e:
        print(path, "unreadable:", e)
        continue
    for x in data:
        for y in x.get("m_rows") or [x]:
            key = x["name"] + (f" m={y['m']}" if x.get("m_rows") else "")
            rows.setdefault(key, []).append((y["us"], y["baseline_us"], y.get("gbps") or 0, x.get("copy_gbps") or 0))
for key in sorted(rows):
    r = rows[key]
    base = [b for _, b, *_ in r]
    print(f"{key:44s} {' '.join(f'{u:6.2f}' for u, *_ in r):30s} cuBLAS {min(base):6.2f}-{max(base):6.2f}"
          f"  ratio {max(b / u for u, b, *_ in r):.3f}  GB/s {max(g for _, _, g, _ in r):5.0f}")
copy = [c for v in rows.values() for *_, c in v if c]
print(f"copy {min(copy):.0f}-{max(copy):.0f} GB/s" if copy else "copy: none")
for f in ("verify_nowait.json", "verify.json"):
    try:
        v = json.load(open(f"{out}/{f}"))
    except (OSError, ValueError) as e:
        print(f, "unreadable:", e)
        continue
    failed = [r["name"] for r in v if not r.get("passed")]
    print(f, "passed", len(v) - len(failed), "/", len(v), failed)
