#!/usr/bin/env bash
# Session 6, device call 2 (nvidia-h200-x2), run from a checkout: the hopper family's K split over a cluster
# and A's box cut to the rows present (issue 7).
#   1. verify: 40 random TMA-friendly specs on hopper (many split), the decode benchmarks (the model's picks),
#      decode_dynamic; compute-sanitizer on the two smallest split kernels.
#   2. bench the decode benchmarks (the model's picks) against cuBLAS, same run.
#   3. meanwhile on the second GPU: tune --level 1 of the decode benchmarks (every family's 4 cheapest), then
#      --level 2 of the hopper family alone on two of them (how the split variants rank, measured).
source tools/device_lib.sh
DEC="specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml
 specs/bench/decode_64x4096x14336.yaml specs/bench/decode_8x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml
 specs/bench/decode_1x4096x4096.yaml specs/bench/up_128x14336x4096.yaml specs/moe_up.yaml"
(  # the second GPU: tuning, while the first verifies and benches
  export CUDA_VISIBLE_DEVICES=1
  timeout ${T_TUNE:-380} python3 -m dgemm_cli tune $DEC --level 1 --db "$OUT/tuning.json" -j "$J" --budget 15 --reps 10 -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"
  echo "tune rc=$?" >> "$OUT/log.txt"
  timeout ${T_TUNE2:-130} python3 -m dgemm_cli tune specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x4096.yaml --level 2 --family hopper \
    --db "$OUT/tuning_hopper.json" -j "$J" --budget 30 --reps 10 -o "$W/tune2" --json > "$OUT/tune_hopper.json" 2> "$OUT/tune_hopper_err.txt"
  echo "tune hopper rc=$?" >> "$OUT/log.txt"
) &
TUNE_PID=$!
export CUDA_VISIBLE_DEVICES=0
dg random-specs 40 -o "$W/rst" --seed 61 --tma-share 1.0 > /dev/null
dg gen "$W"/rst/*.yaml -o "$W/randtma" --family hopper > "$OUT/gen.txt" 2>&1
dg gen $DEC specs/decode_dynamic.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/dec" >> "$OUT/gen.txt" 2>&1
grep -l "SPLITS" "$W"/randtma/*/*.cu | wc -l > "$OUT/split_count.txt"
stamp "gen"
timeout 200 python3 -m dgemm_cli build "$W/randtma" "$W/dec" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W/randtma" "$W/dec" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
small=$(python3 - "$W/randtma" <<'PY'
import json, pathlib, sys
rows = []
for p in pathlib.Path(sys.argv[1]).glob("*/plan.json"):
    prim = json.loads(p.read_text())["plan"]["primary"]
    if prim.get("k_splits", 1) > 1:
        rows.append((prim["tiles"] * prim["k_iters"], str(p.parent)))
print(" ".join(d for _, d in sorted(rows)[:2]))
PY
)
for d in $small; do
  n=$(basename "$d")
  for tool in memcheck synccheck; do
    timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 "$d/build/sm_90a/${n}_harness" verify --seeds 1 --samples 16 > "$OUT/san_${tool}_$n.txt" 2>&1
    echo "$tool $n rc=$?" >> "$OUT/sanitize.txt"
  done
done
stamp "sanitize"
timeout 90 python3 -m dgemm_cli bench "$W/dec" --reps 20 --m 1,2,3,4,8,16,17,32,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $TUNE_PID; stamp "tunes done"
report
echo "split kernels among the random TMA specs: $(cat "$OUT/split_count.txt")"
pack '(tuning|tuning_hopper|tune|build|bench|verify)\.json'
