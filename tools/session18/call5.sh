#!/usr/bin/env bash
# Session 18, device call 5 (nvidia-h200): the picks that spreading a wave's blocks over the SMs before stacking them
# (splitk cost: busy SMs = min(SMs, blocks)) moves, each as that model picks it (new/, from the working tree) and as
# this session's committed model picks it (old/, tools/session18/specs/spread_before.json): built, verified (seed 1),
# benched alternately, 2 rounds. Run at 1a6e22b (the model change, committed as 861ede1); reverted after (docs/RESULTS.md,
# eighteenth session), so at a later commit new/ and old/ are the same plans.
source tools/device_lib.sh
read -r -a MOVED < tools/session18/specs/spread_specs.txt
dg gen --untuned "${MOVED[@]}" -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen new rc=$?"
python3 tools/render_before.py tools/session18/specs/spread_before.json "$W/old" "${MOVED[@]}" >> "$OUT/gen.txt" 2>&1
stamp "gen old rc=$?"
timeout 200 python3 -m dgemm_cli build "$W/new" "$W/old" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W/new" "$W/old" --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  for v in new old; do
    timeout 60 python3 -m dgemm_cli bench "$W/$v"/* --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench $v r$r rc=$?"
  done
done
report > "$OUT/summary.txt"
tail -3 "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt|bench_new_1\.json|bench_old_1\.json|bench_new_2\.json|bench_old_2\.json'
