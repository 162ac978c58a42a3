#!/usr/bin/env bash
# Session 6, device call 3 (nvidia-h200-x2), run from a checkout: the hopper K split after call 2 (split only
# 2-way in one wave; the consumers' barrier before the partial tile goes over the stages).
#   GPU 0: verify 40 random TMA-friendly specs on hopper (call 2's set) and the decode benchmarks (the model's
#          picks) with --repeat 3; bench those against cuBLAS, with gemv / splitk / hopper forced on the
#          N = 4096 decode shapes and the run-time specs at m = 1..64.
#   GPU 1: tune --level 1 of the two run-time decode benchmarks (one bucket after another), then bench them
#          from that database.
source tools/device_lib.sh
DYN="specs/bench/decode_dyn_1-64x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x14336.yaml"
(
  export CUDA_VISIBLE_DEVICES=1
  timeout ${T_TUNE:-330} python3 -m dgemm_cli tune $DYN --level 1 --db "$OUT/tuning.json" -j "$J" --budget 8 --reps 10 -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"
  echo "tune rc=$?" >> "$OUT/log.txt"
  dg gen $DYN -o "$W/dyn_tuned" --db "$OUT/tuning.json" > "$OUT/gen_tuned.txt" 2>&1
  timeout 60 python3 -m dgemm_cli build "$W/dyn_tuned" -j "$J" > /dev/null 2>&1
  timeout 100 python3 -m dgemm_cli bench "$W/dyn_tuned" --reps 20 --m 1,2,3,4,5,8,9,16,17,24,32,33,48,64 --json > "$OUT/bench_dyn_tuned.json" 2> "$OUT/bench_dyn_tuned_err.txt"
  echo "bench tuned rc=$?" >> "$OUT/log.txt"
) &
TUNE_PID=$!
export CUDA_VISIBLE_DEVICES=0
DEC="specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x4096x14336.yaml
 specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml
 specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml
 specs/bench/up_128x14336x4096.yaml specs/moe_up.yaml specs/decode_dynamic.yaml"
dg random-specs 40 -o "$W/rst" --seed 61 --tma-share 1.0 > /dev/null
dg gen "$W"/rst/*.yaml -o "$W/randtma" --family hopper > "$OUT/gen.txt" 2>&1
dg gen $DEC $DYN -o "$W/dec" >> "$OUT/gen.txt" 2>&1
for f in gemv splitk hopper; do
  dg gen specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml -o "$W/forced_$f" --family $f >> "$OUT/gen.txt" 2>&1
  for d in "$W/forced_$f"/*/; do mv "$d" "${d%/}_$f"; done
done
grep -l "SPLITS" "$W"/randtma/*/*.cu | wc -l > "$OUT/split_count.txt"
stamp "gen"
timeout 150 python3 -m dgemm_cli build "$W/randtma" "$W/dec" "$W"/forced_* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 110 python3 -m dgemm_cli verify "$W/randtma" "$W/dec" --seeds 1,2 --samples 32 --repeat 3 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W/dec" "$W"/forced_* --reps 20 --m 1,2,3,4,8,16,17,32,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $TUNE_PID; stamp "tune done"
report
echo "split kernels among the random TMA specs: $(cat "$OUT/split_count.txt")"
pack '(tuning|tune|build|bench|bench_dyn_tuned|verify)\.json'
