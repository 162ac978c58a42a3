#!/usr/bin/env bash
# Session 27, device call 6 (nvidia-h200): every GPU test (pytest -m gpu) at this commit: the new A-multicast tests,
# and tcgemv8 (K = 1000), which renders a K-tail kernel and had not run since session 26's change.
source tools/device_lib.sh
timeout 585 python3 -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest rc=$?"
tail -15 "$OUT/pytest_gpu.txt"
