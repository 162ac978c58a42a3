#!/usr/bin/env bash
# Session 27, device call 7 (nvidia-h200): call 5 and a part of call 6 in one call (starts were refused three times,
# at device time each): the GPU tests of the A multicast, the hopper GPU tests and tcgemv8 (K = 1000, a K-tail
# kernel not run since session 26's change), then call 5.
source tools/device_lib.sh
timeout 300 python3 -m pytest -q -m gpu tests -k "multicast or hopper or tcgemv8" > "$OUT/pytest_gpu_part.txt" 2>&1; stamp "pytest rc=$?"
tail -4 "$OUT/pytest_gpu_part.txt"
OUT=$OUT/c5; mkdir -p "$OUT"; export OUT
bash tools/session27/call5.sh
