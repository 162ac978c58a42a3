#!/usr/bin/env bash
# Session 10, device call 10 (nvidia-h200): tools/swapmma_probe.cu call10: the activation loaded with the weight.s round.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/swapmma_probe" tools/swapmma_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/swapmma_probe" call10 > "$OUT/swapmma_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/swapmma_probe.txt"
