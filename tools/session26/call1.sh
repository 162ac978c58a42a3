#!/usr/bin/env bash
# Session 26, device call 1 (nvidia-h200). Issue 7's last speed claim first: the three run-time artifacts
# (N = 128, 4096, 14336) benched at every m of 1..64, two rounds; the least ratio a round and any m below 1.0
# (summary.txt). Then the 16-token prefetching kernel, verified so far only where call 1 of session 25 forced
# every streaming kernel to prefetch: 8 random specs whose plan has one (tools/session26/specs, from
# `tools/session24/tcgemv_specs.py 8 31 ... prefetching16`), verified with seeds 1-4, and compute-sanitizer on one.
# (Its every-m part is session 25's call5.sh, written and never run, which this replaced.)
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen dynamic rc=$?"
dg gen --untuned tools/session26/specs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$?"
timeout 280 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
for r in 1 2; do
  timeout 120 python3 -m dgemm_cli bench "$W"/t/* --m "$(seq -s, 1 64)" --json > "$OUT/bench_all_m_$r.json" \
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
timeout 150 python3 -m dgemm_cli verify "$W"/r/* --seeds 1,2,3,4 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" \
  "$OUT/verify.json" >> "$OUT/summary.txt"
sanitize "$W/r/tcgemv_31_001"
cat "$OUT/sanitize.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|bench_all_m_1\.json|bench_all_m_2\.json|verify\.json'
