#!/usr/bin/env bash
# Session 7, device call 5 (nvidia-h200): flat rows (tiles across the m loops) with the packed store.
# exp/new: specs/*.yaml, specs/epilogue, the two conv benchmarks (model's picks) and hand-set tilings of them;
# exp/rand: 80 random TMA specs with a row letter in whole 64-row blocks (seeds 71, 72) on hopper; exp/flat: their
# 128-row-tile variants where the tiles run across the m loops (tools/flat_variants.py); exp/old: the
# convs at f86a0b9. Build, verify (seeds 1,2, --repeat 2), bench, compute-sanitizer on two flat kernels.
source tools/device_lib.sh
timeout 260 python3 -m dgemm_cli build exp/new exp/rand exp/flat exp/old -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 170 python3 -m dgemm_cli verify exp/new exp/rand exp/flat --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 60 python3 -m dgemm_cli bench exp/old --json > "$OUT/bench_old_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench old $r rc=$?"
  timeout 100 python3 -m dgemm_cli bench exp/new/conv* exp/new/sq* exp/new/conv1x1_nchw --json > "$OUT/bench_new_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench new $r rc=$?"
done
sanitize exp/new/conv_nchw_8x256x56x56_k512 exp/new/conv_bias_relu $(ls -d exp/flat/*_flat64 | head -1)
stamp sanitize
report | head -3
cat "$OUT/sanitize.txt"
bench_rows "$OUT"/bench_*.json
pack '(build|verify)\.json|bench_.*\.json'
