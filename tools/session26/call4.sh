#!/usr/bin/env bash
# Session 26, device call 4 (nvidia-h200): call 3 (cuBLAS's kernels at m = 40, 44, 60; about 90 s) and then every
# GPU test (`pytest -m gpu`, 6-8 minutes before), in one call: the session's device time allows one more start.
source tools/device_lib.sh
mkdir -p "$OUT/call3"; OUT="$OUT/call3" timeout 110 bash tools/session26/call3.sh > "$OUT/call3.txt" 2>&1; stamp "call3 rc=$?"
timeout 470 python3 -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest rc=$?"
tail -15 "$OUT/pytest_gpu.txt"
head -40 "$OUT/call3/summary.txt"
