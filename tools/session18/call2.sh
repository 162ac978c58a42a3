#!/usr/bin/env bash
# Session 18, device call 2 (nvidia-h200). Two experiments in one call:
#  1. The splitk FFMA picks that pricing the block's k-tile as the cta family does (cta.ffma_k_tile_clocks) moved,
#     each as the model picks it now (new/) and as session 17's model picked it (old/, tools/session18/specs/
#     ffma_before.json): built, verified (seeds 1, 2), benched alternately, 2 rounds.
#  2. Hopper tilings at [128,4096]x[4096,14336] bf16 and [64,4096]x[4096,14336] the model ranks below its pick:
#     128x224 and 128x256 with the K split over a cluster of 2 (A read by half as many blocks), 64x224 unsplit
#     (session 11: 1.5% faster than the pick); [64, ...] at 64x224 split 2. Benched beside the picks, 3 rounds.
source tools/device_lib.sh
gen_new_old tools/session18/specs/ffma_specs.txt tools/session18/specs/ffma_before.json
U=specs/bench/up_128x14336x4096.yaml; D=specs/bench/decode_64x4096x14336.yaml
dg gen --untuned "$U" "$D" -o "$W/hop" >> "$OUT/gen.txt" 2>&1
rv() { python3 tools/render_variant.py "$1" "$W/hop" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1 || stamp "variant $3 failed"; }
rv $U '{"block_m":128,"block_n":224,"consumers":2,"ctas_per_sm":1,"stages":4,"k_splits":2}' _s2n224s4
rv $U '{"block_m":128,"block_n":224,"consumers":2,"ctas_per_sm":1,"stages":5,"k_splits":2}' _s2n224s5
rv $U '{"block_m":128,"block_n":256,"consumers":2,"ctas_per_sm":1,"stages":4,"k_splits":2}' _s2n256s4
rv $U '{"block_m":64,"block_n":224,"consumers":1,"ctas_per_sm":1,"stages":5}' _m64n224
rv $D '{"block_m":64,"block_n":224,"consumers":1,"ctas_per_sm":1,"stages":6,"k_splits":2,"l2_promotion":"none"}' _s2n224
stamp "gen hop"
build_verify 1,2 "$W/new" "$W/old" "$W/hop"
for r in 1 2 3; do
  timeout 100 python3 -m dgemm_cli bench "$W"/hop/* --json > "$OUT/bench_hop_$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench hop r$r rc=$?"
  if [ "$r" -lt 3 ]; then bench_new_old $r; fi
done
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
