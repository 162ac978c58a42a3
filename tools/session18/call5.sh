#!/usr/bin/env bash
# Session 18, device call 5 (nvidia-h200): the picks that spreading a wave's blocks over the SMs before stacking them
# (splitk cost: busy SMs = min(SMs, blocks)) moves, each as that model picks it (new/, from the working tree) and as
# this session's committed model picks it (old/, tools/session18/specs/spread_before.json): built, verified (seed 1),
# benched alternately, 2 rounds. Run at 1a6e22b (the model change, committed as 861ede1); reverted after (docs/RESULTS.md,
# eighteenth session), so at a later commit new/ and old/ are the same plans.
source tools/device_lib.sh
gen_new_old tools/session18/specs/spread_specs.txt tools/session18/specs/spread_before.json
build_verify 1 "$W/new" "$W/old"
for r in 1 2; do bench_new_old $r; done
report > "$OUT/summary.txt"
tail -3 "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt|bench_new_1\.json|bench_old_1\.json|bench_new_2\.json|bench_old_2\.json'
