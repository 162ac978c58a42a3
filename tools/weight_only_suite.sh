#!/usr/bin/env bash
# Issue 42's weight-only suite on a GPU, from a checkout: gen + build of specs/weight_only/ and RAND_WQ (default 100)
# specs of `random-specs --wq-share 1` (seed WQ_SEED, 42), then verify (seeds 1, 2, --repeat 2), the three sanitizers
# on the specs/weight_only kernels (SANITIZE=0 skips them) and bench of specs/weight_only (REPS, default 20; no cuBLAS
# baseline takes integer weights yet, so the kernels are timed alone). Logs and JSON under $OUT, a table last.
source "$(dirname "$0")/device_lib.sh"
dg gen specs/weight_only/*.yaml -o "$W/wo" > "$OUT/gen.txt" 2>&1 || echo "gen specs/weight_only failed"
dg random-specs "${RAND_WQ:-100}" -o "$W/rs" --seed "${WQ_SEED:-42}" --wq-share 1.0 > /dev/null
dg gen "$W"/rs/*.yaml -o "$W/rand" >> "$OUT/gen.txt" 2>&1 || echo "gen random weight-only specs failed"
timeout "${T_BUILD:-900}" python3 -m dgemm_cli build "$W/wo" "$W/rand" -j "$J" --json > "$OUT/build.json" \
  2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout "${T_VERIFY:-600}" python3 -m dgemm_cli verify "$W/wo" "$W/rand" --seeds 1,2 --repeat 2 --json \
  > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json"
if [ "${SANITIZE:-1}" != 0 ]; then
  sanitize "$W"/wo/*; stamp "sanitize"
  cat "$OUT/sanitize.txt"
fi
timeout "${T_BENCH:-600}" python3 -m dgemm_cli bench "$W/wo" --reps "${REPS:-20}" --json > "$OUT/bench.json" \
  2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
pack "env.txt|log.txt|verify.json|bench.json"
report
