#!/usr/bin/env bash
# Session 28, device call 2 (nvidia-h200): issue 7's benchmarks with the bench's new order (ours, cuBLAS, cuBLAS,
# ours at each size; each side the mean of its two passes). The three run-time artifacts at every m of 1..64 (the
# N = 4096 one twice), then the fixed-size table; summary.txt has the least ratio of each and any m below 1.0.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DYNAMIC $ISSUE7_DECODE -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
dyn() { echo "$W/t/decode_dyn_1_64x4096x$1"; }
timeout 150 python3 -m dgemm_cli bench "$(dyn 4096)" --m "$(seq -s, 1 64)" --json > "$OUT/every_m_4096_r1.json" \
  2>> "$OUT/bench_err.txt"; stamp "bench N=4096 every m r1 rc=$?"
timeout 150 python3 -m dgemm_cli bench "$(dyn 128)" "$(dyn 14336)" --m "$(seq -s, 1 64)" --json \
  > "$OUT/every_m_128_14336.json" 2>> "$OUT/bench_err.txt"; stamp "bench N=128,14336 every m rc=$?"
# shellcheck disable=SC2086
fixed=$(ls -d "$W"/t/* | grep -v decode_dyn_)
# shellcheck disable=SC2086
timeout 80 python3 -m dgemm_cli bench $fixed --json > "$OUT/fixed.json" 2>> "$OUT/bench_err.txt"
stamp "bench fixed rc=$?"
timeout 150 python3 -m dgemm_cli bench "$(dyn 4096)" --m "$(seq -s, 1 64)" --json > "$OUT/every_m_4096_r2.json" \
  2>> "$OUT/bench_err.txt"; stamp "bench N=4096 every m r2 rc=$?"
python3 - "$OUT"/every_m_*.json "$OUT/fixed.json" > "$OUT/summary.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        name = path.rsplit('/', 1)[-1]
        if "error" in r and r["error"]:
            print(name, r["name"], "ERROR", r["error"][:200]); continue
        rows = r.get("m_rows") or [r]
        if len(rows) > 1:
            low = min(rows, key=lambda x: x["ratio"])
            below = [x["m"] for x in rows if x["ratio"] < 1.0]
            print(f"{name} {r['name']}: {len(rows)} m, ratio {low['ratio']:.3f} at m = {low['m']} "
                  f"(.. {max(x['ratio'] for x in rows):.3f}); below 1.0 at m = {below or 'none'}; copy {r['copy_gbps']}")
        else:
            print(f"{name} {r['name']}: {r['us']:.2f} us ({r['us_passes']}) cuBLAS {r['baseline_us']:.2f} "
                  f"({r['baseline_us_passes']}) ratio {r['ratio']:.3f} {r['gbps']:.0f} GB/s copy {r['copy_gbps']}")
PY
cat "$OUT/log.txt"; cat "$OUT/summary.txt"
pack 'summary\.txt|every_m_4096_r1\.json|every_m_4096_r2\.json|every_m_128_14336\.json|fixed\.json'
