#!/usr/bin/env bash
# Session 18, device call 4 (nvidia-h200): every GPU test (pytest -m gpu) at this commit.
source tools/device_lib.sh
timeout 560 python3 -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest rc=$?"
tail -15 "$OUT/pytest_gpu.txt"
