#!/usr/bin/env bash
# Session 10, device call 9 (nvidia-h200): tools/swapmma_probe.cu call9: the activation staged in shared memory, K split over a cluster.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/swapmma_probe" tools/swapmma_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/swapmma_probe" call9 > "$OUT/swapmma_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/swapmma_probe.txt"
