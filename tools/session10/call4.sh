#!/usr/bin/env bash
# Session 10, device call 4 (nvidia-h200): tools/swapmma_probe.cu, the weight in whole-line loads (4 rows x 128 B),
# one shuffle a word into mma fragments (activation as the mma's A operand): read orders, then checked and timed.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/swapmma_probe" tools/swapmma_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/swapmma_probe" > "$OUT/swapmma_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/swapmma_probe.txt"
