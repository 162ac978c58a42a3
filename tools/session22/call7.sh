#!/usr/bin/env bash
# Session 22, device call 7 (nvidia-h200; written in session 22, run as session 23's call 1 at ead2851): why cuBLAS's
# activation multicast reads A from L2 once a cluster and ours (tools/session22/multicast.py) does not (calls 4, 5).
# ncu --set full of our multicast variant and of cuBLAS's kernel for [128,4096]x[4096,14336] bf16 (caches flushed,
# boost clocks): their SASS's TMA instructions (UTMALDG and its modifiers, UTMAPF, the barrier arrives), the launch
# statistics (cluster size, scheduling) and L2's sectors by source; a short table of the TMA lines last. Before it,
# 12 random specs whose plans take the B-first K-split kernel (tools/session22/bfirst_split_specs.py), verified. First,
# tools/session22/mcast_probe.cu: the kernel's loads without its math, A alone and beside the weight, with and
# without the multicast (modes 0-3), timed and under ncu: does the H200's multicast read A from L2 once a cluster?
source tools/device_lib.sh
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I tools tools/session22/mcast_probe.cu -o "$W/mcast_probe" > "$OUT/probe_build.txt" 2>&1
stamp "probe build rc=$?"
timeout 60 "$W/mcast_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
MP=gpu__time_duration.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_requests_srcunit_tex_op_read.sum
timeout 120 ncu --clock-control none -k regex:probe -c 8 --metrics "$MP" --csv "$W/mcast_probe" once > "$OUT/probe_ncu.csv" 2> "$OUT/probe_ncu_err.txt"
stamp "probe ncu rc=$?"
# The B-first K-split kernel on random specs (session 22 verified it only through issue 7's N = 4096 kernels).
python3 tools/session22/bfirst_split_specs.py 12 24 "$W/bs" > "$OUT/bfsplit_specs.txt" 2>&1
dg gen --untuned "$W"/bs/*.yaml -o "$W/v" > "$OUT/gen.txt" 2>&1; stamp "gen bfsplit rc=$?"
build_verify 1,2 "$W"/v/*
timeout 200 python3 -m dgemm_cli verify "$W"/v/* --seeds 3 --repeat 2 --json > "$OUT/verify_repeat.json" 2>> "$OUT/verify_err.txt"
stamp "verify repeat rc=$?"
dg gen --untuned specs/bench/up_128x14336x4096.yaml -o "$W/p" >> "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/p" "$W/p" up_128x14336x4096=2 >> "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/p/* -j "$J" --json > "$OUT/build_p.json" 2>> "$OUT/build_err.txt"; stamp "build p rc=$?"
h="$W/p/up_128x14336x4096_mc2/build/sm_90a/up_128x14336x4096_mc2_harness"
for who in ours cublas; do
  k="regex:^up_128x14336x4096_mc2_kernel"; [ "$who" = cublas ] && k="regex:nvjet"
  timeout 150 ncu --clock-control none -k "$k" -c 1 --set full --import-source no -o "$W/$who" "$h" bench --warmup 2 --reps 2 \
    > "$OUT/ncu_run_$who.txt" 2>&1; stamp "ncu $who rc=$?"
  ncu --import "$W/$who.ncu-rep" --page details --print-details all > "$OUT/ncu_details_$who.txt" 2>&1
  ncu --import "$W/$who.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_sass_$who.csv" 2>&1
done
{ failures "$OUT/verify.json" "$OUT/verify_repeat.json"
  python3 -c "import json, sys; r = [x for f in sys.argv[1:] for x in json.load(open(f))]; print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json" "$OUT/verify_repeat.json"
  echo "== mcast_probe (modes: 0 none, 1 halves multicast, 2 one block multicasts all, 3 cluster without multicast)"
  cat "$OUT/probe.txt"
  python3 - "$OUT/probe_ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
for r in rows:
    print(f"  {r['ID']:>2} {r['Kernel Name'][:34]:34s} {r['Metric Name']:48s} {r['Metric Value']}")
PY
  for who in ours cublas; do
    echo "== $who: TMA and barrier instructions (count, opcode with modifiers)"
    grep -oE 'UTMA[A-Z0-9_.]*|UBLKCP[A-Z0-9_.]*|SYNCS[A-Z0-9_.]*' "$OUT/ncu_sass_$who.csv" | sort | uniq -c | sort -rn | head -20
    grep -E 'Cluster|Grid Size|Duration|L2 Hit Rate' "$OUT/ncu_details_$who.txt" | head -12
  done; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|ncu_sass_ours\.csv|ncu_sass_cublas\.csv|probe_ncu\.csv|verify\.json|bfsplit_specs\.txt'
