#!/usr/bin/env bash
# Session 23, device call 7 (nvidia-h200): one kernel at a time. The evict_first weight loads gained 1.7-1.9 µs in the
# graph bench (calls 5, 6), where our dependent launches chain: the hint keeps the next grid's prefetched boxes in
# L2. What is left of it, and of hopper's lead at 1 and 8 rows of N = 14336, when nothing chains? ncu (caches flushed
# before each kernel, boost clocks): our kernels with and without the hint at 16, 64, 128 rows, hopper forced at 1
# and 8 rows beside the picks (gemv, tcgemv), and cuBLAS's kernels for the same five problems; 3 launches each.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml \
  specs/bench/up_128x14336x4096.yaml specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml \
  -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/cache_hints.py "$W/t" "$W/t" decode_16x4096x14336=nohint decode_64x4096x14336=nohint \
  up_128x14336x4096=nohint >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml \
  -o "$W/h0" >> "$OUT/gen.txt" 2>&1
python3 tools/session19/copy_renamed.py "$W/h0" "$W/t" _hopper >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for d in "$W"/t/*; do
  n=$(basename "$d"); h="$d/build/sm_90a/${n}_harness"
  timeout 40 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics gpu__time_duration.sum --csv "$h" \
    verify --seeds 1 --samples 8 > "$OUT/ncu_$n.csv" 2>> "$OUT/ncu_err.txt"
  case $n in *_nohint|*_hopper) ;; *)
    timeout 40 ncu --clock-control none -k "regex:nvjet|gemv|gemm|Kernel" -c 3 --metrics gpu__time_duration.sum --csv "$h" \
      bench --warmup 1 --reps 1 > "$OUT/ncu_cublas_$n.csv" 2>> "$OUT/ncu_err.txt" ;;
  esac
  stamp "ncu $n"
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import csv, glob, statistics, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"')) if r.get("Metric Name") == "gpu__time_duration.sum"]
    us = [float(r["Metric Value"].replace(",", "")) / 1000 for r in rows]
    names = sorted({r["Kernel Name"][:48] for r in rows})
    print(f"{path.rsplit('/', 1)[-1][4:-4]:34s} " + (f"{statistics.median(us):7.2f} us (of {len(us)}: "
          f"{', '.join(f'{u:.2f}' for u in us)})  {names}" if us else "no rows"))
PY
cat "$OUT/summary.txt"
pack 'summary\.txt'
