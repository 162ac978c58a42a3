#!/usr/bin/env bash
# Session 20, device call 5 (nvidia-h200): call 4's instrumented negative controls started only after the
# harness's writer completed, where pdl_probe.cu's reader overlapped it. Every launch they timed was the first of
# its kernel (the second case takes the alignment fallback). (1) the instrumented controls without the harness's
# launch before the predecessor (_dbg) under CUDA_MODULE_LOADING=LAZY and EAGER, and with it (_dbgwarm, as now);
# (2) the probe with its reader in another translation unit, from a static library; (3) the harness as now: the
# three negative controls (must fail), the self-test's dependent launch with and without its wait (pytest), and
# issue 7's kernels with random specs (24 of every kind, seed 20; 16 for hopper, seed 21) verified, seeds 1, 2,
# --repeat 2.
source tools/device_lib.sh
P=tools/session20
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -c $P/pdl_reader.cu -o "$W/pdl_reader.o" && ar rcs "$W/libreader.a" "$W/pdl_reader.o"
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -DREADER_ELSEWHERE $P/pdl_probe.cu "$W/libreader.a" -o "$W/pp2" 2>/dev/null
"$W/pp2" > "$OUT/probe_elsewhere.txt" 2>&1; stamp "probe elsewhere rc=$?"
dg random-specs 24 --seed 20 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" > "$OUT/gen.txt" 2>&1
dg random-specs 16 --seed 21 --tma-share 0.9 --row-blocks-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
# shellcheck disable=SC2086
dg gen --untuned "$W"/rs/*.yaml $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/g" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$? ($(ls "$W/g" | wc -l) dirs)"
python3 $P/variants.py "$W/g" "$W/nw" --variants none --nowait decode_1x4096x4096,decode_16x4096x14336,decode_64x4096x4096 >> "$OUT/gen.txt" 2>&1
mkdir -p "$W/dbg"; python3 $P/chain_debug.py "$W/nw" "$W/dbg" decode_1x4096x4096_nowait decode_16x4096x14336_nowait >> "$OUT/gen.txt" 2>&1
timeout 200 python3 -m pytest -q -m gpu tests/test_harness_chained.py > "$OUT/pytest_chained.txt" 2>&1 &
timeout 300 python3 -m dgemm_cli build "$W"/g "$W"/nw "$W"/dbg -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "pytest chained: $(tail -1 "$OUT/pytest_chained.txt")"
for d in "$W"/dbg/*; do
  n=$(basename "$d")
  for mode in LAZY EAGER; do
    CUDA_MODULE_LOADING=$mode timeout 30 "$d/build/sm_90a/${n}_harness" verify --seeds 1,2 --samples 4 > "$OUT/dbg_${n}_$mode.txt" 2>&1
    echo "$n $mode rc=$?" >> "$OUT/dbg.txt"
    python3 $P/chain_report.py "$OUT/dbg_${n}_$mode.txt" >> "$OUT/dbg.txt"
  done
done
stamp "debug"
timeout 60 python3 -m dgemm_cli verify "$W"/nw --seeds 1,2 --json > "$OUT/verify_nowait.json" 2> "$OUT/verify_nowait_err.txt"
stamp "verify nowait rc=$? (must be 1)"
timeout 200 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" > "$OUT/failures.txt"
{
  cat "$OUT/dbg.txt"
  grep -v "^128 MB, 1 block\|^4 KB" "$OUT/probe_elsewhere.txt"
  tail -3 "$OUT/pytest_chained.txt"
  python3 - "$OUT/verify_nowait.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    runs = (r.get("report") or {}).get("runs", [])
    print("nowait", r["name"], "passed" if r.get("passed") else "FAILED (as it must)",
          "runs with NaN outputs:", sum(1 for x in runs if x.get("nan_elements")), "of", len(runs))
PY
  python3 $P/table.py "$OUT" | grep "verify"
  cat "$OUT/failures.txt"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|verify_nowait\.json'
