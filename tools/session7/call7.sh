#!/usr/bin/env bash
# Session 7, device call 7 (nvidia-h200): the final code. exp/final: specs/bench and specs/*.yaml on the model's
# picks (gen --untuned; the full reductions, the skinny and the f32 benchmarks left out: untouched this session);
# exp/finalh: the packed/staged tail specs on hopper at three tilings; exp/old: the convs at f86a0b9.
# Build, verify (seed 1, --repeat 2), bench (both sides graph-replayed over inputs rotated past L2).
source tools/device_lib.sh
timeout 230 python3 -m dgemm_cli build exp/final exp/finalh exp/old -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify exp/final exp/finalh --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 200 python3 -m dgemm_cli bench exp/final exp/old --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
report
pack '(build|verify|bench)\.json'
