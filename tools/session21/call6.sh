#!/usr/bin/env bash
# Session 21, device call 6 (nvidia-h200): call 4's ncu comparison at the clocks the bench runs at
# (--clock-control none; call 4 ran at ncu's base-clock lock, about 1.3 GHz): hopper's 128-row pick, the 64-row
# kernel and cuBLAS's 128-row kernel; is the L2's throughput the wall at boost clocks too?
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
timeout 90 python3 -m dgemm_cli build "$W"/t -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
M=gpu__time_duration.sum,gpc__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed,lts__d_sectors.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__d_sectors_fill_device.avg.pct_of_peak_sustained_elapsed,breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
for n in up_128x14336x4096 decode_64x4096x14336; do
  h="$W/t/$n/build/sm_90a/${n}_harness"
  timeout 60 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_err_$n.txt"
  stamp "ncu $n rc=$?"
done
h="$W/t/up_128x14336x4096/build/sm_90a/up_128x14336x4096_harness"
timeout 60 ncu --clock-control none -k regex:nvjet -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_cublas.csv" 2> "$OUT/ncu_err_cublas.txt"
stamp "ncu cublas rc=$?"
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    lines = [l for l in open(path) if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    print("==", path.rsplit("/", 1)[-1], len(rows), "rows")
    for r in rows:
        print(f"  {r.get('ID')} {r.get('Kernel Name', '')[:40]:40s} {r.get('Metric Name', ''):70s} {r.get('Metric Unit', ''):10s} {r.get('Metric Value', '')}")
PY
cat "$OUT/summary.txt"
pack 'summary\.txt'
