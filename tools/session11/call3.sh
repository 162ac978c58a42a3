#!/usr/bin/env bash
# Session 11, device call 3 (nvidia-h200): tools/persist_probe.cu with deeper register pipelines (4 buffers) and
# split accumulator chains at N = 14336, beside read ceilings and the model's picks + cuBLAS of the same run.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/persist_probe" tools/persist_probe.cu > "$OUT/nvcc.txt" 2>&1 &
dg gen --untuned specs/bench/decode_{8,16}x4096x14336.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "nvcc"
timeout 100 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 300 "$W/persist_probe" call3 > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
bench_rows "$OUT"/bench.json
cat "$OUT/probe.txt"
