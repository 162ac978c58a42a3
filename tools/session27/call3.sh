#!/usr/bin/env bash
# Session 27, device call 3 (nvidia-h200): the A-multicast kernel (64x32 tiles, 12 KB a stage) ran 13.2 µs at 8
# stages and 14.8 at 6 in call 1's rerun (latency-bound: the time follows the bytes in flight). Deeper rings:
# [4096,4096]x[4096,44] at 8 / 10 / 12 / 16 stages, and 16 without L2 promotion; verified (seeds 1-2), then
# benched in turn with the run-time artifact at m = 44, 3 rounds.
source tools/device_lib.sh
S44=tools/session27/specs/swap_4096x44x4096.yaml
dg gen --untuned tools/session27/specs/swap_tails_bf16.yaml tools/session27/specs/swap_4096x60x4096.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
for st in 8 10 12 16; do
  python3 tools/render_variant.py $S44 "$W/g" hopper \
    "{\"block_m\": 64, \"block_n\": 32, \"consumers\": 1, \"ctas_per_sm\": 1, \"stages\": $st, \"k_splits\": 1, \"a_multicast\": 2}" _s$st >> "$OUT/gen.txt" 2>&1
done
python3 tools/render_variant.py $S44 "$W/g" hopper \
  '{"block_m": 64, "block_n": 32, "consumers": 1, "ctas_per_sm": 1, "stages": 16, "k_splits": 1, "a_multicast": 2, "l2_promotion": "none"}' _s16l2none >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
build_verify 1,2 "$W"/g/*
SW=("$W/g/swap_4096x44x4096_s8" "$W/g/swap_4096x44x4096_s10" "$W/g/swap_4096x44x4096_s12" "$W/g/swap_4096x44x4096_s16" "$W/g/swap_4096x44x4096_s16l2none" "$W/g/swap_4096x60x4096")
for r in 1 2 3; do
  timeout 40 python3 -m dgemm_cli bench "${SW[@]}" --json > "$OUT/bench_swap_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench swap r$r rc=$?"
  timeout 40 python3 -m dgemm_cli bench "$W/g/decode_dyn_1_64x4096x4096" --m 44,60 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn r$r rc=$?"
done
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  cat "$OUT/failures.txt"
  bench_rows "$OUT"/bench_swap_*.json "$OUT"/bench_dyn_*.json; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_swap_1\.json|bench_dyn_1\.json'
