#!/usr/bin/env bash
# Session 27, device call 1 (nvidia-h200): hopper's A multicast (a_multicast = 2: tile pairs along n in 2-block
# clusters, each block loading half of A's 64-row box into both), first run. Static specs with the roles swapped
# (tools/session27/specs: C^T = W X^T, W as A) are verified (seeds 1-2) and sanitized; the four issue-7 sizes
# (33, 44, 60, 64 tokens) are benched beside the run-time artifact at the same m, in turn, 3 rounds.
source tools/device_lib.sh
SPECS=$(ls tools/session27/specs/*.yaml)
# shellcheck disable=SC2086
dg gen --untuned $SPECS specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/render_variant.py tools/session27/specs/swap_4096x44x4096.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 32, "consumers": 1, "ctas_per_sm": 1, "stages": 6, "k_splits": 1, "a_multicast": 2}' _s6 >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py tools/session27/specs/swap_4096x44x4096.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 32, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1, "a_multicast": 2, "l2_promotion": "none"}' _l2none >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
build_verify 1,2 "$W"/g/*
sanitize "$W/g/swap_4096x44x4096" "$W/g/swap_tails_bf16"
SW=("$W/g/swap_4096x33x4096" "$W/g/swap_4096x44x4096" "$W/g/swap_4096x60x4096" "$W/g/swap_4096x64x4096" "$W/g/swap_4096x44x4096_s6" "$W/g/swap_4096x44x4096_l2none")
for r in 1 2 3; do
  timeout 40 python3 -m dgemm_cli bench "${SW[@]}" --json > "$OUT/bench_swap_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench swap r$r rc=$?"
  timeout 40 python3 -m dgemm_cli bench "$W/g/decode_dyn_1_64x4096x4096" --m 33,44,60,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn r$r rc=$?"
done
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  cat "$OUT/failures.txt" "$OUT/sanitize.txt"; grep -h "spill\|registers" "$OUT/build.json" | head -0
  bench_rows "$OUT"/bench_swap_*.json "$OUT"/bench_dyn_*.json; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|build\.json|bench_swap_1\.json|bench_dyn_1\.json'
