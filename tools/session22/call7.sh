#!/usr/bin/env bash
# Session 22, device call 7 (nvidia-h200; written, not run: the session's device time ran out): why cuBLAS's
# activation multicast reads A from L2 once a cluster and ours (tools/session22/multicast.py) does not (calls 4, 5).
# ncu --set full of our multicast variant and of cuBLAS's kernel for [128,4096]x[4096,14336] bf16 (caches flushed,
# boost clocks): their SASS's TMA instructions (UTMALDG and its modifiers, UTMAPF, the barrier arrives), the launch
# statistics (cluster size, scheduling) and L2's sectors by source; a short table of the TMA lines last.
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml -o "$W/p" > "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/p" "$W/p" up_128x14336x4096=2 >> "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/p/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
h="$W/p/up_128x14336x4096_mc2/build/sm_90a/up_128x14336x4096_mc2_harness"
for who in ours cublas; do
  k="regex:^up_128x14336x4096_mc2_kernel"; [ "$who" = cublas ] && k="regex:nvjet"
  timeout 150 ncu --clock-control none -k "$k" -c 1 --set full --import-source no -o "$W/$who" "$h" bench --warmup 2 --reps 2 \
    > "$OUT/ncu_run_$who.txt" 2>&1; stamp "ncu $who rc=$?"
  ncu --import "$W/$who.ncu-rep" --page details --print-details all > "$OUT/ncu_details_$who.txt" 2>&1
  ncu --import "$W/$who.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_sass_$who.csv" 2>&1
done
{ for who in ours cublas; do
    echo "== $who: TMA and barrier instructions (count, opcode with modifiers)"
    grep -oE 'UTMA[A-Z0-9_.]*|UBLKCP[A-Z0-9_.]*|SYNCS[A-Z0-9_.]*' "$OUT/ncu_sass_$who.csv" | sort | uniq -c | sort -rn | head -20
    grep -E 'Cluster|Grid Size|Duration|L2 Hit Rate' "$OUT/ncu_details_$who.txt" | head -12
  done; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|ncu_sass_ours\.csv|ncu_sass_cublas\.csv'
