#!/usr/bin/env bash
# Session 12, device call 8 (nvidia-h200): correctness of tcgemv over a batch and at 2 warps a block.
# (1) 80 random decode specs (seed 12: small-M share 1, wide 0.6, A vectors 0.5, run-time M 0.25; 22 tcgemv
# kernels among them), verified with --repeat 2. (2) Batched tcgemv specs (tools/session12/specs/verify: run-time M
# over a batch, an epilogue with a per-expert bias, short K with tails, a broadcast A with tails; GQA scores over a
# KV cache in place), seeds 1 and 2, --repeat 2. compute-sanitizer on two of them.
source tools/device_lib.sh
S=tools/session12/specs; V=$S/verify
dg random-specs 80 -o "$W/rs" --seed 12 --small-m-share 1.0 --wide-decode-share 0.6 --a-vectors-share 0.5 \
  --dynamic-share 0.25 > "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $V/tcb_dyn.yaml $V/tcb_experts_bias_silu.yaml $S/gqa_scores_b32_m8.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
python3 tools/session12/variants.py "$W/h" tcgemv $V/tcb_shortk_tails.yaml '{"octets":2,"k_warps":2}' _tc2x2 \
  tcgemv $V/tcb_bcast_tails.yaml '{"octets":2,"k_warps":2}' _tc2x2 >> "$OUT/gen.txt" 2>&1
grep -l '"family": "tcgemv"' "$W"/r/*/plan.json | wc -l > "$OUT/tcgemv_count.txt"
timeout 260 python3 -m dgemm_cli build "$W"/h "$W"/r -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W"/h --seeds 1,2 --repeat 2 --json > "$OUT/verify_h.json" 2> "$OUT/verify_h_err.txt"; stamp "verify h rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/r --seeds 1 --repeat 2 --json > "$OUT/verify_r.json" 2> "$OUT/verify_r_err.txt"; stamp "verify r rc=$?"
sanitize "$W"/h/tcb_dyn "$W"/h/tcb_experts_bias_silu; stamp "sanitize"
{ echo "random specs holding tcgemv: $(cat "$OUT/tcgemv_count.txt")"
  for f in verify_h verify_r; do python3 -c "
import json; v=json.load(open('$OUT/$f.json'))
print('$f', sum(bool(r.get('passed')) for r in v), '/', len(v), [(r['name'], (r.get('error') or '')[:300]) for r in v if not r.get('passed')])"; done
  cat "$OUT/sanitize.txt"; python3 -c "
import json; b=json.load(open('$OUT/build.json')); print('build', sum(1 for r in b if r.get('ok', r.get('success', True))), '/', len(b), 'spills', sum(k.get('spill_stores', 0) for r in b for k in r.get('kernels', [])))"
} | tee "$OUT/summary.txt"
pack 'summary\.txt|verify_h\.json|verify_r\.json|build\.json'
