#!/usr/bin/env bash
# Session 7, device call 8 (nvidia-h200): which change slowed the N = 14336 decode kernels (call 7: 32.2 µs
# against 30.4 in the sixth session). exp/v0: the final code; v1: v0 without dependent launch (the wait, the
# trigger and the launch attribute edited out of the generated source); v2: v0 with the packed store off
# (`if (beta == 0.0f)` edited to false); v3: generated at f86a0b9. Bench v0..v3 twice, alternating.
source tools/device_lib.sh
timeout 200 python3 -m dgemm_cli build exp/v0 exp/v1 exp/v2 exp/v3 -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for r in 1 2; do for v in v0 v1 v2 v3; do
  timeout 60 python3 -m dgemm_cli bench exp/$v --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $v $r rc=$?"
done; done
bench_rows "$OUT"/bench_*.json
pack '(build)\.json|bench_.*\.json'
