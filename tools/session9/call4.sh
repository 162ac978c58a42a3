#!/usr/bin/env bash
# Session 9, device call 4 (nvidia-h200): the gemv staging as one unrolled batch (c7cca0b) on the model's picks of
# the one-row decode shapes and the run-time artifacts, A/B against call 2's hand-patched kernels (exp/ab: the
# old template + tools/session9/patch_gemv.py vec); the random small-M set (seed 21, 40 specs) and run-time-M set
# (seed 31, 20 specs) on the model's picks. Build, verify (seed 1; decode set --repeat 2), bench twice.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_1x*.yaml specs/bench/decode_dyn_*.yaml specs/decode_qk.yaml specs/decode_dynamic.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
dg gen "$W"/rss/*.yaml -o "$W/randsmall" >> "$OUT/gen.txt" 2>&1
dg random-specs 20 -o "$W/rsd" --seed 31 --dynamic-share 1.0 > /dev/null 2>> "$OUT/gen.txt"
dg gen "$W"/rsd/*.yaml -o "$W/randdyn" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 240 python3 -m dgemm_cli build "$W"/dec exp/ab "$W"/randsmall "$W"/randdyn -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/dec exp/ab --seeds 1 --repeat 2 --json > "$OUT/verify_dec.json" 2> "$OUT/verify_err.txt"; stamp "verify dec rc=$?"
for r in 1 2; do
  timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) exp/ab/* --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
timeout 60 python3 -m dgemm_cli bench "$W"/dec/*dyn* --m 1,2,3,4,8,16,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/randsmall --seeds 1 --json > "$OUT/verify_randsmall.json" 2>> "$OUT/verify_err.txt"; stamp "verify randsmall rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/randdyn --seeds 1 --json > "$OUT/verify_randdyn.json" 2>> "$OUT/verify_err.txt"; stamp "verify randdyn rc=$?"
grep -c '"family": "gemv"' "$W"/randsmall/*/plan.json "$W"/randdyn/*/plan.json | awk -F: '$2 > 0' | wc -l | sed 's/^/dirs with a gemv plan: /'
bench_rows "$OUT"/bench_[12].json | sort -k2,2 -k1,1
bench_rows "$OUT"/bench_dyn.json
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify_*.json
pack '(build|verify_.*)\.json|bench_.*\.json'
