#!/usr/bin/env bash
# Issue 42's weight-only suite on a GPU, from a checkout: gen + build of specs/weight_only/, issue 42's target shapes
# (specs/bench/w4_* and w8_*) and RAND_WQ (default 100) specs of `random-specs --wq-share 1` (seed WQ_SEED, 42; a
# share pinned to wqtc), then verify (seeds 1, 2, --repeat 2), the three sanitizers on the specs/weight_only kernels
# (SANITIZE=0 skips them, SANITIZE_GLOB picks some) and bench of the target shapes at M = 1, 4, 8, 16, 32, 64 (REPS,
# default 20) against cuBLASLt with the weights dense. Logs and JSON under $OUT, a table last.
source "$(dirname "$0")/device_lib.sh"
dg gen specs/weight_only/*.yaml -o "$W/wo" > "$OUT/gen.txt" 2>&1 || echo "gen specs/weight_only failed"
dg gen specs/bench/w4_*.yaml specs/bench/w8_*.yaml -o "$W/targets" >> "$OUT/gen.txt" 2>&1 || echo "gen specs/bench/w* failed"
dg random-specs "${RAND_WQ:-100}" -o "$W/rs" --seed "${WQ_SEED:-42}" --wq-share 1.0 > /dev/null
dg gen "$W"/rs/*.yaml -o "$W/rand" >> "$OUT/gen.txt" 2>&1 || echo "gen random weight-only specs failed"
timeout "${T_BUILD:-900}" python3 -m dgemm_cli build "$W/wo" "$W/targets" "$W/rand" -j "$J" --json > "$OUT/build.json" \
  2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout "${T_VERIFY:-600}" python3 -m dgemm_cli verify "$W/wo" "$W/targets" "$W/rand" --seeds 1,2 --repeat 2 --json \
  > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json"
if [ "${SANITIZE:-1}" != 0 ]; then
  # shellcheck disable=SC2086
  sanitize "$W"/wo/${SANITIZE_GLOB:-*}; stamp "sanitize"
  cat "$OUT/sanitize.txt"
fi
timeout "${T_BENCH:-600}" python3 -m dgemm_cli bench "$W"/targets/w4_* --m 1,4,8,16,32,64 --reps "${REPS:-20}" --json \
  > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout "${T_BENCH:-600}" python3 -m dgemm_cli bench "$W"/targets/w8_* --m 1,4,8,16 --reps "${REPS:-20}" --json \
  > "$OUT/bench_int8.json" 2>> "$OUT/bench_err.txt"; stamp "bench int8 rc=$?"
pack "env.txt|log.txt|verify.json|bench.json|bench_int8.json"
report
