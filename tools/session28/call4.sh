#!/usr/bin/env bash
# Session 28, device call 4 (nvidia-h200, a fresh start): the N = 4096 run-time artifact at every m of 1..64 again,
# two rounds with the bench's new order, on whichever machine this start gets; power, clocks and throttle reasons
# sampled every 100 ms meanwhile (smi.csv).
source tools/device_lib.sh
nvidia-smi --query-gpu=serial,uuid --format=csv >> "$OUT/env.txt"
dg gen --untuned specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks.mem,clocks_throttle_reasons.active,temperature.gpu \
  --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
SMI=$!
for r in 1 2; do
  timeout 150 python3 -m dgemm_cli bench "$W"/t/decode_dyn_1_64x4096x4096 --m "$(seq -s, 1 64)" --json \
    > "$OUT/every_m_4096_r$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench N=4096 every m r$r rc=$?"
done
kill $SMI
python3 - "$OUT"/every_m_4096_r*.json > "$OUT/summary.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))[0]
    rows = r["m_rows"]
    low = min(rows, key=lambda x: x["ratio"])
    below = [x["m"] for x in rows if x["ratio"] < 1.0]
    print(f"{path.rsplit('/', 1)[-1]}: ratio {low['ratio']:.3f} at m = {low['m']} (.. {max(x['ratio'] for x in rows):.3f}); "
          f"below 1.0 at m = {below or 'none'}; copy {r['copy_gbps']:.0f}")
PY
cat "$OUT/env.txt" "$OUT/summary.txt"
pack 'summary\.txt|every_m_4096_r1\.json|every_m_4096_r2\.json|smi\.csv|env\.txt'
