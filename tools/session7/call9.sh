#!/usr/bin/env bash
# Session 7, device call 9 (nvidia-h200): the final launch rule (dependent launch only for a grid that takes
# every block slot) on the N = 14336 decode/up shapes and the convs, model's picks: build, verify (seed 1,
# --repeat 2), bench.
source tools/device_lib.sh
timeout 150 python3 -m dgemm_cli build exp/f -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify exp/f --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 90 python3 -m dgemm_cli bench exp/f --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
report
pack '(build|verify|bench)\.json'
