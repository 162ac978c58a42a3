#!/usr/bin/env bash
# Session 11, device call 5 (nvidia-h200): why call 4's multicast kernels ran 2-6x slower: ncu (full set) of the
# 64x112 tiling of [64,4096]x[4096,14336] without and with the multicast, and of 64x64 at N = 4096 with it.
source tools/device_lib.sh
rv() { python3 tools/render_variant.py "$1" "$W/mc" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1; }
t() { echo "{\"block_m\":$1,\"block_n\":$2,\"consumers\":$3,\"ctas_per_sm\":1,\"stages\":$4,\"k_splits\":1,\"a_multicast\":$5}"; }
rv specs/bench/decode_64x4096x14336.yaml "$(t 64 112 1 8 1)" _112_mc1
rv specs/bench/decode_64x4096x14336.yaml "$(t 64 112 1 8 2)" _112_mc2
rv specs/bench/decode_64x4096x4096.yaml "$(t 64 64 1 8 2)" _64_mc2
timeout 200 python3 -m dgemm_cli build "$W"/mc -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ncu_full "$W"/mc/*; stamp "ncu"
for f in "$OUT"/ncu_details_*.txt; do echo "== $f"; grep -E "Duration|Grid Size|Cluster Size|Cluster Sched|Max Active Clusters|Registers Per|Waves Per SM|Achieved Occupancy|DRAM Throughput|Memory Throughput|Block Limit|Threads  " "$f" | head -24; done
pack 'ncu_details_.*\.txt'
