#!/usr/bin/env bash
# Session 11, device calls 4 and 6 (nvidia-h200): hopper's A multicast (clusters of 2 / 4 blocks along N sharing each
# A stage) against the same tilings without it, forced with tools/render_variant.py: decode M = 8, 16, 64, 128 at
# N = 14336, M = 64 at N = 4096, a run-time-M kernel (1..64) and a cluster reaching past N. Verify (seeds 1, 2,
# --repeat 2), bench beside cuBLAS, sanitize two multicast kernels.
source tools/device_lib.sh
rv() { python3 tools/render_variant.py "$1" "$W/mc" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1; }
t() { echo "{\"block_m\":$1,\"block_n\":$2,\"consumers\":$3,\"ctas_per_sm\":1,\"stages\":$4,\"k_splits\":1,\"a_multicast\":$5}"; }
for c in 1 2 4; do
  rv specs/bench/decode_64x4096x14336.yaml "$(t 64 112 1 8 $c)" _112_mc$c
  rv specs/bench/decode_64x4096x14336.yaml "$(t 64 128 1 8 $c)" _128_mc$c
  rv specs/bench/decode_16x4096x14336.yaml "$(t 64 112 1 8 $c)" _112_mc$c
  rv specs/bench/up_128x14336x4096.yaml "$(t 128 112 2 6 $c)" _112_mc$c
  rv specs/bench/decode_64x4096x4096.yaml "$(t 64 64 1 8 $c)" _64_mc$c
  rv tools/session11/specs/mc_phantom.yaml "$(t 64 112 1 8 $c)" _mc$c
done
for c in 1 2; do rv specs/bench/decode_8x4096x14336.yaml "$(t 64 112 1 8 $c)" _112_mc$c; done
for c in 1 4; do rv specs/bench/up_128x14336x4096.yaml "$(t 64 256 1 5 $c)" _256_mc$c; done
for c in 2 4; do rv specs/bench/decode_dyn_1-64x4096x14336.yaml "$(t 64 112 1 8 $c)" _112_mc$c; done
dg gen --untuned specs/bench/decode_64x4096x4096.yaml -o "$W/mc" >> "$OUT/gen.txt" 2>&1; stamp "gen $(ls $W/mc | wc -l) dirs"
timeout 200 python3 -m dgemm_cli build "$W"/mc -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/mc --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 150 python3 -m dgemm_cli bench $(ls -d "$W"/mc/* | grep -v -e phantom -e dyn) --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/mc/*dyn* --m 1,8,16,32,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
sanitize "$W"/mc/decode_64x4096x14336_112_mc2 "$W"/mc/mc_phantom_mc4; stamp "sanitize"
bench_rows "$OUT"/bench.json | sort
python3 - "$OUT"/bench_dyn.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["name"], " ".join(f"m{x['m']}:{x['us']:.2f}/{x['ratio']:.3f}" for x in r["m_rows"]))
PY
cat "$OUT/sanitize.txt"
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
failures "$OUT"/verify.json
pack '(build|verify)\.json|bench.*\.json|sanitize\.txt|gen\.txt'
