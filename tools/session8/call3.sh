#!/usr/bin/env bash
# Session 8, device call 3 (nvidia-h200): pipeline depth past the 80 KB rule (call 2: [64,4096]x[4096,4096] ran
# 12.13 / 13.28 / 14.08 µs at 6 / 5 / 4 stages). exp/st (tools/session8/stage_sweep.py, run at 452e4b2): 64x64 split 2 at m = 64 and 16,
# 64x112 at m = 1, 16, 64 (N = 14336), at 6..12 stages. Build, verify (seed 1, --repeat 2), bench twice;
# tools/launch_floor.cu (the launch rows and the read ceiling).
source tools/device_lib.sh
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o "$W/launch_floor" tools/launch_floor.cu > "$OUT/floor_build.txt" 2>&1
timeout 150 python3 -m dgemm_cli build exp/st -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify exp/st --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 120 python3 -m dgemm_cli bench exp/st/* --json > "$OUT/bench_st_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
timeout 90 "$W/launch_floor" > "$OUT/floor.txt" 2>&1; stamp "floor rc=$?"
cat "$OUT/floor.txt"
bench_rows "$OUT"/bench_*.json | sort
report | grep -E "verif|build|pass|fail" | head -5
pack '(build|verify)\.json|bench_.*\.json|floor\.txt'
