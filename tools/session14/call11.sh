#!/usr/bin/env bash
# Session 14, device call 11 (nvidia-h200): the final staged template (the TMA issue loop without its never-taken
# short-slice branch, 0055042) verified with tcgemv forced: 16 tokens at N = 14336, an N tail with beta, K = 6144
# bf16, run-time 1..16 (every bucket); seeds 1 and 2, --repeat 2; one bench beside hopper's plan.
source tools/device_lib.sh
S=tools/session14/specs B=specs/bench
dg gen --untuned --family tcgemv $B/decode_16x4096x14336.yaml $S/s14_m11_n14300_beta.yaml $S/s14_k6144_m13.yaml \
  $S/s14_dyn_1_16.yaml -o "$W/f" > "$OUT/gen.txt" 2>&1
dg gen --untuned $B/decode_16x4096x14336.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
grep -c "A staged in shared memory by TMA" "$W"/f/*/*.cu >> "$OUT/gen.txt"
timeout 120 python3 -m dgemm_cli build "$W"/f "$W"/h -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/f --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 40 python3 -m dgemm_cli bench "$W"/f/decode_16x4096x14336 "$W"/h/decode_16x4096x14336 --json > "$OUT/bench.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
{ tail -4 "$OUT/gen.txt"; python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v), [(r['name'], (r.get('error') or '')[:200]) for r in v if not r.get('passed')])
b=json.load(open('$OUT/build.json')); print('spills', [(r['name'], k['spill_store_bytes']) for r in b for k in r['kernels'] if k['spill_store_bytes']])"; bench_rows "$OUT/bench.json"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench\.json'
