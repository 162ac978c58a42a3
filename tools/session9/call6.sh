#!/usr/bin/env bash
# Session 9, device call 6 (nvidia-h200): tools/regmma_probe.cu, a tensor-core kernel streaming the weight through
# registers (mma.sync, k-permuted fragments) at M = 8 / 16 (and 1), N = 14336 / 4096: checked, timed.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/regmma_probe" tools/regmma_probe.cu > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 200 "$W/regmma_probe" > "$OUT/regmma_probe.txt" 2>&1; stamp "probe rc=$?"
cat "$OUT/regmma_probe.txt"
