#!/usr/bin/env bash
# Session 6, device call 5 (nvidia-h200-x2): deeper hopper pipelines (8, 10, 12 stages) for small tiles.
#   GPU 1: tune --level 2 --family hopper of four memory-bound specs (how the new depths rank, measured).
#   GPU 0: verify (--repeat 2) and bench the model's picks of the decode benchmarks and specs/batched_broadcast.
source tools/device_lib.sh
TUNE="specs/bench/decode_1x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml specs/bench/decode_8x4096x14336.yaml specs/batched_broadcast.yaml"
( export CUDA_VISIBLE_DEVICES=1
  timeout 300 python3 -m dgemm_cli tune $TUNE --level 2 --family hopper --db "$OUT/tuning.json" -j "$J" --budget 25 --reps 10 -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"
  echo "tune rc=$?" >> "$OUT/log.txt" ) &
TPID=$!
export CUDA_VISIBLE_DEVICES=0
DEC="specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml
 specs/bench/decode_64x4096x14336.yaml specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml
 specs/bench/decode_16x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x14336.yaml
 specs/batched_broadcast.yaml specs/moe_up.yaml"
dg gen $DEC -o "$W/dec" > "$OUT/gen.txt" 2>&1
grep -h "stages = \|k_splits = " "$W"/dec/*/*.cu | sort | uniq -c > "$OUT/stages.txt"
timeout 150 python3 -m dgemm_cli build "$W/dec" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/dec" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 90 python3 -m dgemm_cli bench "$W/dec" --reps 20 --m 1,2,4,8,16,32,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $TPID; stamp "tune done"
report
cat "$OUT/stages.txt"
pack '(build|bench|verify|tune|tuning)\.json'
