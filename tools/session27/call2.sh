#!/usr/bin/env bash
# Session 27, device call 2 (nvidia-h200): why call 1's A-multicast kernel ran 47 µs (4x cuBLAS) at every token
# count: ncu --set full of swap_4096x44x4096 (its grid, clusters, occupancy, stall samples).
source tools/device_lib.sh
dg gen --untuned tools/session27/specs/swap_4096x44x4096.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/g/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ncu_full "$W/g/swap_4096x44x4096"
grep -E "Grid Size|Cluster|Block Size|Duration|Registers|Achieved Occupancy|Waves|Theoretical Occupancy|Memory Throughput|DRAM Throughput|L2 Hit|Dynamic Shared" "$OUT/ncu_details_swap_4096x44x4096.txt" | head -40 > "$OUT/summary.txt"
python3 - "$OUT/ncu_sass_swap_4096x44x4096.csv" >> "$OUT/summary.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
if rows:
    key = next((k for k in rows[0] if "Warp Stall Sampling (All" in k), None)
    if key:
        rows.sort(key=lambda r: -float((r[key] or "0").replace(",", "")))
        for r in rows[:14]:
            print(r[key], r.get("Source", "")[:110])
PY
cat "$OUT/summary.txt"
pack 'summary\.txt|ncu_details_swap_4096x44x4096\.txt'
