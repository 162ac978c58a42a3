#!/usr/bin/env bash
# Session 10, device call 13 (nvidia-h200): the final tcgemv template (no per-lane predicates: K whole segments, N
# whole blocks, tokens past M read row M - 1). Model's picks of the decode benchmarks and specs; tools/session10/tcgemv
# forced to tcgemv; random decode-shaped specs (40 fixed, seed 41; 20 run-time M, seed 43; A redrawn k-contiguous half
# the time). Verify seeds 1, 2 --repeat 2; bench the decode set, the run-time artifacts and the forced run-time
# tcgemv kernel at N = 14336 (its 9..16 bucket against hopper's); compute-sanitizer on two tcgemv kernels.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_*.yaml specs/decode_qk.yaml specs/decode_dynamic.yaml specs/epilogue/decode_bias_silu.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen --untuned tools/session10/tcgemv/*.yaml --family tcgemv -o "$W/tcf" >> "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rsv" --seed 41 --small-m-share 1.0 --a-vectors-share 0.5 > /dev/null
dg gen "$W"/rsv/*.yaml -o "$W/randvec" >> "$OUT/gen.txt" 2>&1
dg random-specs 20 -o "$W/rdv" --seed 43 --small-m-share 1.0 --dynamic-share 1.0 --a-vectors-share 0.5 > /dev/null
dg gen "$W"/rdv/*.yaml -o "$W/randvecdyn" >> "$OUT/gen.txt" 2>&1; stamp "gen"
grep -h "^// Plan" "$W"/dec/*/*.cu | grep -v ": cta" | cut -c1-160 > "$OUT/picks.txt"
timeout 300 python3 -m dgemm_cli build "$W"/dec "$W"/tcf "$W"/randvec "$W"/randvecdyn -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/dec "$W"/tcf "$W"/randvec "$W"/randvecdyn --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_1.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 90 python3 -m dgemm_cli bench "$W"/dec/*dyn_* --m 1,2,3,4,5,8,9,12,16,32,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/tcf/tc_dyn_2_16 --m 2,4,8,9,12,16 --json > "$OUT/bench_tcdyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench tcdyn rc=$?"
sanitize "$W"/tcf/tc_dyn_2_16 "$W"/tcf/tc_m13_ccol; stamp "sanitize"
echo "random plans: $(cat "$W"/randvec/*/plan.json "$W"/randvecdyn/*/plan.json | grep -o '"family": "[a-z]*"' | sort | uniq -c | tr '\n' ' ')"
bench_rows "$OUT"/bench_1.json
python3 - "$OUT"/bench_dyn.json "$OUT"/bench_tcdyn.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        print(r["name"], " ".join(f"m{x['m']}:{x['us']:.2f}/{x['ratio']:.3f}" for x in r["m_rows"]))
PY
cat "$OUT/sanitize.txt"
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify.json
pack '(build|verify)\.json|bench_.*\.json|sanitize\.txt|picks\.txt'
