#!/usr/bin/env bash
# Session 22, device call 2 (nvidia-h200): hopper's A multicast over clusters of 2 rebuilt on the current kernels
# (tools/session22/multicast.py) at 128 rows bf16 (also over session 21's 7 stages, tools/session21/overlay.py) and
# 64 rows, beside the picks; verified (seeds 1, 2, --repeat 2), benched in turn, 3 rounds; memcheck and synccheck of
# the 128-row variant; ncu at boost clocks of the 128-row variant (does the L2 fabric's busy time fall?).
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/t" "$W/t" up_128x14336x4096=2 decode_64x4096x14336=2 >> "$OUT/gen.txt" 2>&1
python3 tools/session21/overlay.py "$W/t" "$W/o" up_128x14336x4096=7 >> "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/o" "$W/t" up_128x14336x4096_s7=2 >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | tr '\n' ' ')"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/t/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
bench_rounds 3 90 "$W"/t/*
bench_rows "$OUT"/bench_*.json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
n=up_128x14336x4096_mc2; h="$W/t/$n/build/sm_90a/${n}_harness"
for tool in memcheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_$tool.txt" 2>&1
  echo "$tool $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$tool.txt" | tail -1)" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
M=gpu__time_duration.sum,gpc__cycles_elapsed.avg.per_second,dram__bytes_read.sum.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
for n in up_128x14336x4096 up_128x14336x4096_mc2 decode_64x4096x14336_mc2; do
  h="$W/t/$n/build/sm_90a/${n}_harness"
  timeout 60 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_err_$n.txt"
  stamp "ncu $n rc=$?"
done
python3 - "$OUT" > "$OUT/ncu_summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"')) if r.get("ID") == "2"]
    print("==", path.rsplit("/", 1)[-1])
    for r in rows:
        print(f"  {r.get('Metric Name', ''):62s} {r.get('Metric Unit', ''):6s} {r.get('Metric Value', '')}")
PY
{ cat "$OUT/failures.txt"; python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"; cat "$OUT/sanitize.txt" "$OUT/bench_rows.txt" "$OUT/ncu_summary.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json'
