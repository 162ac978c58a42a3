#!/usr/bin/env bash
# Session 15, device call 7 (nvidia-h200): compute-sanitizer memcheck, racecheck and synccheck on two hopper plans
# whose maps take no promotion ([16,4096]x[4096,14336], and the K- and N-tail spec with a bias).
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_16x4096x14336.yaml tools/session15/specs/s15_m12_n14336_k4040_bias.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
grep -c CU_TENSOR_MAP_L2_PROMOTION_NONE "$W"/g/*/*.cu | tee "$OUT/promotions.txt"
sanitize "$W"/g/decode_16x4096x14336 "$W"/g/s15_m12_n14336_k4040_bias; stamp "sanitize"
cat "$OUT/sanitize.txt"
pack 'sanitize\.txt|promotions\.txt'
