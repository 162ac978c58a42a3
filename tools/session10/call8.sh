#!/usr/bin/env bash
# Session 10, device call 8 (nvidia-h200): tools/swapmma_probe.cu call8: the math with parts left out (activation loads, mmas, shuffles).
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/swapmma_probe" tools/swapmma_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/swapmma_probe" call8 > "$OUT/swapmma_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/swapmma_probe.txt"
