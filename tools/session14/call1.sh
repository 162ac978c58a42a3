#!/usr/bin/env bash
# Session 14, device call 1 (nvidia-h200): tools/session14/smact_probe.cu (tcgemv's weight stream with the activation
# in shared memory, loaded once a block by TMA), checked against an f32 reference and graph-timed with the weight
# rotated past L2; beside `deepgemm bench` of the current picks at [8 / 16,4096]x[4096,14336].
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -Xptxas -v -o "$W/smact_probe" \
  tools/session14/smact_probe.cu > "$OUT/ptxas.txt" 2>&1; stamp "nvcc rc=$?"
B=specs/bench
dg gen --untuned $B/decode_8x4096x14336.yaml $B/decode_16x4096x14336.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 150 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench1.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 200 "$W/smact_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench2.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
{ cat "$OUT/probe.txt"; bench_rows "$OUT/bench1.json" "$OUT/bench2.json"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|bench1\.json|bench2\.json|probe\.txt'
