#!/usr/bin/env bash
# Session 15, device call 1 (nvidia-h200): tools/session15/kstart_probe.cu, the TMA read of the decode weight with
# each tile's k walk started at its own k-tile, more stages, other L2 promotions (no math).
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o "$W/kstart" tools/session15/kstart_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/kstart" > "$OUT/kstart.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/kstart.txt"
