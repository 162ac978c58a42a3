#!/usr/bin/env bash
# Session 7, device call 4 (nvidia-h200): the packed store. exp/new: the conv and square benchmarks,
# specs/epilogue (model's picks) and two hand-set tilings of conv 8x256; exp/newh: the packed/staged tail specs
# on hopper at three tilings; exp/rand: 40 random TMA specs on hopper (seed 61); exp/old: the benchmarks
# generated at f86a0b9. Build, verify (seeds 1,2, --repeat 2), bench old/new twice, compute-sanitizer.
source tools/device_lib.sh
timeout 200 python3 -m dgemm_cli build exp/new exp/newh exp/old exp/rand -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify exp/new exp/newh exp/rand --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
B="conv_nchw_32x64x56x56_k64 conv_nchw_8x256x56x56_k512 sq4096_bf16 sq4096_bf16_ccol up_4096x14336x4096"
for r in 1 2; do
  for v in old new; do
    dirs=""; for n in $B; do dirs="$dirs exp/$v/$n"; done
    [ $v = new ] && dirs="$dirs exp/new/conv_nchw_8x256x56x56_k512_t128x128c2 exp/new/conv_nchw_8x256x56x56_k512_t128x256c2 exp/new/conv_bias_relu exp/new/linear_bias_gelu"
    timeout 100 python3 -m dgemm_cli bench $dirs --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $v $r rc=$?"
  done
done
sanitize exp/new/conv_nchw_8x256x56x56_k512 exp/newh/packed_relu_clamp_ccol_mtail_t128x256c2 exp/newh/packed_gelu_crow_ntail_t128x128c1
stamp sanitize
report
cat "$OUT/sanitize.txt"
bench_rows "$OUT"/bench_*.json
pack '(build|verify)\.json|bench_.*\.json'
