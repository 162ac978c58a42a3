#!/usr/bin/env bash
# Session 27, device call 5 (nvidia-h200): the two swapped specs where the model still picks the A-multicast plan
# after the fitted stream rate (A of 1 and 4 MB): as picked and as the best plan without multicast (render_variant,
# the model's next pick), verified (seeds 1-2) and benched in turn, 3 rounds. Beside them, at issue 7's
# [4096,4096]x[4096,44] with the roles swapped: is it the multicast or the narrow tile? 64x32 tiles without
# multicast (each block loads its whole A box; the two blocks of a tile row read the same weight rows, one from
# DRAM and one from L2 if they run together), at 8 and 10 stages, beside the multicast plan (10 stages) and the
# split. The narrow-tile and deep-ring constraints are switched off in this checkout copy (sed) to render them.
source tools/device_lib.sh
sed -i 's/if a\["block_n"\] < NARROW_N and a\["a_multicast"\] == 1 else None/if False else None/; s/if a\["stages"\] > DEEP_STAGES and a\["a_multicast"\] == 1 else None/if False else None/' dgemm_cli/families/hopper.py
grep -c "if False else None" dgemm_cli/families/hopper.py > "$OUT/sed.txt"
S44=tools/session27/specs/swap_4096x44x4096.yaml
for v in "mc:32:10:1:2" "n32s8:32:8:1:1" "n32s10:32:10:1:1" "split:64:8:2:1"; do
  IFS=: read -r tag bn st ks mc <<< "$v"
  python3 tools/render_variant.py $S44 "$W/g" hopper \
    "{\"block_m\": 64, \"block_n\": $bn, \"consumers\": 1, \"ctas_per_sm\": 1, \"stages\": $st, \"k_splits\": $ks, \"a_multicast\": $mc}" _$tag >> "$OUT/gen.txt" 2>&1
done
S=tools/session27/specs
dg gen --untuned $S/swap_batched_shared_w.yaml $S/swap_beta_bias_gelu.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
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
