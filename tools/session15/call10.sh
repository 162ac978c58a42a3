#!/usr/bin/env bash
# Session 15, device call 10 (nvidia-h200): hopper's cluster reduce cost 0.4 -> 0.9 µs (call 9: hopper's K split ran
# 11% slower than tcgemv at [12 / 16, 2048]x[2048, 4096], priced even). The run-time artifact of [1..64, 2048]x
# [2048, 4096] with the new picks (gemv, tcgemv, hopper buckets) at ten m, and the one other plan the change moved
# (a random contraction, K split 2 -> unsplit) timed both ways; verified.
source tools/device_lib.sh
S=tools/session15/specs
dg gen --untuned $S/s15_dyn_1_64_n4096_k2048_bf16.yaml $S/s15_rand_21_157.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py $S/s15_rand_21_157.yaml "$W/v" hopper '{"block_m": 64, "block_n": 64, "consumers": 1, "ctas_per_sm": 1, "stages": 8, "k_splits": 2, "l2_promotion": "none"}' _split2 >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/g "$W"/v -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W"/g "$W"/v --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/g/s15_dyn_1_64_n4096_k2048_bf16 --m 1,2,8,9,12,16,17,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"
for r in 1 2; do
  timeout 30 python3 -m dgemm_cli bench "$W"/g/s15_rand_21_157 --json > "$OUT/bench_pick_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 30 python3 -m dgemm_cli bench "$W"/v/s15_rand_21_157_split2 --json > "$OUT/bench_split_$r.json" 2>> "$OUT/bench_err.txt"
done
stamp "bench"
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
