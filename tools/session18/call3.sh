#!/usr/bin/env bash
# Session 18, device call 3 (nvidia-h200): issue 7's table at this commit. The decode set (three rounds) and the
# run-time artifacts (13 row counts, which cross every bucket of N = 128, whose splitk tilings session 17's cost
# moved) benched beside cuBLAS and the copy bandwidth; all built and verified (seeds 1, 2, --repeat 2).
source tools/device_lib.sh
DEC=$ISSUE7_DECODE
DYN=$ISSUE7_DYNAMIC
# shellcheck disable=SC2086
dg gen --untuned $DEC $DYN -o "$W/dec" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED=$(ls -d "$W"/dec/* | grep -v dyn)
# shellcheck disable=SC2086
timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_dec_1.json" 2>> "$OUT/bench_err.txt"; stamp "bench dec rc=$?"
timeout 150 python3 -m dgemm_cli bench "$W"/dec/decode_dyn* --m 1,2,5,8,9,12,16,17,24,32,40,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/dec --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
# shellcheck disable=SC2086
for r in 2 3; do timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_dec_$r.json" 2>> "$OUT/bench_err.txt"; done; stamp "bench dec 2, 3"
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt|bench_dec_1\.json|bench_dyn\.json'
