#!/usr/bin/env bash
# Session 25's next call (nvidia-h200; written, not run: the session's device time ran out). Issue 7's last
# claim, "never below 1.0x for every M in 1..64 from one dynamic-M artifact", has been benched at 10 row counts
# (1, 2, 5, 8, 9, 16, 17, 32, 48, 64: every bucket's ends but 3, 4 and 33). This call times every m of 1..64 for the
# three run-time artifacts (N = 128, 4096, 14336), two rounds, and prints the least ratio a round and where.
# Then `bash tools/session18/call4.sh` (every GPU test) as its own call.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
for r in 1 2; do
  timeout 200 python3 -m dgemm_cli bench "$W"/t/* --m "$(seq -s, 1 64)" --json > "$OUT/bench_all_m_$r.json" \
    2>> "$OUT/bench_err.txt"; stamp "bench every m r$r rc=$?"
done
python3 - "$OUT"/bench_all_m_*.json > "$OUT/summary.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        rows = r["m_rows"]
        low = min(rows, key=lambda x: x["ratio"])
        below = [x["m"] for x in rows if x["ratio"] < 1.0]
        print(f"{path.rsplit('/', 1)[-1]} {r['name']}: {len(rows)} m, ratio {low['ratio']:.3f} at m = {low['m']} "
              f"(.. {max(x['ratio'] for x in rows):.3f}); below 1.0 at m = {below or 'none'}")
PY
cat "$OUT/summary.txt"
pack 'summary\.txt|bench_all_m_1\.json|bench_all_m_2\.json'
