#!/usr/bin/env bash
# Written in session 11, run in session 12 (tools/session12/call1.sh packs its logs): tools/wsprobe.cu (warp-specialized register streaming:
# producer warps only load, consumer warps only compute, a ring of shared-memory slots between them) at
# N = 14336 / 4096, M = 5, 8, 12, 16, beside the model's picks and cuBLAS in the same run.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/wsprobe" tools/wsprobe.cu > "$OUT/nvcc.txt" 2>&1 &
dg gen --untuned specs/bench/decode_{8,16}x4096x{14336,4096}.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "nvcc"
timeout 100 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 300 "$W/wsprobe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
bench_rows "$OUT"/bench.json
cat "$OUT/probe.txt"
