#!/usr/bin/env bash
# Session 9, device call 9 (nvidia-h200): gemv's A staging on purpose (tools/session9/staging, gen --family gemv):
# 8-element vectors with 3 rows unsplit and with a K split of 8, 4-element (f32) and 2-element (rows 2050 apart)
# vectors, a K tail inside the last vector (K = 1001, lanes along n), vectors the spec promises (no run-time check),
# element staging beside them. Build, verify (seeds 1 and 2, --repeat 2), compute-sanitizer on three.
source tools/device_lib.sh
dg gen --untuned --family gemv tools/session9/staging/*.yaml -o "$W/st" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 120 python3 -m dgemm_cli build "$W"/st -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W"/st --seeds 1,2 --repeat 2 --json > "$OUT/verify_st.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
sanitize "$W"/st/st_m1_ktail_brow "$W"/st/st_m2_k2050 "$W"/st/st_m3_kcol; stamp "sanitize"
cat "$OUT/sanitize.txt"
report | grep -E "verif|build" | head -4
failures "$OUT"/verify_st.json
pack '(build|verify_st)\.json|sanitize\.txt'
