#!/usr/bin/env bash
# Session 24, device call 4 (nvidia-h200; call 3 was `pytest -m gpu`, tools/session18/call4.sh): issue 7's table with tcgemv as the template now renders it (the commit
# named), fixed sizes 3 rounds, run-time artifacts 2 rounds at 10 row counts; all verified (seeds 1, 2,
# --repeat 2) beside 16 random streamed-tcgemv specs (tools/session24/tcgemv_specs.py, seed 27); memcheck on the
# 8-row kernel.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
python3 tools/session24/tcgemv_specs.py 16 27 "$W/rs" > "$OUT/rand_specs.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$?"
grep -h '^// Plan ' "$W"/t/*/*.cu | cut -c1-160 > "$OUT/plans.txt"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
bench_fixed_dyn "$W"/t/*
timeout 240 python3 -m dgemm_cli verify "$W"/t/* "$W"/r/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
n=decode_8x4096x14336
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/t/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" > "$OUT/sanitize.txt"
stamp "sanitize"
{ python3 tools/session20/table.py "$OUT"; failures "$OUT/verify.json" | cut -c1-160
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  tail -1 "$OUT/rand_specs.txt"; cat "$OUT/sanitize.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json|plans\.txt|rand_specs\.txt'
