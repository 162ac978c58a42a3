#!/usr/bin/env bash
# Session 13, device calls 2-4 (nvidia-h200; the probe as at each call's commit): tools/session13/wgrs_probe.cu
# (the weight streamed through registers into wgmma's A operand, the activation staged in shared memory as its B
# operand), checked against an f32 reference and
# graph-timed with the weight rotated past L2; beside `deepgemm bench` of the current picks at the same shapes.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -Xptxas -v -o "$W/wgrs_probe" \
  tools/session13/wgrs_probe.cu > "$OUT/ptxas.txt" 2>&1; stamp "nvcc rc=$?"
B=specs/bench
dg gen --untuned $B/decode_8x4096x14336.yaml $B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml \
  $B/up_128x14336x4096.yaml $B/decode_16x4096x4096.yaml $B/decode_64x4096x4096.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 150 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 "$W/wgrs_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
timeout 100 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
{ cat "$OUT/probe.txt"; bench_rows "$OUT/bench.json"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|bench\.json|probe\.txt'
