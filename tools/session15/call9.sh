#!/usr/bin/env bash
# Session 15, device call 9 (nvidia-h200): (1) the bucket the promotion moved from tcgemv to hopper: [12 / 16, 2048]x
# [2048, 4096] bf16 (beta 0.5) with each family forced, and the run-time artifact of [1..64, 2048]x[2048, 4096], two
# rounds; (2) the run-time kernel at m = 16 against the fixed-M kernel of the same tiling ([16,4096]x[4096,14336]),
# benched alternately three times.
source tools/device_lib.sh
S=tools/session15/specs B=specs/bench
dg gen --untuned --family tcgemv $S/s15_m12_n4096_k2048_bf16.yaml $S/s15_m16_n4096_k2048_bf16.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $S/s15_m12_n4096_k2048_bf16.yaml $S/s15_m16_n4096_k2048_bf16.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $S/s15_dyn_1_64_n4096_k2048_bf16.yaml $B/decode_16x4096x14336.yaml $B/decode_dyn_1-64x4096x14336.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/t "$W"/h "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/t "$W"/h --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 30 python3 -m dgemm_cli bench "$W"/t/* --json > "$OUT/bench_t_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 30 python3 -m dgemm_cli bench "$W"/h/* --json > "$OUT/bench_h_$r.json" 2>> "$OUT/bench_err.txt"
done
timeout 40 python3 -m dgemm_cli bench "$W"/g/s15_dyn_1_64_n4096_k2048_bf16 --m 9,12,16 --json > "$OUT/bench_dynk2048.json" 2>> "$OUT/bench_err.txt"
stamp "bench (1)"
for r in 1 2 3; do
  timeout 30 python3 -m dgemm_cli bench "$W"/g/decode_16x4096x14336 --json > "$OUT/bench_fix_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 30 python3 -m dgemm_cli bench "$W"/g/decode_dyn_1_64x4096x14336 --m 16 --json > "$OUT/bench_rt_$r.json" 2>> "$OUT/bench_err.txt"
done
stamp "bench (2)"
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
