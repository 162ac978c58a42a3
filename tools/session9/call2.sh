#!/usr/bin/env bash
# Session 9, device call 2 (nvidia-h200): gemv with A read straight from global memory or staged with 16-byte
# loads (tools/session9/patch_gemv.py; the narrow fallback keeps the staging) at the launch-floor shapes and at
# N = 4096 / 14336, M = 1; hopper 64x224 split 2 at N = 14336 (call 1's fastest TMA read order); the model's picks
# beside them. exp/gv. Build, verify (seed 1), bench twice.
source tools/device_lib.sh
timeout 200 python3 -m dgemm_cli build exp/gv -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify exp/gv --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 150 python3 -m dgemm_cli bench exp/gv/* --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
bench_rows "$OUT"/bench_*.json | sort -k2,2 -k1,1
report | grep -E "verif|build|pass|fail" | head -5
failures "$OUT/verify.json"
pack '(build|verify)\.json|bench_.*\.json'
