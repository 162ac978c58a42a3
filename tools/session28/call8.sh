#!/usr/bin/env bash
# Session 28, device call 8 (nvidia-h200): the path the random suite missed: hopper's K split with two accumulator
# sets (session 27). 12 specs shaped for it (tools/session28/split_specs.py 12 28; 6 of them plan it, 4 as the
# 17..64 bucket of a run-time spec) and rand_29_023 (the one of 150 random draws at seed 29 that plans it), verified
# with seeds 1, 2 and --repeat 2 behind the harness's writer; memcheck on split_28_005.
source tools/device_lib.sh
python3 tools/session28/split_specs.py 12 28 "$W/s" > "$OUT/picks.txt" 2>&1; cp tools/session28/rand_29_023.yaml "$W/s/"
dg gen --untuned "$W"/s/*.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 150 python3 -m dgemm_cli build "$W"/g/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/g/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
failures "$OUT/verify.json"
python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(bool(r.get('passed')) for r in v), 'of', len(v), 'passed')" \
  "$OUT/verify.json" | tee "$OUT/summary.txt"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/g/split_28_005/build/sm_90a/split_28_005_harness verify \
  --seeds 1 --samples 16 > "$OUT/san.txt" 2>&1
echo "memcheck split_28_005 rc=$? $(grep 'ERROR SUMMARY' "$OUT/san.txt" | tail -1)" | tee -a "$OUT/summary.txt"
cat "$OUT/picks.txt"
pack 'summary\.txt|verify\.json|picks\.txt'
