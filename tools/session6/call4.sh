#!/usr/bin/env bash
# Session 6, device call 4 (nvidia-h200-x2), run from a checkout: the final cost model's picks.
#   verify specs/*.yaml, the decode benchmarks and 30 random run-time-M specs (seed 31) with --repeat 2;
#   bench the decode benchmarks against cuBLAS (GPU 0) while the random set verifies (GPU 1).
source tools/device_lib.sh
DEC="specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x4096x14336.yaml
 specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml
 specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml
 specs/bench/up_128x14336x4096.yaml specs/bench/decode_dyn_1-64x4096x128.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml
 specs/bench/decode_dyn_1-64x4096x14336.yaml"
dg gen specs/*.yaml -o "$W/specs" > "$OUT/gen.txt" 2>&1
dg gen $DEC -o "$W/dec" >> "$OUT/gen.txt" 2>&1
dg random-specs 30 -o "$W/rsd" --seed 31 --small-m-share 0.5 --dynamic-share 1.0 > /dev/null
dg gen "$W"/rsd/*.yaml -o "$W/randdyn" >> "$OUT/gen.txt" 2>&1
grep -h "family = \|k_splits = " "$W"/*/*/*.cu | sort | uniq -c > "$OUT/families.txt"
stamp "gen"
timeout 200 python3 -m dgemm_cli build "$W/specs" "$W/dec" "$W/randdyn" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
( export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 -m dgemm_cli verify "$W/randdyn" "$W/specs" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"
  echo "verify rand rc=$?" >> "$OUT/log.txt" ) &
VPID=$!
export CUDA_VISIBLE_DEVICES=0
timeout 100 python3 -m dgemm_cli verify "$W/dec" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify dec rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W/dec" --reps 20 --m 1,2,3,4,8,16,17,32,48,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $VPID; stamp "verify rand done"
report
cat "$OUT/families.txt"
pack '(build|bench|verify|verify_rand)\.json'
