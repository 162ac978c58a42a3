#!/usr/bin/env bash
# Session 28, device call 1 (nvidia-h200): every GPU test (pytest -m gpu) at this commit, in two processes side by
# side (tests/test_gpu_verify.py, and the other files), so that the 40 tests fit one call; --durations for the
# next split.
source tools/device_lib.sh
timeout 570 python3 -m pytest -q -m gpu tests/test_gpu_verify.py --durations=0 -p no:cacheprovider \
  > "$OUT/pytest_gpu_verify.txt" 2>&1 &
P1=$!
timeout 570 python3 -m pytest -q -m gpu tests --ignore=tests/test_gpu_verify.py --durations=0 -p no:cacheprovider \
  > "$OUT/pytest_gpu_rest.txt" 2>&1 &
P2=$!
wait $P1; stamp "pytest test_gpu_verify rc=$?"
wait $P2; stamp "pytest the rest rc=$?"
grep -E "passed|failed|error" "$OUT"/pytest_gpu_*.txt | tail -6
grep -E "^(FAILED|ERROR)" "$OUT"/pytest_gpu_*.txt | head -20
