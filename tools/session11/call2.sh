#!/usr/bin/env bash
# Session 11, device call 2 (nvidia-h200): tools/persist_probe.cu with 32 warps an SM (2 blocks of 16 or 1 of 32,
# 64 registers a thread) at N = 14336, beside grid-stride read ceilings of the same run.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/persist_probe" tools/persist_probe.cu > "$OUT/nvcc.txt" 2>&1; stamp "nvcc rc=$?"
timeout 300 "$W/persist_probe" call2 > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/probe.txt"
