#!/usr/bin/env bash
# Session 21, device call 3 (nvidia-h200): (1) issue 7's table at the final code (no kernel changed since session
# 20), with two 128-row tilings the model does not pick beside the pick (one consumer of 128 rows; 64x224, 5
# stages), 3 rounds of the fixed sizes, 2 of the run-time artifacts at 10 row counts, the copy bandwidth in the same
# runs; (2) random specs verified behind the harness's writer, seeds 1, 2, --repeat 2: 28 that reach hopper's B
# prefetch ahead of a dependent launch's wait (tools/session21/pdl_prefetch_specs.py, seed 21; session 20's random
# specs reached that path through none) and 24 of every kind (random-specs, seed 22); memcheck on two of the first.
source tools/device_lib.sh
ONE='"ctas_per_sm":1,"k_splits":1,"l2_promotion":"256B"'
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
python3 tools/render_variant.py specs/bench/up_128x14336x4096.yaml "$W/t" hopper "{\"consumers\":1,\"block_m\":128,\"block_n\":112,\"stages\":6,$ONE}" _c1 >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py specs/bench/up_128x14336x4096.yaml "$W/t" hopper "{\"consumers\":1,\"block_m\":64,\"block_n\":224,\"stages\":5,$ONE}" _64x224 >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
python3 tools/session21/pdl_prefetch_specs.py 28 21 "$W/rs" > "$OUT/pdl_specs.txt" 2>&1; stamp "pdl specs rc=$?"
dg random-specs 24 --seed 22 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$? ($(ls "$W/r" | wc -l) dirs)"
timeout 240 python3 -m dgemm_cli build "$W"/t "$W"/r -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED=$(ls -d "$W"/t/* | grep -v decode_dyn | sort -t/ -k5); DYN=$(ls -d "$W"/t/decode_dyn*)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 70 python3 -m dgemm_cli bench $DYN --m 1,2,5,8,9,16,17,32,48,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r rc=$?"
  fi
done
timeout 220 python3 -m dgemm_cli verify "$W"/r --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for n in pdlpf_21_000 pdlpf_21_001; do
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/r/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
  echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
{ python3 tools/session20/table.py "$OUT" | grep -v "bench_others\|verify_nowait"; failures "$OUT/verify.json"; cat "$OUT/sanitize.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json|pdl_specs\.txt'
