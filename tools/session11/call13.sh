#!/usr/bin/env bash
# Session 11, device call 13 (nvidia-h200): the synccheck report on f32_dyn_rows, third part: the artifact's harness
# with only the m values of one bucket (17..32, 33..64) against its default list, twice each.
source tools/device_lib.sh
dg gen specs/f32/f32_dyn_rows.yaml -o "$W/d" > "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/d -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
h=$(ls "$W"/d/f32_dyn_rows/build/sm_90a/*_harness)
for ms in 17,20,32 33,48,64 default; do
  for r in 1 2; do
    arg=(--m "$ms"); [ "$ms" = default ] && arg=()
    timeout 100 compute-sanitizer --tool synccheck --print-limit 100000 "$h" verify --seeds 1 --samples 16 "${arg[@]}" > "$OUT/sync_${ms}_$r.txt" 2>&1
    echo "m $ms run $r: $(grep -c 'Barrier error' "$OUT/sync_${ms}_$r.txt") barrier errors; $(grep -A1 'Barrier error' "$OUT/sync_${ms}_$r.txt" | grep -o 'm[0-9_]*_[a-z]*::f32' | sort | uniq -c | tr '\n' ' ') $(grep 'ERROR SUMMARY' "$OUT/sync_${ms}_$r.txt" | tail -1)" | tee -a "$OUT/summary.txt"
  done
done; stamp "synccheck"
pack 'summary\.txt|build\.json'
