#!/usr/bin/env bash
# Session 27, device call 4 (nvidia-h200): the A-multicast kernel stays at 13.1-13.4 µs at 8-16 stages (call 3), the
# K-split kernel 11.26 at the same size (the run-time artifact at m = 44). The swapped spec [4096,4096]x[4096,44]
# planned both ways (render_variant: 64x32 multicast 10 stages; 64x64 split 2, 8 stages, as the artifact runs),
# benched in turn (3 rounds) and each profiled (ncu --set full): where does the multicast kernel's time go?
source tools/device_lib.sh
S44=tools/session27/specs/swap_4096x44x4096.yaml
python3 tools/render_variant.py $S44 "$W/g" hopper \
  '{"block_m": 64, "block_n": 32, "consumers": 1, "ctas_per_sm": 1, "stages": 10, "k_splits": 1, "a_multicast": 2}' _mc > "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py $S44 "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 2, "a_multicast": 1, "l2_promotion": "none"}' _split >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
build_verify 1,2 "$W"/g/*
for r in 1 2 3; do
  timeout 40 python3 -m dgemm_cli bench "$W"/g/* --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench r$r rc=$?"
done
ncu_full "$W/g/swap_4096x44x4096_mc" "$W/g/swap_4096x44x4096_split"
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  cat "$OUT/failures.txt"; bench_rows "$OUT"/bench_*.json
  for n in mc split; do echo "== $n"; grep -E "^    (Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit|Compute \(SM\) Throughput|Grid Size|Max Active Clusters)" "$OUT/ncu_details_swap_4096x44x4096_$n.txt" | sort -u; done
  for n in mc split; do echo "== stalls $n"; python3 - "$OUT/ncu_sass_swap_4096x44x4096_$n.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(list(open(sys.argv[1]))[1:]))
key = "Warp Stall Sampling (All Samples)"
for r in sorted(rows, key=lambda r: -float(r[key] or 0))[:10]:
    print(r[key], r["Source"].strip()[:100])
PY
  done; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|ncu_details_swap_4096x44x4096_mc\.txt|ncu_details_swap_4096x44x4096_split\.txt|bench_1\.json'
