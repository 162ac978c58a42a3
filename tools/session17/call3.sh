#!/usr/bin/env bash
# Session 17, device call 3 (nvidia-h200): the splitk cost model. Session 16's sweep (this session's calls 2 and 3 of
# tools/session16/call2.sh) measured splitk's picks at N = 2048 (16x128x128 tiles, 2 stages, K split 16) at 1.4-1.8x
# their estimate, where the model had moved [4..8, K] x [K, 2048] to splitk from hopper (0.69-0.74x cuBLAS).
# 1. tools/session17/cluster_occupancy.cu: resident clusters of 16 by block shape (cudaOccupancyMaxActiveClusters).
# 2. tools/session17/splitk_variants.py: 8 splitk tilings of four sweep specs, with the model's estimate of each;
#    built, verified (seed 1), benched (2 rounds); a table of measured against model.
source tools/device_lib.sh
nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/occ" tools/session17/cluster_occupancy.cu && "$W/occ" > "$OUT/occupancy.txt" 2>&1
stamp "occupancy rc=$?"
SW=tools/session16/sweep
python3 tools/session17/splitk_variants.py "$W/v" $SW/sw_m1_n2048_k8192.yaml $SW/sw_m8_n2048_k4096.yaml \
  $SW/sw_m4_n2048_k2048.yaml $SW/sw_m1_n4096_k8192.yaml > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
cp "$W/v/model.json" "$OUT/model.json"
timeout 300 python3 -m dgemm_cli build "$W/v" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W/v" --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  timeout 150 python3 -m dgemm_cli bench "$W/v" --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench r$r rc=$?"
done
python3 - "$OUT/model.json" "$OUT"/bench_1.json "$OUT"/bench_2.json <<'PY' | tee "$OUT/table.txt"
import json, sys
model = json.load(open(sys.argv[1]))
runs = [{r["name"]: r for r in json.load(open(p))} for p in sys.argv[2:]]
print(f"{'kernel':36s} {'model':>7s} {'r1 us':>7s} {'r2 us':>7s} {'meas/model':>10s} {'cuBLAS':>7s}")
for name, m in model.items():
    us = [run[name]["us"] for run in runs if name in run and isinstance(run[name].get("us"), (int, float))]
    base = next((run[name].get("baseline_us") for run in runs if name in run), None)
    if not us:
        print(f"{name:36s} {m['model_us']:7.2f}  (no time)")
        continue
    print(f"{name:36s} {m['model_us']:7.2f} {us[0]:7.2f} {us[-1]:7.2f} {min(us) / m['model_us']:10.3f} {base or 0:7.2f}")
PY
cat "$OUT/occupancy.txt"
pack 'table\.txt|occupancy\.txt|model\.json|failures\.txt'
