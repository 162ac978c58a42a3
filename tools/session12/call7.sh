#!/usr/bin/env bash
# Session 12, device call 7 (nvidia-h200): tcgemv at 2 warps a block (now a candidate: MEASURED holds (2, 2) for
# 8 and 16 tokens; no warp without a K slice), which the model now picks for [8,4096]x[4096,14336] and the run-time
# buckets 5..8 at N = 14336: the model's picks beside the previous tilings and cuBLAS, benched twice; verified.
source tools/device_lib.sh
S=tools/session12/specs; B=specs/bench
dg gen --untuned $B/decode_{8,16}x4096x{14336,4096}.yaml $B/decode_dyn_1-64x4096x{14336,4096}.yaml \
  $S/gqa_scores_b32_m8.yaml $S/moe_experts_b8_m8.yaml $S/gqa_scores_b8_m16_dense.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
tc() { echo tcgemv "$1" "{\"octets\":$2,\"k_warps\":$3}" "_tc$2x$3"; }
python3 tools/session12/variants.py "$W/g" $(tc $B/decode_8x4096x14336.yaml 2 4) $(tc $B/decode_8x4096x4096.yaml 2 2) \
  $(tc $B/decode_16x4096x4096.yaml 2 2) $(tc $B/decode_16x4096x14336.yaml 2 2) $(tc $B/decode_16x4096x14336.yaml 1 4) \
  >> "$OUT/gen.txt" 2>&1
timeout 300 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/g --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 100 python3 -m dgemm_cli bench $(ls -d "$W"/g/* | grep -v dyn) --json > "$OUT/bench$r.json" 2> "$OUT/bench${r}_err.txt"
  timeout 100 python3 -m dgemm_cli bench "$W"/g/decode_dyn_* --m 2,5,8,12,16 --json > "$OUT/dyn$r.json" 2> "$OUT/dyn${r}_err.txt"
done; stamp "bench"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:200]) for r in v if not r.get("passed")])
for kind in ("bench", "dyn"):
    a, b = (json.load(open(f"{out}/{kind}{r}.json")) for r in (1, 2))
    if kind == "dyn":
        a = [{**row, "name": x["name"]} for x in a for row in x["m_rows"]]
        b = [{**row, "name": x["name"]} for x in b for row in x["m_rows"]]
    for x, y in zip(a, b):
        m = f" m={x['m']}" if x.get("m") is not None else ""
        print(f"{x['name'] + m:40s} {x['us']:7.2f} / {y['us']:7.2f} us  cuBLAS {x['baseline_us']:7.2f} / {y['baseline_us']:7.2f}"
              f"  ratio {x['ratio']:.3f} / {y['ratio']:.3f}")
PY
grep -h "tcgemv" "$OUT/gen.txt" | cut -c1-160
pack 'summary\.txt|bench1\.json|bench2\.json|dyn1\.json|dyn2\.json|verify\.json|build\.json'
