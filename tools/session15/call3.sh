#!/usr/bin/env bash
# Session 15, device call 3 (nvidia-h200): hopper's new `l2_promotion` node (none where an operand streams once).
# The model's plans of issue 7's decode set, the run-time artifacts and tools/session15/specs; hopper forced at the
# rows gemv / tcgemv serve (one row, 8 rows, N = 4096 at 16) and gemv forced at [1,4096]x[4096,4096], to see where
# hopper now stands; copies of seven plans with the promotion flipped (sed on the generated maps), benched beside
# them. Built, verified (seeds 1, 2, --repeat 2), benched twice; the run-time artifacts once at ten m.
source tools/device_lib.sh
S=tools/session15/specs B=specs/bench
DEC="$B/decode_1x4096x128.yaml $B/decode_1x2048x512.yaml $B/decode_1x4096x14336.yaml $B/decode_8x4096x14336.yaml
  $B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml $B/up_128x14336x4096.yaml $B/decode_1x4096x4096.yaml
  $B/decode_8x4096x4096.yaml $B/decode_16x4096x4096.yaml $B/decode_64x4096x4096.yaml"
DYN="$B/decode_dyn_1-64x4096x128.yaml $B/decode_dyn_1-64x4096x4096.yaml $B/decode_dyn_1-64x4096x14336.yaml"
dg gen --untuned $DEC -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen --untuned $DYN -o "$W/dyn" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $S/*.yaml -o "$W/s" >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $B/decode_1x4096x4096.yaml $B/decode_1x4096x14336.yaml $B/decode_8x4096x14336.yaml \
  $B/decode_16x4096x4096.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family gemv $B/decode_1x4096x4096.yaml -o "$W/gv" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
PAIRS="dec/decode_16x4096x14336 dec/decode_64x4096x14336 dec/up_128x14336x4096 s/s15_m16_n14336_brow s/s15_m256_n14336 s/s15_m14336_n16 s/s15_m12_n14336_k4040_bias"
mkdir -p "$W/alt"
for p in $PAIRS; do
  cp -r "$W/$p" "$W/alt/"
  f="$W/alt/$(basename $p)/$(basename $p).cu"
  if grep -q CU_TENSOR_MAP_L2_PROMOTION_NONE "$f"; then sed -i 's/CU_TENSOR_MAP_L2_PROMOTION_NONE/CU_TENSOR_MAP_L2_PROMOTION_L2_256B/g' "$f"
  else sed -i 's/CU_TENSOR_MAP_L2_PROMOTION_L2_256B/CU_TENSOR_MAP_L2_PROMOTION_NONE/g' "$f"; fi
  echo "$p: $(grep -o 'CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*' "$W/$p/$(basename $p).cu" | sort | uniq -c | tr '\n' ' ') -> alt $(grep -o 'CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*' "$f" | sort | uniq -c | tr '\n' ' ')" >> "$OUT/promotions.txt"
done
timeout 400 python3 -m dgemm_cli build "$W"/dec "$W"/dyn "$W"/s "$W"/h "$W"/gv "$W"/alt -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/dec "$W"/dyn "$W"/s "$W"/h "$W"/gv "$W"/alt --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 80 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench_dec_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 40 python3 -m dgemm_cli bench "$W"/h/* "$W"/gv/* --json > "$OUT/bench_hgv_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 60 python3 -m dgemm_cli bench $(for p in $PAIRS; do echo "$W/$p"; done) --json > "$OUT/bench_pick_$r.json" 2>> "$OUT/bench_err.txt"
  timeout 60 python3 -m dgemm_cli bench "$W"/alt/* --json > "$OUT/bench_alt_$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench round $r"
done
timeout 120 python3 -m dgemm_cli bench "$W"/dyn/* --m 1,2,8,9,12,16,17,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
report | tee "$OUT/summary.txt"
cat "$OUT/promotions.txt"
pack 'summary\.txt|verify\.json|build\.json|bench_dec_1\.json|bench_dyn\.json'
