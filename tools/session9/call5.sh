#!/usr/bin/env bash
# Session 9, device call 5 (nvidia-h200): correctness of the final model's picks where they changed or where gemv
# runs with views and epilogues: specs/*.yaml, specs/epilogue, specs/einsum, the full-reduction benchmarks, the
# random mixed set (seed 7, 60 specs) and small-M set (seed 21, 40); bench of the epilogue decode spec (now gemv).
source tools/device_lib.sh
dg gen --untuned specs/*.yaml specs/epilogue/*.yaml specs/einsum/*.yaml specs/bench/fullred_*.yaml -o "$W/sp" > "$OUT/gen.txt" 2>&1
dg random-specs 60 -o "$W/rsm" --seed 7 > /dev/null
dg gen "$W"/rsm/*.yaml -o "$W/randmixed" >> "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
dg gen "$W"/rss/*.yaml -o "$W/randsmall" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/sp "$W"/randmixed "$W"/randsmall -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/sp --seeds 1 --json > "$OUT/verify_specs.json" 2> "$OUT/verify_err.txt"; stamp "verify specs rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/randmixed --seeds 1 --json > "$OUT/verify_randmixed.json" 2>> "$OUT/verify_err.txt"; stamp "verify mixed rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/randsmall --seeds 1 --json > "$OUT/verify_randsmall.json" 2>> "$OUT/verify_err.txt"; stamp "verify small rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/sp/decode_bias_silu "$W"/sp/moe_up --json > "$OUT/bench_sp.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
bench_rows "$OUT"/bench_sp.json
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify_*.json
pack '(build|verify_.*)\.json|bench_.*\.json'
