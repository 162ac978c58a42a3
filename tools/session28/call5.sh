#!/usr/bin/env bash
# Session 28, device call 5 (nvidia-h200): issue 7's fixed-size table two more rounds and the N = 128 and 14336
# run-time artifacts at every m of 1..64 a second round, with the bench's new order (call 2 ran one of each).
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DYNAMIC $ISSUE7_DECODE -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
fixed=$(ls -d "$W"/t/* | grep -v decode_dyn_)
for r in 2 3; do
  # shellcheck disable=SC2086
  timeout 80 python3 -m dgemm_cli bench $fixed --json > "$OUT/fixed_r$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench fixed r$r rc=$?"
done
timeout 150 python3 -m dgemm_cli bench "$W"/t/decode_dyn_1_64x4096x128 "$W"/t/decode_dyn_1_64x4096x14336 \
  --m "$(seq -s, 1 64)" --json > "$OUT/every_m_128_14336_r2.json" 2>> "$OUT/bench_err.txt"
stamp "bench N=128,14336 every m r2 rc=$?"
python3 - "$OUT"/fixed_r*.json "$OUT/every_m_128_14336_r2.json" > "$OUT/summary.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        name = path.rsplit('/', 1)[-1]
        rows = r.get("m_rows") or [r]
        if len(rows) > 1:
            low = min(rows, key=lambda x: x["ratio"])
            below = [x["m"] for x in rows if x["ratio"] < 1.0]
            print(f"{name} {r['name']}: ratio {low['ratio']:.3f} at m = {low['m']} (.. {max(x['ratio'] for x in rows):.3f}); "
                  f"below 1.0 at m = {below or 'none'}; copy {r['copy_gbps']:.0f}")
        else:
            print(f"{name} {r['name']}: {r['us']:.2f} us cuBLAS {r['baseline_us']:.2f} ratio {r['ratio']:.3f} "
                  f"{r['gbps']:.0f} GB/s copy {r['copy_gbps']:.0f}")
PY
cat "$OUT/summary.txt"
pack 'summary\.txt|fixed_r2\.json|fixed_r3\.json|every_m_128_14336_r2\.json'
