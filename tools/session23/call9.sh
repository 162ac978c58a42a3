#!/usr/bin/env bash
# Session 23, device call 9 (nvidia-h200; written, not run: the session's device time ran out). The questions the
# evict_first hint left open, in one call:
# (1) The hint one kernel at a time (call 8's measurement, its kernel filter fixed): ncu, caches flushed, boost
#     clocks, 8 launches each of the hopper kernels at 16, 64, 128 rows of N = 14336, hinted and plain.
# (2) B's 256-byte L2 promotion at 128 rows beside the hint: the pick against its tiling with l2_promotion none
#     (tools/render_variant.py), verified, benched in turn (3 rounds) and under ncu (8 launches).
# (3) Should the model pick hopper at few rows of a large weight? The picks (gemv, tcgemv) against hopper forced
#     (`gen --family hopper`) at 1, 2, 4, 8 rows of N = 8192 and 14336, K = 4096: chained (bench, 2 rounds) and one
#     kernel at a time (ncu, 4 launches each). A pick may move only where hopper wins both ways.
# Then `pytest -m gpu` in a call of its own: `bash tools/session18/call4.sh`.
source tools/device_lib.sh
mkdir -p "$W/s"
for n in 8192 14336; do
  for m in 1 2 4 8; do
    printf 'name: few_%sx4096x%s\ndtype: f16\ngemm: {m: %s, n: %s, k: 4096}\noperands: {A: {layout: row}, B: {layout: col}, C: {layout: row}}\n' \
      "$m" "$n" "$m" "$n" > "$W/s/few_${m}x4096x${n}.yaml"
  done
done
dg gen --untuned specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml \
  specs/bench/up_128x14336x4096.yaml "$W"/s/*.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/cache_hints.py "$W/t" "$W/t" decode_16x4096x14336=nohint decode_64x4096x14336=nohint \
  up_128x14336x4096=nohint >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py specs/bench/up_128x14336x4096.yaml "$W/t" hopper \
  '{"block_m": 128, "block_n": 112, "consumers": 2, "ctas_per_sm": 1, "stages": 6, "k_splits": 1, "l2_promotion": "none"}' \
  _bnone >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper "$W"/s/*.yaml -o "$W/h0" >> "$OUT/gen.txt" 2>&1
python3 tools/session19/copy_renamed.py "$W/h0" "$W/t" _hopper >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
grep -h '^// Plan ' "$W"/t/*/*.cu | cut -c1-160 > "$OUT/plans.txt"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 300 python3 -m dgemm_cli verify "$W"/t/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
bench_rounds 2 200 "$W"/t/*
ncu_times "(hopper|tcgemv)::|_kernel<8>" 8 $(ls -d "$W"/t/* | grep -E '/(decode|up)_')
ncu_times "(hopper|tcgemv)::|_kernel<8>" 4 $(ls -d "$W"/t/* | grep -vE '/(decode|up)_')
{ failures "$OUT/verify.json"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/ncu_summary.txt"; bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|plans\.txt'
