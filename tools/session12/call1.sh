#!/usr/bin/env bash
# Session 12, call 1: tools/session11/next_wsprobe.sh (the warp-specialized probe tools/wsprobe.cu beside the
# model's picks and cuBLAS at N = 14336 / 4096, M = 5..16), with the logs packed.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/wsprobe" tools/wsprobe.cu > "$OUT/nvcc.txt" 2>&1 &
dg gen --untuned specs/bench/decode_{8,16}x4096x{14336,4096}.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "nvcc"
timeout 100 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 300 "$W/wsprobe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
bench_rows "$OUT"/bench.json
cat "$OUT/probe.txt"
pack "probe\.txt|bench\.json"
