#!/usr/bin/env bash
# Session 7, device call 3 (nvidia-h200): where the conv kernels' time goes. exp/c3 holds the two conv
# benchmarks (model's picks) and two hand-set tilings of the 8x256 one (tools/render_variant.py): build,
# verify, bench; ncu --set full on the 8x256 model pick and its 128x256 variant, then the per-instruction
# (SASS) source page and the raw metrics from the saved reports.
source tools/device_lib.sh
ncu --version > "$OUT/ncu_version.txt" 2>&1
timeout 200 python3 -m dgemm_cli build exp/c3 -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify exp/c3 --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 90 python3 -m dgemm_cli bench exp/c3 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
ncu_full exp/c3/conv_nchw_8x256x56x56_k512 exp/c3/conv_nchw_8x256x56x56_k512_t128x256 exp/c3/conv_nchw_32x64x56x56_k64
stamp ncu
report
for f in "$OUT"/ncu_details_*.txt; do
  echo "== $(basename "$f")"
  grep -E "Duration|Stall|stall" "$f" | head -20
done
head -c 600 "$OUT"/ncu_sass_conv_nchw_8x256x56x56_k512.csv
pack '(build|verify|bench)\.json'
