#!/usr/bin/env bash
# Session 6, device call 7 (nvidia-h200): compute-sanitizer memcheck, racecheck and synccheck on two K-split
# hopper kernels (tools/session6/sanitize/*.yaml: cut A box, 8 stages, an epilogue).
source tools/device_lib.sh
dg gen tools/session6/sanitize/*.yaml -o "$W" > "$OUT/gen.txt" 2>&1
timeout 90 python3 -m dgemm_cli build "$W" -j "$J" > "$OUT/build.txt" 2>&1; echo "build rc=$?"
for d in "$W"/*/; do
  n=$(basename "$d")
  for tool in memcheck racecheck synccheck; do
    timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 "$d/build/sm_90a/${n}_harness" verify --seeds 1 --samples 16 > "$OUT/san_${tool}_$n.txt" 2>&1
    echo "$tool $n rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/san_${tool}_$n.txt" | tail -1)"
  done
done
