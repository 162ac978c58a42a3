#!/usr/bin/env bash
# Session 16, device call 3 (nvidia-h200): the plans the sixteenth session's hopper cost moved (cluster reduce 0.8 µs,
# the busy-DRAM stream bound; tools/pick_survey.py found 31 of 942 picks changed, none in specs/), each as the model
# picks it now (new/) and, for a spec of one size, as it picked before (old/, tools/session16/specs/moved_before.json
# rendered by tools/render_variant.py). Built, verified (seeds 1, 2, --repeat 2), benched alternately, 2 rounds.
source tools/device_lib.sh
S=tools/session16/specs
SW=tools/session16/sweep
S15=tools/session15/specs
MOVED="$S/rand_*.yaml $S15/s15_dyn_1_64_n4096_k2048_bf16.yaml $S15/s15_m12_n4096_k2048_bf16.yaml
  $SW/sw_m1_n4096_k2048.yaml $SW/sw_m2_n4096_k2048.yaml $SW/sw_m4_n4096_k2048.yaml $SW/sw_m8_n4096_k2048.yaml
  $SW/sw_m16_n4096_k2048.yaml $SW/sw_m2_n2048_k2048.yaml $SW/sw_m4_n2048_k2048.yaml $SW/sw_m8_n2048_k2048.yaml
  $SW/sw_m4_n2048_k4096.yaml $SW/sw_m8_n2048_k4096.yaml"
# shellcheck disable=SC2086
dg gen --untuned $MOVED -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen new rc=$?"
python3 tools/render_before.py tools/session16/specs/moved_before.json "$W/old" $MOVED >> "$OUT/gen.txt" 2>&1
stamp "gen old rc=$?"
timeout 300 python3 -m dgemm_cli build "$W/new" "$W/old" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W/new" "$W/old" --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  for v in new old; do
    timeout 150 python3 -m dgemm_cli bench "$W/$v"/* --m 1,2,4,8,12,16,17,32,64 --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench $v r$r rc=$?"
  done
done
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
