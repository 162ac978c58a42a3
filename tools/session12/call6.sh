#!/usr/bin/env bash
# Session 12, device call 6 (nvidia-h200): tcgemv over a batch (new in this commit), measured and verified.
# This copy alone widens the tcgemv tilings (k_warps 1 and 2, every octet count with them) so that short-K
# products (batched attention scores, K = 128) can be timed beside the measured tilings; the commit keeps them out.
# Bench: GQA scores over a KV cache in place (b32 m8, K = 128), dense b8 m16, MoE experts b8 m8 (K = 4096), each
# beside hopper and cuBLAS. Verify (seeds 1, 2, --repeat 2): those and forced tcgemv specs with a broadcast A, N and
# K tails, bf16 with an interleaved C and beta; memcheck and racecheck on two.
source tools/device_lib.sh
python3 - <<'PY'
import re
p = "dgemm_cli/families/tcgemv.py"; s = open(p).read()
s = s.replace('g.node("k_warps", (4, 8),', 'g.node("k_warps", (1, 2, 4, 8),')
s = s.replace("MEASURED = {8: ((2, 4), (2, 8)), 16: ((1, 4), (2, 4))}",
              "MEASURED = {8: ((1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (2, 8)), 16: ((1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4))}")
open(p, "w").write(s)
PY
grep -n "MEASURED = \|k_warps\", (" dgemm_cli/families/tcgemv.py > "$OUT/patched.txt"
S=tools/session12/specs
v() { python3 tools/session12/variants.py "$W/$1" "${@:2}" >> "$OUT/gen.txt" 2>&1; }
tc() { echo tcgemv "$1" "{\"octets\":$2,\"k_warps\":$3}" "_tc$2x$3"; }
v bench $(tc $S/gqa_scores_b32_m8.yaml 2 4) $(tc $S/gqa_scores_b32_m8.yaml 2 2) $(tc $S/gqa_scores_b32_m8.yaml 2 1) \
  $(tc $S/gqa_scores_b32_m8.yaml 1 1) $(tc $S/gqa_scores_b32_m8.yaml 1 2) \
  hopper $S/gqa_scores_b32_m8.yaml '{"block_n":256,"stages":3}' _hop
v bench $(tc $S/gqa_scores_b8_m16_dense.yaml 1 4) $(tc $S/gqa_scores_b8_m16_dense.yaml 2 4) \
  $(tc $S/gqa_scores_b8_m16_dense.yaml 1 2) $(tc $S/gqa_scores_b8_m16_dense.yaml 2 2) \
  $(tc $S/gqa_scores_b8_m16_dense.yaml 1 1) $(tc $S/gqa_scores_b8_m16_dense.yaml 2 1) \
  hopper $S/gqa_scores_b8_m16_dense.yaml '{"block_n":128,"stages":8}' _hop
v bench $(tc $S/moe_experts_b8_m8.yaml 2 4) $(tc $S/moe_experts_b8_m8.yaml 2 8) $(tc $S/moe_experts_b8_m8.yaml 2 2) \
  hopper $S/moe_experts_b8_m8.yaml '{}' _hop
v ver $(tc $S/verify/tcb_bcast_tails.yaml 2 4) $(tc $S/verify/tcb_bcast_tails.yaml 2 1) \
  $(tc $S/verify/tcb_bf16_cinterleaved.yaml 1 4) $(tc $S/verify/tcb_bf16_cinterleaved.yaml 2 2)
timeout 300 python3 -m dgemm_cli build "$W"/bench "$W"/ver -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/bench "$W"/ver --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W"/bench --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
sanitize "$W"/ver/tcb_bcast_tails_tc2x1 "$W"/ver/tcb_bf16_cinterleaved_tc1x4; stamp "sanitize"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:200]) for r in v if not r.get("passed")])
regs = {r["name"]: [f"{k.get('registers')}r/{k.get('spill_stores', 0)}s" for k in r.get("kernels", [])][:1] for r in json.load(open(f"{out}/build.json"))}
for r in json.load(open(f"{out}/bench.json")):
    print(f"{r['name']:36s} {r['us']:7.2f} us  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}  {' '.join(regs.get(r['name'], []))}")
PY
cat "$OUT/sanitize.txt"
pack 'summary\.txt|bench\.json|verify\.json|build\.json|sanitize\.txt'
