#!/usr/bin/env bash
# Session 11, device call 1 (nvidia-h200): tools/persist_probe.cu (persistent blocks, each warp's slice of the
# activation loaded once; weight as the mma's A operand) beside the current picks for M = 8 and 16 and their cuBLAS
# times on the same machine.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/persist_probe" tools/persist_probe.cu > "$OUT/nvcc.txt" 2>&1; stamp "nvcc rc=$?"
dg gen --untuned specs/bench/decode_{8,16}x4096x{14336,4096}.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 300 "$W/persist_probe" call1 > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
grep -h "^// Plan" "$W"/dec/*/*.cu | cut -c1-120
bench_rows "$OUT"/bench.json
cat "$OUT/probe.txt"
