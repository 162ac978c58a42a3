#!/usr/bin/env bash
# Session 17, device call 4 (nvidia-h200): the picks the splitk cost change moved (cluster-aware waves, the loaded
# latency, a 2-warp floor; tools/pick_survey.py --diff), each as the model picks it now (new/) and, for a spec of
# one size, as it picked before (old/, tools/session17/specs/moved_before.json rendered by render_variant.py).
# 30 of the 186 moved picks: the 12 fixed-size specs whose family moved, the moved specs/ and sweep picks, 8 random.
# Built, verified (seeds 1, 2), benched alternately, 2 rounds.
source tools/device_lib.sh
gen_new_old tools/session17/specs/moved_specs.txt tools/session17/specs/moved_before.json
build_verify 1,2 "$W/new" "$W/old"
for r in 1 2; do bench_new_old $r; done
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
