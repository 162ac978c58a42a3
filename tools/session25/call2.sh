#!/usr/bin/env bash
# Session 25, device call 2 (nvidia-h200; call 1 was tools/session24/call5.sh): tcgemv's register-stream kernel as
# the plan now renders it (the first 2 rounds of the weight prefetched into L2 before the wait, coherent weight
# loads and the trigger after the last load, where a warp streams 16 rounds or more; none below): issue 7's table
# (3 rounds fixed, 2 run-time at 10 row counts); every kernel verified (seeds 1-4, --repeat 2) beside 28 random
# streamed-tcgemv specs (tools/session25/specs: 16 with a prefetching kernel, seed 29; 12 any, seed 30; made by
# tools/session24/tcgemv_specs.py); compute-sanitizer (memcheck, racecheck, synccheck) on the 8-row kernel.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
dg gen --untuned tools/session25/specs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1
stamp "gen random rc=$? $(grep -l 'PREFETCH_ROUNDS = 2' "$W"/t/*/*.cu | wc -l) + $(grep -l 'PREFETCH_ROUNDS = 2' "$W"/r/*/*.cu | wc -l) prefetching"
grep -h '^// Plan ' "$W"/t/*/*.cu | cut -c1-160 > "$OUT/plans.txt"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
bench_fixed_dyn "$W"/t/*
timeout 240 python3 -m dgemm_cli verify "$W"/t/* "$W"/r/* --seeds 1,2,3,4 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
sanitize "$W"/t/decode_8x4096x14336; stamp "sanitize"
{ python3 tools/session20/table.py "$OUT"; failures "$OUT/verify.json" | cut -c1-160
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/sanitize.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json|plans\.txt'
