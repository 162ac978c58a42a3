#!/usr/bin/env bash
# Session 27, device call 5 (nvidia-h200): the two swapped specs where the model still picks the A-multicast plan
# after the fitted stream rate (A of 1 and 4 MB): as picked and as the best plan without multicast (render_variant,
# the model's next pick), verified (seeds 1-2) and benched in turn, 3 rounds. Beside them, at issue 7's
# [4096,4096]x[4096,44] with the roles swapped: is it the multicast or the narrow tile? 64x32 tiles without
# multicast (each block loads its whole A box; the two blocks of a tile row read the same weight rows, one from
# DRAM and one from L2 if they run together), at 8 and 10 stages, beside the multicast plan (10 stages) and the
# split; and each of those with two accumulator chains (acc_chains 2: every wgmma of a tile waits on the previous
# one's accumulators with one chain, 256 in a row at 64x32). The narrow-tile and deep-ring constraints are switched
# off in this checkout copy (sed) to render the unicast 64x32 tiles.
source tools/device_lib.sh
sed -i 's/if a\["block_n"\] < NARROW_N and a\["a_multicast"\] == 1 else None/if False else None/; s/if a\["stages"\] > DEEP_STAGES and a\["a_multicast"\] == 1 else None/if False else None/' dgemm_cli/families/hopper.py
grep -c "if False else None" dgemm_cli/families/hopper.py > "$OUT/sed.txt"
S44=tools/session27/specs/swap_4096x44x4096.yaml
for v in "mc:32:10:1:2:1" "mcc2:32:10:1:2:2" "n32s8:32:8:1:1:1" "n32s10:32:10:1:1:1" "split:64:8:2:1:1" "splitc2:64:8:2:1:2"; do
  IFS=: read -r tag bn st ks mc ch <<< "$v"
  python3 tools/render_variant.py $S44 "$W/g" hopper \
    "{\"block_m\": 64, \"block_n\": $bn, \"consumers\": 1, \"ctas_per_sm\": 1, \"stages\": $st, \"k_splits\": $ks, \"a_multicast\": $mc, \"acc_chains\": $ch}" _$tag >> "$OUT/gen.txt" 2>&1
done
# Two accumulator chains (acc_chains 2) on issue 7's own kernels as the model plans them: 64 rows at N = 4096 (64x64,
# K split 2) and at N = 14336 (64x112).
dg gen --untuned specs/bench/decode_64x4096x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py specs/bench/decode_64x4096x4096.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 2, "a_multicast": 1, "acc_chains": 2, "l2_promotion": "none"}' _c2 >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py specs/bench/decode_64x4096x14336.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 112, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1, "a_multicast": 1, "acc_chains": 2, "l2_promotion": "none"}' _c2 >> "$OUT/gen.txt" 2>&1
S=tools/session27/specs
dg gen --untuned $S/swap_batched_shared_w.yaml $S/swap_beta_bias_gelu.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/render_variant.py $S/swap_batched_shared_w.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 1, "a_multicast": 1, "l2_promotion": "256B"}' _nomc >> "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py $S/swap_beta_bias_gelu.yaml "$W/g" hopper \
  '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 2, "a_multicast": 1, "l2_promotion": "256B"}' _nomc >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
build_verify 1,2 "$W"/g/*
bench_rounds 3 60 "$W"/g/*
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  cat "$OUT/failures.txt"; bench_rows "$OUT"/bench_*.json; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json'
