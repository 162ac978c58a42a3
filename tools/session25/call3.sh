#!/usr/bin/env bash
# Session 25, device call 3 (nvidia-h200): call 2's verify ran past its 240 s; the same kernels verified again with
# room (issue 7's 14 artifacts seeds 1-2, the 28 random specs of tools/session25/specs seeds 1-4, --repeat 2), then
# as many GPU tests (pytest -m gpu, tests/test_gpu_verify.py first) as the call has time for.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
dg gen --untuned tools/session25/specs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/r/* --seeds 1,2,3,4 --repeat 2 --json > "$OUT/verify_r.json" \
  2> "$OUT/verify_r_err.txt"; stamp "verify random rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/t/* --seeds 1,2 --repeat 2 --json > "$OUT/verify_t.json" \
  2> "$OUT/verify_t_err.txt"; stamp "verify issue 7 rc=$?"
left=$(( 570 - ($(date +%s) - T0) ))
timeout $(( left > 10 ? left : 10 )) python3 -m pytest -q -m gpu tests/test_gpu_verify.py tests/test_harness_dynamic.py \
  tests/test_harness_chained.py > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest rc=$? (limit $left s)"
{ for v in r t; do failures "$OUT/verify_$v.json" | cut -c1-160
    python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify_$v.json"
  done; tail -3 "$OUT/pytest_gpu.txt"; } > "$OUT/summary.txt"
cat "$OUT/log.txt" "$OUT/summary.txt"
pack 'summary\.txt|verify_r\.json|verify_t\.json|pytest_gpu\.txt'
