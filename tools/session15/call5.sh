#!/usr/bin/env bash
# Session 15, device call 5 (nvidia-h200): the final picks (hopper's l2_promotion as at this commit). Issue 7's decode
# set and the run-time artifacts benched (copy bandwidth in the same run); 40 random decode specs (seed 15, hopper
# forced: the tensor maps with and without promotion over random views) and issue 7's specs built and verified
# (seeds 1, 2, --repeat 2); the decode set twice more.
source tools/device_lib.sh
DEC=$ISSUE7_DECODE
DYN=$ISSUE7_DYNAMIC
dg gen --untuned $DEC $DYN -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rs" --seed 15 --small-m-share 1 --wide-decode-share 1 --dynamic-share 0.2 >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper "$W"/rs/*.yaml -o "$W/rh" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
echo "random, hopper forced: $(grep -l CU_TENSOR_MAP_L2_PROMOTION_NONE "$W"/rh/*/*.cu | wc -l) directories encode maps without promotion, $(grep -l CU_TENSOR_MAP_L2_PROMOTION_L2_256B "$W"/rh/*/*.cu | wc -l) with 256 B" | tee "$OUT/promotions.txt"
timeout 400 python3 -m dgemm_cli build "$W"/dec "$W"/rh -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_dec_1.json" 2>> "$OUT/bench_err.txt"; stamp "bench dec rc=$?"
timeout 90 python3 -m dgemm_cli bench "$W"/dec/decode_dyn* --m 1,2,8,9,12,16,17,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/dec "$W"/rh --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 2 3; do timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_dec_$r.json" 2>> "$OUT/bench_err.txt"; done; stamp "bench dec 2, 3"
report | tee "$OUT/summary.txt"
cat "$OUT/promotions.txt" >> "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|build\.json|bench_dec_1\.json|bench_dyn\.json'
