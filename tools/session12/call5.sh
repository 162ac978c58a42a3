#!/usr/bin/env bash
# Session 12, device call 5 (nvidia-h200): batched decode over a KV cache in place (GQA / MHA scores and P.V with
# the cache's [token][head][dim] strides, and a dense one), which tcgemv does not take (no batch): a level-1 tune
# (every family's 4 cheapest candidates verified, timed, the winner benched against cuBLAS in the same run).
source tools/device_lib.sh
D=tools/session12/specs
timeout 560 python3 -m dgemm_cli tune --level 1 --budget 45 -j "$J" --db "$OUT/batched_db.json" -o "$W/tune" \
  $D/gqa_scores_b32_m8.yaml $D/gqa_pv_b32_m8.yaml $D/mha_scores_b32_m1.yaml $D/gqa_scores_b8_m16_dense.yaml \
  > "$OUT/tune.txt" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
cat "$OUT/tune.txt"
python3 - "$OUT" <<'PY'
import json, sys
for k, v in json.load(open(f"{sys.argv[1]}/batched_db.json"))["entries"].items():
    print(k.split("|")[0][:12], v.get("spec") or v.get("name"))
    for m in sorted(v["measured"], key=lambda m: m["us"] or 1e9)[:6]:
        print(f"   {m['id']:10s} {m['us'] or -1:8.2f}  {m['assignment']}")
PY
pack 'tune\.txt|batched_db\.json'
