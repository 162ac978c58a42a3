#!/usr/bin/env bash
# Session 12, device call 9 (nvidia-h200): issue 7's target table at the session's final planner code: every
# decode benchmark spec and the run-time-M artifacts (m = 1..64), `deepgemm bench` (graph replay, inputs rotated
# past L2, cuBLAS in the same run, the copy bandwidth of the same run).
source tools/device_lib.sh
B=specs/bench
dg gen --untuned $B/decode_*.yaml $B/up_128x14336x4096.yaml $B/gqa_scores_b32_m8.yaml $B/moe_experts_b8_m8.yaml \
  -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 150 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 80 python3 -m dgemm_cli bench $(ls -d "$W"/g/* | grep -v dyn) --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W"/g/decode_dyn_* --m 1,2,4,8,9,12,16,24,32,48,64 --json > "$OUT/dyn.json" 2> "$OUT/dyn_err.txt"; stamp "dyn rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
for r in json.load(open(f"{out}/bench.json")):
    print(f"{r['name']:28s} {r['us']:7.2f} us {r['gbps'] or 0:6.0f} GB/s (copy {r['copy_gbps'] or 0:5.0f})  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}")
for r in json.load(open(f"{out}/dyn.json")):
    print(r["name"], " ".join(f"m={x['m']}:{x['ratio']:.3f}" for x in r["m_rows"]))
PY
pack 'summary\.txt|bench\.json|dyn\.json'
