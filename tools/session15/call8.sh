#!/usr/bin/env bash
# Session 15, device call 8 (nvidia-h200): the run-time-M bit-identity GPU test on its new spec (K = 4096: gemv,
# tcgemv and hopper buckets; call 6 found the K = 2048 spec's buckets all hopper's).
source tools/device_lib.sh
timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_verify.py -k "run_time_m_artifact_is_bit_identical" > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest rc=$?"
tail -5 "$OUT/pytest_gpu.txt"
