#!/usr/bin/env bash
# Session 20, device call 6 (nvidia-h200): the B prefetch before the wait in hopper kernels off the decode shapes
# (large GEMMs with full grids, a conv with flat rows), each beside itself without it (_old), alternately, 2 rounds.
source tools/device_lib.sh
S="specs/bench/sq4096_bf16.yaml specs/bench/sq8192_f16.yaml specs/bench/up_4096x14336x4096.yaml
  specs/bench/down_4096x4096x14336.yaml specs/bench/conv_nchw_8x256x56x56_k512.yaml"
# shellcheck disable=SC2086
dg gen --untuned $S -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session20/variants.py "$W/new" "$W/var" --variants _old >> "$OUT/gen.txt" 2>&1
timeout 150 python3 -m dgemm_cli build "$W"/new "$W"/var -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ALL=$(ls -d "$W"/new/* "$W"/var/* | sort -t/ -k5)
for r in 1 2; do
  # shellcheck disable=SC2086
  timeout 60 python3 -m dgemm_cli bench $ALL --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench r$r rc=$?"
done
python3 tools/session20/table.py "$OUT" | grep -v "verify\|bench_others" | tee "$OUT/summary.txt"
pack 'summary\.txt'
