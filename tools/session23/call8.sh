#!/usr/bin/env bash
# Session 23, device call 8 (nvidia-h200): call 7 had one settled launch a kernel, too few to say whether the
# evict_first hint costs anything one kernel at a time. ncu (caches flushed before each kernel, boost clocks) of
# the hopper kernels at 16, 64 and 128 rows of N = 14336, with and without the hint: 8 launches each (verify, seeds 1-8).
# Ran at a1ddf28 with `-k regex:hopper::` alone, which matches nothing (-k reads the function's base name, the same
# for hopper's kernel and the cta fallback's): no kernel was profiled, and the session's device time ran out. The
# filter below reads the demangled name, namespace included; not run.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml \
  specs/bench/up_128x14336x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/cache_hints.py "$W/t" "$W/t" decode_16x4096x14336=nohint decode_64x4096x14336=nohint \
  up_128x14336x4096=nohint >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 120 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for d in "$W"/t/*; do
  n=$(basename "$d")
  timeout 40 ncu --clock-control none --kernel-name-base demangled -k "regex:hopper::" -c 8 --metrics gpu__time_duration.sum --csv \
    "$d/build/sm_90a/${n}_harness" verify --seeds 1,2,3,4,5,6,7,8 --samples 8 > "$OUT/ncu_$n.csv" 2>> "$OUT/ncu_err.txt"
  stamp "ncu $n"
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import csv, glob, statistics, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    us = [float(r["Metric Value"].replace(",", "")) / 1000 for r in csv.DictReader(l for l in open(path) if l.startswith('"'))
          if r.get("Metric Name") == "gpu__time_duration.sum"]
    print(f"{path.rsplit('/', 1)[-1][4:-4]:30s} " + (f"median {statistics.median(us[1:]):6.2f} us of launches 2-{len(us)}: "
          + ", ".join(f"{u:.2f}" for u in us) if len(us) > 1 else "no rows"))
PY
cat "$OUT/summary.txt"
pack 'summary\.txt'
