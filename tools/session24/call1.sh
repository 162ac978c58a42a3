#!/usr/bin/env bash
# Session 24, device call 1 (nvidia-h200). Issue 7's last gap: tcgemv at [8,4096]x[4096,14336] reads the weight at
# 4085-4096 GB/s, 0.1-0.4% short of 4.1 TB/s. Its register-stream kernel waited for the previous grid first thing
# and never let the next one in early. The template (this commit) renders it with the first 2 rounds of the weight
# prefetched into L2 before the wait and the trigger after the block's last load (pf2t); tools/session24/
# pdl_prefetch.py makes the other variants (base = the kernel as it was). (1) All variants at 8 rows of N = 14336
# and 4096 and 16 rows of 4096: built, verified (seeds 1, 2, --repeat 2), benched in turn, 3 rounds; ncu one kernel
# at a time (8 launches) of base, pf2t, pf4t, pf4tl at 8 rows of N = 14336. (2) 16 random specs of the streamed
# tcgemv kernel (tools/session24/tcgemv_specs.py, seed 26) and the run-time artifacts verified as rendered (pf2t).
# (3) memcheck on pf4tl.
# Ran as call 1 at 240a3c6: every prefetching variant read the predecessor's NaN image (verify 8 of 43: only the
# kernels without a prefetch passed); docs/RESULTS.md, twenty-fourth session.
# (Its ncu loop became device_lib.sh's ncu_times after it ran: the same commands.)
source tools/device_lib.sh
S="decode_8x4096x14336 decode_8x4096x4096 decode_16x4096x4096"
dg gen --untuned $(for s in $S; do echo specs/bench/$s.yaml; done) -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session24/pdl_prefetch.py "$W/t" "$W/t" $(for s in $S; do for v in base trig pf2 pf4t pf8t pf2tl pf4tl; do
  echo "$s=$v"; done; done) >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$? $(ls "$W/t" | wc -l) dirs"
python3 tools/session24/tcgemv_specs.py 16 26 "$W/rs" > "$OUT/rand_specs.txt" 2>&1
# shellcheck disable=SC2086
dg gen --untuned "$W"/rs/*.yaml $ISSUE7_DYNAMIC -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
bench_rounds 3 200 "$W"/t/*
timeout 300 python3 -m dgemm_cli verify "$W"/t/* "$W"/r/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" > "$OUT/failures.txt"
ncu_times "tcgemv::" 8 $(for v in "" _base _pf4t _pf4tl; do echo "$W/t/decode_8x4096x14336$v"; done)
n=decode_8x4096x14336_pf4tl
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$W/t/$n/build/sm_90a/${n}_harness" verify --seeds 1 \
  --samples 16 > "$OUT/san_$n.txt" 2>&1
echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" > "$OUT/sanitize.txt"
{ cat "$OUT/failures.txt" "$OUT/sanitize.txt"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  tail -1 "$OUT/rand_specs.txt"; cat "$OUT/ncu_summary.txt"
  bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1 | cut -c1-110; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|rand_specs\.txt'
