#!/usr/bin/env bash
# Session 15, device call 4 (nvidia-h200): tools/session15/kstart_probe.cu, the TMA read of the decode weight at every
# L2 promotion, with and without an eviction-priority hint on the loads; no math.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o "$W/kstart" tools/session15/kstart_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/kstart" 2 > "$OUT/kstart.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/kstart.txt"
