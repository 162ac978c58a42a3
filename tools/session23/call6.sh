#!/usr/bin/env bash
# Session 23, device call 6 (nvidia-h200): issue 7's table with hopper's weight loads marked evict_first (7b38f39 on):
# fixed sizes 3 rounds, run-time artifacts 2 rounds at 10 row counts, verified (seeds 1, 2, --repeat 2). Beside them,
# hopper forced at 1 and 8 rows of N = 14336 and 4096 (the picks are gemv and tcgemv, which the hint slowed, call 5):
# does the hinted hopper kernel now beat them there? memcheck on the hinted 16-row kernel.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
dg gen --untuned --family hopper specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml \
  specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml -o "$W/h0" >> "$OUT/gen.txt" 2>&1
python3 tools/session19/copy_renamed.py "$W/h0" "$W/t" _hopper >> "$OUT/gen.txt" 2>&1; stamp "gen hopper rc=$?"
grep -h '^// Plan ' "$W"/t/*/*.cu | cut -c1-160 > "$OUT/plans.txt"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED=$(ls -d "$W"/t/* | grep -v decode_dyn); DYN=$(ls -d "$W"/t/decode_dyn*)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 80 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 70 python3 -m dgemm_cli bench $DYN --m 1,2,5,8,9,16,17,32,48,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r rc=$?"
  fi
done
timeout 240 python3 -m dgemm_cli verify "$W"/t/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
n=decode_16x4096x14336
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/t/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" > "$OUT/sanitize.txt"
stamp "sanitize"
{ python3 tools/session20/table.py "$OUT"; failures "$OUT/verify.json"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/sanitize.txt"; bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json|plans\.txt'
