#!/usr/bin/env bash
# Session 15, device call 11 (nvidia-h200): the final model (the promotion's gain counted only on unsplit plans with
# 9..64 rows of A; the cluster reduce back at 0.4 µs). Issue 7's decode set and run-time artifacts, the session's
# specs, and 40 random decode specs with hopper forced: built and verified (seed 1, --repeat 2).
source tools/device_lib.sh
B=specs/bench
dg gen --untuned $B/decode_*.yaml $B/up_128x14336x4096.yaml tools/session15/specs/*.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rs" --seed 15 --small-m-share 1 --wide-decode-share 1 --dynamic-share 0.2 >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper "$W"/rs/*.yaml -o "$W/rh" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/dec "$W"/rh -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/dec "$W"/rh --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
report | tee "$OUT/summary.txt"
echo "no promotion in $(grep -l CU_TENSOR_MAP_L2_PROMOTION_NONE "$W"/dec/*/*.cu "$W"/rh/*/*.cu | wc -l) directories" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
