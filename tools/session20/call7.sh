#!/usr/bin/env bash
# Session 20, device call 7 (nvidia-h200): the B prefetch only where every block has one tile (call 6: 2-5% slower
# on a conv of 800 tiles and 4096 x 4096 x 14336), each beside itself without it (_old), 3 rounds in turn.
source tools/device_lib.sh
S="specs/bench/decode_16x4096x14336.yaml specs/bench/down_4096x4096x14336.yaml specs/bench/conv_nchw_8x256x56x56_k512.yaml"
# shellcheck disable=SC2086
dg gen --untuned $S -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session20/variants.py "$W/new" "$W/var" --variants _old >> "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W"/new "$W"/var -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ALL=$(ls -d "$W"/new/* "$W"/var/* | sort -t/ -k5)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 40 python3 -m dgemm_cli bench $ALL --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench r$r rc=$?"
done
timeout 30 python3 -m dgemm_cli verify "$W"/new --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
python3 tools/session20/table.py "$OUT" | grep -v "bench_others\|verify_nowait" | tee "$OUT/summary.txt"
pack 'summary\.txt'
