#!/usr/bin/env bash
# Session 12, device call 4 (nvidia-h200): gemv with 8 chunks in flight a thread (the unroll node widened to
# (1, 2, 4, 8) in the working tree for this call), lanes along n ([K, N] weights, where the tune of call 3 had
# gemv at 36.3 µs against hopper's 29.7) and lanes along k (nn.Linear weights), beside unroll 4 and cuBLAS.
source tools/device_lib.sh
KN=tools/session12/specs; B=specs/bench
v() {  # SPEC 'JSON' SUFFIX ...: gemv variants (tools/session12/variants.py with the family named each time)
  local args=()
  while (( $# )); do args+=(gemv "$1" "$2" "$3"); shift 3; done
  python3 tools/session12/variants.py "$W/g" "${args[@]}" >> "$OUT/gen.txt" 2>&1
}
kn='"cols":1,"threads"'
v $KN/kn_1x4096x14336.yaml "{$kn:128,\"block_n\":256,\"unroll\":4,\"splits\":16}" _a \
  $KN/kn_1x4096x14336.yaml "{$kn:128,\"block_n\":256,\"unroll\":8,\"splits\":16}" _b \
  $KN/kn_1x4096x14336.yaml "{$kn:128,\"block_n\":256,\"unroll\":8,\"splits\":8}" _c \
  $KN/kn_1x4096x14336.yaml "{$kn:256,\"block_n\":256,\"unroll\":8,\"splits\":16}" _d \
  $KN/kn_1x4096x14336.yaml "{$kn:256,\"block_n\":256,\"unroll\":8,\"splits\":8}" _e \
  $KN/kn_1x4096x14336.yaml "{$kn:128,\"block_n\":512,\"unroll\":8,\"splits\":16}" _f \
  $KN/kn_1x4096x14336.yaml "{$kn:256,\"block_n\":512,\"unroll\":8,\"splits\":16}" _g \
  $KN/kn_1x4096x4096.yaml '{"unroll":4}' _u4 $KN/kn_1x4096x4096.yaml '{"unroll":8}' _u8 \
  $KN/kn_1x4096x4096.yaml "{$kn:256,\"block_n\":256,\"unroll\":8,\"splits\":16}" _d
for s in decode_1x4096x14336 decode_1x4096x4096 decode_1x4096x128 decode_1x2048x512; do
  v $B/$s.yaml '{"unroll":4}' _u4 $B/$s.yaml '{"unroll":8}' _u8
done
python3 tools/render_variant.py $KN/kn_1x4096x14336.yaml "$W/g" hopper \
  '{"consumers":1,"block_m":64,"block_n":128,"ctas_per_sm":1,"k_splits":1,"stages":5}' _h5 >> "$OUT/gen.txt" 2>&1
timeout 300 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 150 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 150 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench2.json" 2> "$OUT/bench2_err.txt"; stamp "bench 2 rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [r["name"] for r in v if not r.get("passed")])
regs = {}
for r in json.load(open(f"{out}/build.json")):
    for k in r.get("kernels", []):
        regs.setdefault(r["name"], []).append(f"{k.get('registers')}r/{k.get('spill_stores', k.get('spills', 0))}s")
b2 = {r["name"]: r for r in json.load(open(f"{out}/bench2.json"))}
for r in json.load(open(f"{out}/bench.json")):
    s = b2.get(r["name"], {})
    print(f"{r['name']:28s} {r['us']:7.2f} / {s.get('us', 0):7.2f} us  cuBLAS {r['baseline_us']:7.2f} / {s.get('baseline_us', 0):7.2f}"
          f"  ratio {r['ratio']:.3f} / {s.get('ratio', 0):.3f}  {' '.join(regs.get(r['name'], [])[:2])}")
PY
pack 'summary\.txt|bench\.json|bench2\.json|verify\.json|build\.json'
