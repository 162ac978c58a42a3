#!/usr/bin/env bash
# Session 6, device call 1 (nvidia-h200-x2), run from a checkout:
#   1. issue 8: gen + build + verify specs/epilogue (the model's picks) and its two vector_loads specs on the
#      hopper family (seeds 1,2,3, --repeat 2); memcheck those two; count the vector loads in their sources.
#   2. issue 5: decode_dynamic's last buckets at level 2 (tune --resume on the fifth session's database).
#   3. issue 7: ncu of the decode kernels at M = 1 (gemv) and M = 8 (hopper), what bounds their bandwidth.
source tools/device_lib.sh
dg gen specs/epilogue/*.yaml -o "$W/ep" > "$OUT/gen.txt" 2>&1
dg gen specs/epilogue/vector_loads_*.yaml -o "$W/eph" --family hopper >> "$OUT/gen.txt" 2>&1
for d in "$W"/eph/*/; do n=$(basename "$d"); mv "$d" "$W/eph/${n}_hopper"; done
dg gen specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml -o "$W/dec" >> "$OUT/gen.txt" 2>&1
stamp "gen"
grep -h -E "vector load|_v\[" "$W"/eph/*/*.cu | sort | uniq -c > "$OUT/vector_lines.txt"
timeout 200 python3 -m dgemm_cli build "$W/ep" "$W/eph" "$W/dec" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/ep" "$W/eph" --seeds 1,2,3 --repeat 2 --json > "$OUT/verify_ep.json" 2> "$OUT/verify_ep_err.txt"; stamp "verify ep rc=$?"
for d in "$W"/eph/*/; do
  n=$(basename "$d"); h=$(ls "$d"build/sm_90a/*_harness)
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_memcheck_$n.txt" 2>&1
  echo "memcheck $n rc=$?" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
for n in decode_1x4096x14336 decode_8x4096x14336; do
  h=$(ls "$W/dec/$n/build/sm_90a/"*_harness)
  timeout 60 ncu -k "regex:${n}" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats "$h" verify --seeds 1 --samples 8 > "$OUT/ncu_$n.txt" 2>&1
  echo "ncu $n rc=$?" >> "$OUT/log.txt"
done
stamp "ncu"
cp docs/results/2026-11-30-h200-tuning-specs-level2-1c97a3b.json "$OUT/tuning.json"
timeout ${T_TUNE:-260} python3 -m dgemm_cli tune specs/decode_dynamic.yaml --level 2 --resume --db "$OUT/tuning.json" -j "$J" \
  --budget 60 --reps 10 -o "$W/tune" > "$OUT/tune.txt" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
report
cat "$OUT/vector_lines.txt"
tail -12 "$OUT/tune.txt"
pack '(tuning|build|verify_ep)\.json'
