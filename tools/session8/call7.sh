#!/usr/bin/env bash
# Session 8, device call 7 (nvidia-h200): the gemv cost's launch-bound terms. The launch-floor benchmarks,
# decode_qk and the run-time N = 128 artifact on the model's picks, and the 40 small-M random specs (seed 21) on
# the model's picks (9 of them changed family or tiling). Build, verify (seed 1; decode set --repeat 2), bench.
source tools/device_lib.sh
dg gen specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x2048x512.yaml specs/bench/decode_dyn_1-64x4096x128.yaml specs/decode_qk.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
dg gen "$W"/rss/*.yaml -o "$W/randsmall" >> "$OUT/gen.txt" 2>&1
timeout 150 python3 -m dgemm_cli build "$W"/dec "$W"/randsmall -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/dec --seeds 1 --repeat 2 --json > "$OUT/verify_dec.json" 2> "$OUT/verify_err.txt"; stamp "verify dec rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W"/randsmall --seeds 1 --json > "$OUT/verify_randsmall.json" 2>> "$OUT/verify_err.txt"; stamp "verify rand rc=$?"
timeout 40 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_floor.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 30 python3 -m dgemm_cli bench "$W"/dec/*dyn* --m 1,2,3,4,8,16,64 --json > "$OUT/bench_dyn128.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
bench_rows "$OUT"/bench_*.json
report | grep -E "verify|build"
pack '(build|verify_.*)\.json|bench_.*\.json'
