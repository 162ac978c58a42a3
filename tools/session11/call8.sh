#!/usr/bin/env bash
# Session 11, device call 8 (nvidia-h200): tilings of [128,4096]x[4096,14336] (bf16) and [64,4096]x[4096,4096] on
# the hopper family the model does not pick, forced with tools/render_variant.py, beside the model's picks (gen
# --untuned) and the splitk family's; verify (seed 1) and bench beside cuBLAS.
source tools/device_lib.sh
rv() { python3 tools/render_variant.py "$1" "$W/v" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1; }
t() { echo "{\"block_m\":$1,\"block_n\":$2,\"consumers\":$3,\"ctas_per_sm\":$4,\"stages\":$5,\"k_splits\":$6}"; }
U=specs/bench/up_128x14336x4096.yaml; D=specs/bench/decode_64x4096x4096.yaml
rv $U "$(t 64 224 1 1 5 1)" _64x224
rv $U "$(t 64 256 1 1 5 1)" _64x256
rv $U "$(t 64 112 1 1 8 1)" _64x112
rv $U "$(t 128 64 2 1 8 1)" _128x64
rv $U "$(t 128 96 2 1 7 1)" _128x96
rv $D "$(t 64 64 1 1 8 2)" _64x64s2
rv $D "$(t 64 96 1 1 8 2)" _64x96s2
rv $D "$(t 64 128 1 1 8 2)" _64x128s2
rv $D "$(t 64 64 1 1 6 2)" _64x64s2st6
dg gen --untuned $U $D -o "$W/v" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $D --family splitk -o "$W/sk" >> "$OUT/gen.txt" 2>&1; mv "$W/sk/decode_64x4096x4096" "$W/v/decode_64x4096x4096_splitk"
stamp "gen $(ls $W/v | wc -l) dirs"
timeout 200 python3 -m dgemm_cli build "$W"/v -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/v --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 150 python3 -m dgemm_cli bench "$W"/v/* --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 100 python3 -m dgemm_cli bench "$W"/v/* --json > "$OUT/bench2.json" 2>> "$OUT/bench_err.txt"; stamp "bench again rc=$?"
grep -h "^// Plan" "$W"/v/up_128x14336x4096/*.cu "$W"/v/decode_64x4096x4096/*.cu | cut -c1-150
bench_rows "$OUT"/bench.json "$OUT"/bench2.json | sort -k2,2 -s
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
failures "$OUT"/verify.json
pack '(build|verify)\.json|bench.*\.json|gen\.txt'
