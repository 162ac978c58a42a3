#!/usr/bin/env bash
# Session 8, device call 1 (nvidia-h200): tile widths that fill the SMs. exp/n14: the N = 14336 decode/up shapes
# at 112-wide tiles (128 tiles) and at 128 (112 tiles, the seventh session's picks), plus the run-time-M artifact
# (model's buckets, now 112 wide); exp/wv: 40 random TMA specs (seed 11) at widths 96..224 (tools/width_variants.py).
# Build, verify (seed 1, --repeat 2), bench n14 twice alternating; tools/launch_floor.cu.
source tools/device_lib.sh
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o "$W/launch_floor" tools/launch_floor.cu > "$OUT/floor_build.txt" 2>&1
timeout 240 python3 -m dgemm_cli build exp/n14 exp/wv -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify exp/wv exp/n14 --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 90 python3 -m dgemm_cli bench exp/n14/*_w1* --json > "$OUT/bench_n14_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
timeout 60 python3 -m dgemm_cli bench exp/n14/decode_dyn_1_64x4096x14336 --m 1,8,16,32,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
timeout 60 "$W/launch_floor" > "$OUT/floor.txt" 2>&1; stamp "floor rc=$?"
cat "$OUT/floor.txt"
bench_rows "$OUT"/bench_*.json
report
pack '(build|verify)\.json|bench_.*\.json|floor\.txt'
