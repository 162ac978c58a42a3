#!/usr/bin/env bash
# Session 27, device call 5 (nvidia-h200): the two swapped specs where the model still picks the A-multicast plan
# after the fitted stream rate (A of 1 and 4 MB): as picked and as the best plan without multicast (render_variant,
# the model's next pick), verified (seeds 1-2) and benched in turn, 3 rounds.
source tools/device_lib.sh
S=tools/session27/specs
dg gen --untuned $S/swap_batched_shared_w.yaml $S/swap_beta_bias_gelu.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/render_variant.py $S/swap_batched_shared_w.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1, "a_multicast": 1, "l2_promotion": "256B"}' _nomc >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py $S/swap_beta_bias_gelu.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 2, "a_multicast": 1, "l2_promotion": "256B"}' _nomc >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
build_verify 1,2 "$W"/g/*
bench_rounds 3 40 "$W"/g/*
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  cat "$OUT/failures.txt"; bench_rows "$OUT"/bench_*.json; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json'
