#!/usr/bin/env bash
# Session 20, device call 3 (nvidia-h200): verify behind the harness's writer kernel, now at the largest
# shared-memory carveout (call 2's probe: behind a kernel at a smaller one a dependent launch needing shared
# memory started only when it completed). (1) tools/session20/pdl_probe.cu with the carveout modes; (2) the
# self-test's dependent launch with and without its wait (pytest); (3) three negative controls without
# griddepcontrol.wait (gemv unsplit, hopper one tile row, hopper K split), which must fail; (4) issue 7's kernels
# and random specs, 24 of every kind (seed 20) and 16 drawn for the hopper family (TMA views, seed 21), seeds 1, 2,
# --repeat 2; (5) compute-sanitizer memcheck on two hopper kernels (one tile row with the prefetch; K split).
source tools/device_lib.sh
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/session20/pdl_probe.cu -o "$W/pdl_probe" && "$W/pdl_probe" > "$OUT/pdl_probe.txt" 2>&1
stamp "probe rc=$?"
dg random-specs 24 --seed 20 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" > "$OUT/gen.txt" 2>&1
dg random-specs 16 --seed 21 --tma-share 0.9 --row-blocks-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
# shellcheck disable=SC2086
dg gen --untuned "$W"/rs/*.yaml $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/g" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? ($(ls "$W/g" | wc -l) dirs, $(grep -l 'tma_prefetch_.d(&' "$W"/g/*/*.cu | wc -l) prefetching)"
mkdir -p "$W/nw"
python3 tools/session20/variants.py "$W/g" "$W/nw" --variants none --nowait decode_1x4096x4096,decode_16x4096x14336,decode_64x4096x4096 >> "$OUT/gen.txt" 2>&1
timeout 200 python3 -m pytest -q -m gpu tests/test_harness_chained.py > "$OUT/pytest_chained.txt" 2>&1 &
timeout 300 python3 -m dgemm_cli build "$W"/g "$W"/nw -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "pytest chained: $(tail -1 "$OUT/pytest_chained.txt")"
timeout 40 python3 -m dgemm_cli verify "$W"/nw --seeds 1 --json > "$OUT/verify_nowait.json" 2> "$OUT/verify_nowait_err.txt"
stamp "verify nowait rc=$? (must be 1)"
timeout 200 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for n in decode_16x4096x14336 decode_64x4096x4096; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/g/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
  echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
{
  cat "$OUT/pdl_probe.txt"
  tail -3 "$OUT/pytest_chained.txt"
  python3 tools/session20/table.py "$OUT" | grep -v "^copy\|bench_others"
  python3 - "$OUT/verify_nowait.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    runs = r.get("runs") or [x for c in r.get("m_cases", []) for x in c.get("runs", [])]
    print("nowait", r["name"], "passed" if r.get("passed") else "FAILED (as it must)",
          "runs with NaN:", sum(1 for x in runs if x.get("nan_elements")), "of", len(runs))
PY
  cat "$OUT/failures.txt" "$OUT/sanitize.txt"
  python3 tools/session19/launch_cover.py "$W/rs" 2>&1 | tail -8
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|verify_nowait\.json'
