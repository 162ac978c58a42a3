#!/usr/bin/env bash
# Session 9, device call 1 (nvidia-h200). (1) tools/read_patterns.cu: how the order of a TMA pipeline's loads sets
# the read speed of a decode weight (no math), beside the grid-stride read on random data and zeros. (2) The
# launch-floor shapes: gemv at K splits 1..8, and hand edits of A's staging (tools/session9/patch_gemv.py: 16-byte
# staging, or A read straight from global), beside the model's picks and splitk; exp/gv. Build, verify (seed 1),
# bench twice.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/read_patterns" tools/read_patterns.cu > "$OUT/rp_build.txt" 2>&1; stamp "rp build rc=$?"
timeout 150 python3 -m dgemm_cli build exp/gv -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 "$W/read_patterns" > "$OUT/read_patterns.txt" 2>&1; stamp "rp rc=$?"
timeout 60 python3 -m dgemm_cli verify exp/gv --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 100 python3 -m dgemm_cli bench exp/gv/* --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
cat "$OUT/read_patterns.txt"
bench_rows "$OUT"/bench_*.json | sort -k2,2 -k1,1
report | grep -E "verif|build|pass|fail" | head -5
pack '(build|verify)\.json|bench_.*\.json|read_patterns\.txt'
