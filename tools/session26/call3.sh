#!/usr/bin/env bash
# Session 26, device call 3 (nvidia-h200): which kernels cuBLAS runs for [m,4096]·[4096,4096] f16 at m = 40
# (13.4-13.6 µs in calls 1-2), 44 and 60 (11.3-11.9 µs, level with ours): ncu names and times of the first
# 4 cuBLAS launches of the harness's bench (clocks left alone), beside ours at m = 44.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
H=$(ls "$W"/t/*/build/sm_90a/*_harness)
DEEPGEMM_CUBLAS=$(python3 -c "from dgemm_cli.run import find_cublas; print(find_cublas() or '')"); export DEEPGEMM_CUBLAS
for m in 40 44 60; do
  timeout 90 ncu --clock-control none -k "regex:nvjet|gemm|gemv|xmma|cutlass|splitK|reduce" -c 4 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv "$H" bench --m "$m" --reps 5 --warmup 1 \
    > "$OUT/ncu_cublas_m$m.csv" 2>> "$OUT/ncu_err.txt"; stamp "ncu cublas m=$m rc=$?"
done
timeout 90 ncu --clock-control none -k "regex:decode_dyn" -c 4 --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
  --csv "$H" bench --m 44 --reps 5 --warmup 1 --baseline 0 > "$OUT/ncu_ours_m44.csv" 2>> "$OUT/ncu_err.txt"; stamp "ncu ours rc=$?"
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = list(csv.DictReader(l for l in open(path) if l.startswith('"')))
    print(path.rsplit("/", 1)[-1])
    for r in rows:
        print(f"  {r['ID']:>4} {r['Metric Name']:26s} {r['Metric Value']:>12}  {r['Kernel Name'][:110]}")
PY
cat "$OUT/summary.txt"
pack 'summary\.txt'
