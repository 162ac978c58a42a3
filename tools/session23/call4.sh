#!/usr/bin/env bash
# Session 23, device call 4 (nvidia-h200). Call 1: ours and cuBLAS's 128-row kernels move the same sectors from L2
# to the request coalescer, but ours crosses L2's partition fabric 1.2 M sectors more (1.3 M far hits against 90 K),
# and the fabric bounds L2. (1) tools/session23/l2_probe.cu: the kernel's loads alone under each L2 promotion and
# with eviction priorities as TMA cache hints (B evict_first, A evict_last), timed and under ncu (fabric sectors,
# far hits, L2 reads, DRAM bytes). (2) The same hints on the kernels (tools/session23/cache_hints.py) at 128, 64 and
# 16 rows of N = 14336: verified (seeds 1, 2, --repeat 2), benched in turn, 3 rounds; ncu's fabric counts of the
# 128-row kernel with and without them.
source tools/device_lib.sh
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I tools tools/session23/l2_probe.cu -o "$W/l2_probe" > "$OUT/probe_build.txt" 2>&1
stamp "probe build rc=$?"
timeout 90 "$W/l2_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
MP=gpu__time_duration.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read_evict_first_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_read_evict_last_lookup_hit.sum
timeout 150 ncu --clock-control none -k regex:probe -c 10 --metrics "$MP" --csv "$W/l2_probe" once > "$OUT/probe_ncu.csv" 2> "$OUT/probe_ncu_err.txt"
stamp "probe ncu rc=$?"
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml \
  specs/bench/decode_16x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/cache_hints.py "$W/t" "$W/t" up_128x14336x4096=bfirst up_128x14336x4096=alast \
  up_128x14336x4096=both decode_64x4096x14336=bfirst decode_64x4096x14336=both decode_16x4096x14336=bfirst \
  >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | tr '\n' ' ')"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 240 python3 -m dgemm_cli verify "$W"/t/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" > "$OUT/failures.txt"
for v in up_128x14336x4096 up_128x14336x4096_both; do
  timeout 60 ncu --clock-control none -k "regex:^${v}_kernel" -c 1 --metrics "$MP" --csv \
    "$W/t/$v/build/sm_90a/${v}_harness" verify --seeds 1 --samples 8 > "$OUT/ncu_$v.csv" 2>> "$OUT/probe_ncu_err.txt"
  stamp "ncu $v rc=$?"
done
bench_rounds 3 150 "$W"/t/*
bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
{ cat "$OUT/failures.txt"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/probe.txt"
  python3 - "$OUT/probe_ncu.csv" "$OUT"/ncu_up_128x14336x4096*.csv <<'PY'
import csv, sys
for path in sys.argv[1:]:
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"'))]
    for r in rows:
        print(f"  {path.rsplit('/', 1)[-1][:18]:18s} {r['ID']:>2} {r['Metric Name'][:52]:52s} {r['Metric Value']:>16s}")
PY
  cat "$OUT/bench_rows.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|probe_ncu\.csv'
