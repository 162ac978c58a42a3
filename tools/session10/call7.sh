#!/usr/bin/env bash
# Session 10, device call 7 (nvidia-h200): correctness, no timing.
# - Random decode-shaped specs with A redrawn k-contiguous (`--a-vectors-share 0.5`): 40 fixed-size (seed 41) and
#   20 run-time-M (seed 43), model's picks, verify seeds 1 and 2, --repeat 2.
# - The hopper K split with two consumer warpgroups (no spec reaches it; exp/*_c2split from tools/render_variant.py):
#   verify --repeat 3, compute-sanitizer memcheck / racecheck / synccheck.
# - The open synccheck report on f32_dyn_rows' splitk FFMA buckets: the generated kernel (exp/sync) against the same
#   with a __syncwarp() before the main loop's __syncthreads (exp/syncw), synccheck on both.
source tools/device_lib.sh
dg random-specs 40 -o "$W/rsv" --seed 41 --small-m-share 1.0 --a-vectors-share 0.5 > /dev/null
dg gen "$W"/rsv/*.yaml -o "$W/randvec" > "$OUT/gen.txt" 2>&1
dg random-specs 20 -o "$W/rdv" --seed 43 --small-m-share 1.0 --dynamic-share 1.0 --a-vectors-share 0.5 > /dev/null
dg gen "$W"/rdv/*.yaml -o "$W/randvecdyn" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/randvec "$W"/randvecdyn exp/*_c2split exp/sync exp/syncw -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/randvec "$W"/randvecdyn --seeds 1,2 --repeat 2 --json > "$OUT/verify_rand.json" 2> "$OUT/verify_err.txt"; stamp "verify rand rc=$?"
timeout 60 python3 -m dgemm_cli verify exp/*_c2split --seeds 1,2 --repeat 3 --json > "$OUT/verify_c2split.json" 2>> "$OUT/verify_err.txt"; stamp "verify c2split rc=$?"
timeout 60 python3 -m dgemm_cli verify exp/sync exp/syncw --seeds 1 --json > "$OUT/verify_sync.json" 2>> "$OUT/verify_err.txt"; stamp "verify sync rc=$?"
sanitize exp/*_c2split; stamp "sanitize c2split"
for d in exp/sync/f32_dyn_rows exp/syncw/f32_dyn_rows; do
  h=$(ls "$d"/build/sm_90a/*_harness); n=$(basename "$(dirname "$d")")
  timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_synccheck_$n.txt" 2>&1
  echo "synccheck $n rc=$? $(grep -c 'Barrier error' "$OUT/san_synccheck_$n.txt") barrier errors; $(grep -E 'ERROR SUMMARY' "$OUT/san_synccheck_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
done; stamp "synccheck f32_dyn_rows"
echo "gemv plans (kernels) with A vectors > 1 element: $(cat "$W"/randvec/*/plan.json "$W"/randvecdyn/*/plan.json | grep -c '"a_vec": [2-9]'), with 1: $(cat "$W"/randvec/*/plan.json "$W"/randvecdyn/*/plan.json | grep -c '"a_vec": 1')"
cat "$OUT/sanitize.txt"
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify_*.json
pack '(build|verify_.*)\.json|sanitize\.txt'
