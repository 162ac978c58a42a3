#!/usr/bin/env bash
# Session 10, device call 2 (nvidia-h200): tools/rowstream_probe.cu's cp.async set (call 1 ran `bulk`).
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/rowstream_probe" tools/rowstream_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 300 "$W/rowstream_probe" cp > "$OUT/rowstream_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/rowstream_probe.txt"
