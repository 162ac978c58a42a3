#!/usr/bin/env bash
# Session 22, device call 1 (nvidia-h200): (1) is hopper's decode kernel bound by each SM's rate or by the GPU's?
# The picks' tilings (128 rows bf16: 128x112, 2 consumers, 6 stages; 64 and 16 rows f16: 64x112, 8 stages) at
# N = 13888 / 14336 / 14784 = 124 / 128 / 132 tiles of 112, one tile a block: if the time stays level across the
# three, each SM's rate is the wall and spreading the work over all 132 SMs (stream-K) would pay 128/132; if the time
# follows the bytes, the DRAM is the wall. Benched in turn, 3 rounds. (2) session 21's call 6: ncu at boost clocks.
source tools/device_lib.sh
ONE='"ctas_per_sm":1,"k_splits":1'
mkdir -p "$W/specs"
for m in 16 64 128; do
  for n in 13888 14336 14784; do
    dt=f16; [ "$m" = 128 ] && dt=bf16
    printf 'name: ns_%sx%s\ndtype: %s\ngemm: {m: %s, n: %s, k: 4096}\noperands: {A: {layout: row}, B: {layout: col}, C: {layout: row}}\n' \
      "$m" "$n" "$dt" "$m" "$n" > "$W/specs/ns_${m}x$n.yaml"
    if [ "$m" = 128 ]; then a="{\"consumers\":2,\"block_m\":128,\"block_n\":112,\"stages\":6,\"l2_promotion\":\"256B\",$ONE}"
    else a="{\"consumers\":1,\"block_m\":64,\"block_n\":112,\"stages\":8,\"l2_promotion\":\"none\",$ONE}"; fi
    python3 tools/render_variant.py "$W/specs/ns_${m}x$n.yaml" "$W/t" hopper "$a" >> "$OUT/gen.txt" 2>&1 || echo "render $m $n failed" >> "$OUT/gen.txt"
  done
done
stamp "render"
build_verify 1 "$W"/t/*
bench_rounds 3 90 "$W"/t/*
bench_rows "$OUT"/bench_*.json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
# session 21's call 6
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/p" >> "$OUT/gen.txt" 2>&1
timeout 90 python3 -m dgemm_cli build "$W"/p -j "$J" --json > "$OUT/build_p.json" 2>> "$OUT/build_err.txt"; stamp "build p rc=$?"
M=gpu__time_duration.sum,gpc__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed,lts__d_sectors.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__d_sectors_fill_device.avg.pct_of_peak_sustained_elapsed,breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
for n in up_128x14336x4096 decode_64x4096x14336; do
  h="$W/p/$n/build/sm_90a/${n}_harness"
  timeout 60 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_err_$n.txt"
  stamp "ncu $n rc=$?"
done
h="$W/p/up_128x14336x4096/build/sm_90a/up_128x14336x4096_harness"
timeout 60 ncu --clock-control none -k regex:nvjet -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_cublas.csv" 2> "$OUT/ncu_err_cublas.txt"
stamp "ncu cublas rc=$?"
python3 - "$OUT" > "$OUT/ncu_summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    lines = [l for l in open(path) if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    print("==", path.rsplit("/", 1)[-1], len(rows), "rows")
    for r in rows:
        if r.get("ID") != "2":
            continue
        print(f"  {r.get('Kernel Name', '')[:30]:30s} {r.get('Metric Name', ''):70s} {r.get('Metric Unit', ''):10s} {r.get('Metric Value', '')}")
PY
{ cat "$OUT/failures.txt"; cat "$OUT/bench_rows.txt"; cat "$OUT/ncu_summary.txt"; } > "$OUT/summary.txt"
cat "$OUT/bench_rows.txt"; tail -5 "$OUT/log.txt"
pack 'summary\.txt|verify\.json|bench_1\.json'
