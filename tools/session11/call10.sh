#!/usr/bin/env bash
# Session 11, device call 10 (nvidia-h200): the decode benchmark set and run-time artifacts at the session's final
# kernel code (the tenth session's templates: this session's family changes were reverted), benched beside cuBLAS
# with the copy bandwidth of the same run; and [128,4096]x[4096,14336] on 64x224 tiles at 5 and 6 stages.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_*.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
for s in 5 6; do python3 tools/render_variant.py specs/bench/up_128x14336x4096.yaml "$W/dec" hopper "{\"block_m\":64,\"block_n\":224,\"consumers\":1,\"ctas_per_sm\":1,\"stages\":$s,\"k_splits\":1}" _64x224_s$s >> "$OUT/gen.txt" 2>&1; done
dg gen --untuned specs/bench/up_128x14336x4096.yaml -o "$W/dec" >> "$OUT/gen.txt" 2>&1; stamp "gen $(ls $W/dec | wc -l) dirs"
timeout 250 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/dec/up_128x14336x4096_64x224_s* --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 90 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W"/dec/*dyn_* --m 1,2,4,8,9,12,16,24,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
python3 - "$OUT"/bench.json <<'PY'
import json, sys
for r in sorted(json.load(open(sys.argv[1])), key=lambda r: r["name"]):
    print(f"{r['name']:34s} {r['us']:7.2f} us {r['gbps']:6.0f} GB/s  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}  copy {r['copy_gbps']:.0f}")
PY
python3 - "$OUT"/bench_dyn.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["name"], " ".join(f"m{x['m']}:{x['ratio']:.3f}" for x in r["m_rows"]))
PY
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
pack '(build|verify)\.json|bench.*\.json'
