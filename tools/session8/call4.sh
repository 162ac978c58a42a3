#!/usr/bin/env bash
# Session 8, device call 4 (nvidia-h200): the final model (tile widths 96..224, at most 8 stages and 8 wherever
# they fit). Generate on the device: the decode / up / conv benchmarks, specs/*.yaml, specs/epilogue, 40 random
# TMA specs on hopper (seed 11), their width variants (tools/width_variants.py, first 40), 20 random run-time-M
# specs (seed 31). Build; verify (decode set seed 1 --repeat 2; the rest seeds 1, 2); bench the decode set and
# the run-time artifacts; compute-sanitizer on a 112-wide random kernel.
source tools/device_lib.sh
dg gen specs/bench/decode_*.yaml specs/bench/up_128x14336x4096.yaml specs/bench/conv_*.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen specs/*.yaml specs/epilogue/*.yaml -o "$W/specs" >> "$OUT/gen.txt" 2>&1
dg gen exp/rst/*.yaml -o "$W/randtma" --family hopper >> "$OUT/gen.txt" 2>&1
python3 tools/width_variants.py "$W/wv" $(ls exp/rst/*.yaml | head -20) >> "$OUT/gen.txt" 2>&1
dg random-specs 20 -o "$W/rsd" --seed 31 --small-m-share 0.5 --dynamic-share 1.0 > /dev/null
dg gen "$W"/rsd/*.yaml -o "$W/randdyn" >> "$OUT/gen.txt" 2>&1
stamp "gen: $(ls "$W"/dec "$W"/specs "$W"/randtma "$W"/wv "$W"/randdyn | grep -vc ':$')"
timeout 220 python3 -m dgemm_cli build "$W"/dec "$W"/specs "$W"/randtma "$W"/wv "$W"/randdyn -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 70 python3 -m dgemm_cli verify "$W"/dec --seeds 1 --repeat 2 --json > "$OUT/verify_dec.json" 2> "$OUT/verify_err.txt"; stamp "verify dec rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/specs "$W"/randtma "$W"/wv "$W"/randdyn --seeds 1,2 --json > "$OUT/verify_rest.json" 2>> "$OUT/verify_err.txt"; stamp "verify rest rc=$?"
timeout 100 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_dec.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 50 python3 -m dgemm_cli bench "$W"/dec/*dyn* --m 1,2,3,4,8,16,17,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
san=$(grep -l '"block_n": 112,' "$W"/wv/*/plan.json | head -1 | xargs -r dirname)
sanitize $san; stamp "sanitize ($san)"
cat "$OUT/sanitize.txt" 2>/dev/null
bench_rows "$OUT"/bench_*.json
report
pack '(build|verify_dec|verify_rest)\.json|bench_.*\.json'
