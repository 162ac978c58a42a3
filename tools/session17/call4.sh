#!/usr/bin/env bash
# Session 17, device call 4 (nvidia-h200): the picks the splitk cost change moved (cluster-aware waves, the loaded
# latency, a 2-warp floor; tools/pick_survey.py --diff), each as the model picks it now (new/) and, for a spec of
# one size, as it picked before (old/, tools/session17/specs/moved_before.json rendered by render_variant.py).
# 30 of the 186 moved picks: the 12 fixed-size specs whose family moved, the moved specs/ and sweep picks, 8 random.
# Built, verified (seeds 1, 2), benched alternately, 2 rounds.
source tools/device_lib.sh
S=tools/session17/specs
read -r -a MOVED < "$S/moved_specs.txt"
dg gen --untuned "${MOVED[@]}" -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen new rc=$?"
python3 tools/render_before.py tools/session17/specs/moved_before.json "$W/old" "${MOVED[@]}" >> "$OUT/gen.txt" 2>&1
stamp "gen old rc=$?"
timeout 300 python3 -m dgemm_cli build "$W/new" "$W/old" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W/new" "$W/old" --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  for v in new old; do
    timeout 150 python3 -m dgemm_cli bench "$W/$v"/* --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench $v r$r rc=$?"
  done
done
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
