#!/usr/bin/env bash
# Issue 41's FP8 suite on an H200, from a checkout: gen + build of specs/fp8/ and specs/bench/fp8_*, then
#   verify     specs/fp8 with seeds 1, 2 and --repeat 2; the benchmark shapes with seed 1
#   promotion  fp8_per_channel_f32 built again with -DDG_FP8_NO_PROMOTION: its verify must FAIL (promotion matters)
#   sanitize   memcheck, racecheck, synccheck on the specs/fp8 kernels named in SANITIZE_SPECS (default all)
#   bench      the benchmark shapes against cuBLASLt FP8 and bf16 (REPS, default 20)
#   random     RAND_FP8 (default 300) specs of `random-specs --fp8-share 1` (seed FP8_SEED, 41): every scaling mode,
#              K tails, padded rows, scale layouts, a share of epilogues; seeds 1, 2, --repeat 2
#   cta        specs/fp8 planned with --family fp8_cta (the views fp8_hopper takes, on mma.sync); seeds 1, 2, --repeat 2
#   views      RAND_VIEWS (default 300) specs of `random-specs --fp8-views-share 1` (seed VIEWS_SEED, 89): the views
#              fp8_hopper refuses, on fp8_cta; seeds 1, 2, --repeat 2
# Logs and JSON under $OUT, packed into logs.tgz; a table last. PHASES picks phases (default all).
source "$(dirname "$0")/device_lib.sh"
PY=${PYTHON:-python3}
PHASES=${PHASES:-verify promotion sanitize bench random cta views}
has() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
dg gen specs/fp8/*.yaml -o "$W/fp8" > "$OUT/gen.txt" 2>&1 || echo "gen specs/fp8 failed"
dg gen specs/bench/fp8_*.yaml -o "$W/bench" >> "$OUT/gen.txt" 2>&1 || echo "gen specs/bench/fp8_* failed"
if has random; then
  dg random-specs "${RAND_FP8:-300}" -o "$W/rs" --seed "${FP8_SEED:-41}" --fp8-share 1.0 > /dev/null
  dg gen "$W"/rs/*.yaml -o "$W/rand" >> "$OUT/gen.txt" 2>&1 || echo "gen random FP8 specs failed"
fi
if has cta; then
  dg gen specs/fp8/*.yaml -o "$W/cta" --family fp8_cta >> "$OUT/gen.txt" 2>&1 || echo "gen specs/fp8 on fp8_cta failed"
fi
if has views; then
  dg random-specs "${RAND_VIEWS:-300}" -o "$W/rsv" --seed "${VIEWS_SEED:-89}" --fp8-views-share 1.0 > /dev/null
  dg gen "$W"/rsv/*.yaml -o "$W/views" >> "$OUT/gen.txt" 2>&1 || echo "gen random FP8 view specs failed"
fi
# shellcheck disable=SC2046
timeout "${T_BUILD:-900}" "$PY" -m dgemm_cli build "$W/fp8" "$W/bench" $(has random && echo "$W/rand") \
  $(has cta && echo "$W/cta") $(has views && echo "$W/views") -j "$J" --json \
  > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
if has verify; then
  timeout "${T_VERIFY:-600}" "$PY" -m dgemm_cli verify "$W/fp8" --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
    2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
  timeout "${T_VERIFY:-600}" "$PY" -m dgemm_cli verify "$W/bench" --seeds 1 --json > "$OUT/verify_bench.json" \
    2> "$OUT/verify_bench_err.txt"; stamp "verify bench rc=$?"
  failures "$OUT/verify.json" "$OUT/verify_bench.json"
fi
if has promotion; then
  d="$W/fp8/fp8_per_channel_f32"
  make -C "$d" harness BUILD=build/no_promotion NVCCFLAGS="-std=c++17 -O3 -lineinfo -DDG_FP8_NO_PROMOTION" \
    > "$OUT/no_promotion_build.txt" 2>&1
  timeout 120 "$d/build/no_promotion/fp8_per_channel_f32_harness" verify --seeds 1,2 > "$OUT/no_promotion_verify.json" \
    2> "$OUT/no_promotion_err.txt"
  stamp "verify without promotion rc=$? (1 expected: it must fail)"
  grep -h "verify seed" "$OUT/no_promotion_err.txt" | head -4
fi
if has sanitize; then
  # shellcheck disable=SC2086
  sanitize $(for n in ${SANITIZE_SPECS:-$(ls "$W/fp8")}; do echo "$W/fp8/$n"; done); stamp "sanitize"
  cat "$OUT/sanitize.txt"
fi
if has bench; then
  timeout "${T_BENCH:-600}" "$PY" -m dgemm_cli bench "$W/bench" --reps "${REPS:-20}" --json > "$OUT/bench.json" \
    2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
fi
if has random; then
  timeout "${T_VERIFY:-600}" "$PY" -m dgemm_cli verify "$W/rand" --seeds 1,2 --repeat 2 --json > "$OUT/verify_random.json" \
    2> "$OUT/verify_random_err.txt"; stamp "verify random rc=$?"
  failures "$OUT/verify_random.json"
fi
for set in cta views; do
  if has $set; then
    timeout "${T_VERIFY:-600}" "$PY" -m dgemm_cli verify "$W/$set" --seeds 1,2 --repeat 2 --json > "$OUT/verify_$set.json" \
      2> "$OUT/verify_${set}_err.txt"; stamp "verify $set rc=$?"
    failures "$OUT/verify_$set.json"
  fi
done
pack "env.txt|log.txt|verify.json|verify_random.json|verify_views.json|bench.json"  # at most 8 files come back: the rest in logs.tgz
report
