#!/usr/bin/env bash
# Session 12, device call 2 (nvidia-h200).
# Part 1, hopper K split over 4 blocks and two blocks an SM (planner domain widened in the working tree for this
# call: K_SPLITS (1, 2, 4), the one-wave check counting CTAS_PER_SM blocks an SM): forced tilings beside the
# model's picks and cuBLAS at M = 16, 64, 128 (N = 14336) and M = 64 (N = 4096). Verified, then benched.
# Part 2, the open synccheck report on f32_dyn_rows (m = 17..64): the generated kernel, a copy whose barriers are
# the unaligned `barrier.sync 0` (legal with a diverged warp), and a -G build; synccheck on each.
source tools/device_lib.sh
rv() { python3 tools/render_variant.py "specs/bench/$1.yaml" "$W/hv" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1; }
dg gen --untuned specs/bench/decode_64x4096x4096.yaml specs/bench/decode_{16,64}x4096x14336.yaml \
  specs/bench/up_128x14336x4096.yaml -o "$W/hv" > "$OUT/gen.txt" 2>&1
rv decode_64x4096x4096 '{"consumers":1,"block_m":64,"block_n":64,"k_splits":4,"ctas_per_sm":2,"stages":6}' _s4c2
rv decode_64x4096x4096 '{"consumers":1,"block_m":64,"block_n":64,"k_splits":4,"ctas_per_sm":2,"stages":5}' _s4c2st5
rv decode_64x4096x4096 '{"consumers":1,"block_m":64,"block_n":64,"k_splits":2,"ctas_per_sm":2,"stages":6}' _s2c2
rv decode_64x4096x4096 '{"consumers":1,"block_m":64,"block_n":128,"k_splits":4,"ctas_per_sm":2,"stages":4}' _n128s4c2
for s in decode_64x4096x14336 decode_16x4096x14336; do
  rv $s '{"consumers":1,"block_m":64,"block_n":112,"k_splits":2,"ctas_per_sm":2,"stages":5}' _s2c2
  rv $s '{"consumers":1,"block_m":64,"block_n":224,"k_splits":2,"ctas_per_sm":1,"stages":6}' _n224s2
done
rv up_128x14336x4096 '{"consumers":1,"block_m":64,"block_n":224,"ctas_per_sm":1,"stages":5}' _n224
rv up_128x14336x4096 '{"consumers":1,"block_m":64,"block_n":112,"ctas_per_sm":2,"stages":4}' _c2
rv up_128x14336x4096 '{"block_m":128,"block_n":112,"consumers":1,"ctas_per_sm":2,"stages":3}' _m128c2
# Part 2's three copies.
dg gen specs/f32/f32_dyn_rows.yaml -o "$W/sb" >> "$OUT/gen.txt" 2>&1
for v in ua dbg; do mkdir -p "$W/s$v"; cp -r "$W/sb/f32_dyn_rows" "$W/s$v/"; done
sed -i 's/^\( *\)__syncthreads();/\1asm volatile("barrier.sync 0;\\n" ::: "memory");/' "$W/sua/f32_dyn_rows/f32_dyn_rows.cu"
sed -i 's/"-O3",/"-G",/' "$W/sdbg/f32_dyn_rows/plan.json"
{ grep -c "barrier.sync 0" "$W/sua/f32_dyn_rows/f32_dyn_rows.cu"; grep -c '"-G"' "$W/sdbg/f32_dyn_rows/plan.json"; } > "$OUT/patch_counts.txt"
timeout 400 python3 -m dgemm_cli build "$W"/hv "$W"/sb "$W"/sua "$W"/sdbg -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/hv "$W"/sb "$W"/sua --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 150 python3 -m dgemm_cli bench "$W"/hv --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
for v in b ua dbg; do
  h=$(ls "$W/s$v"/f32_dyn_rows/build/sm_90a/*_harness)
  for r in 1 2; do
    timeout 100 compute-sanitizer --tool synccheck --print-limit 100000 "$h" verify --seeds 1 --samples 16 --m 17,20,32,33,48,64 > "$OUT/sync_${v}_$r.txt" 2>&1
    echo "$v run $r rc=$?: $(grep -c 'Barrier error' "$OUT/sync_${v}_$r.txt") barrier errors; $(grep 'ERROR SUMMARY' "$OUT/sync_${v}_$r.txt" | tail -1); $(grep -E '^(PASS|FAIL)|passed|failed' "$OUT/sync_${v}_$r.txt" | tail -1)" | tee -a "$OUT/summary.txt"
  done
done; stamp "synccheck"
cuobjdump -sass "$(ls "$W"/sua/f32_dyn_rows/build/sm_90a/*.so)" 2>/dev/null | grep -E "BAR|WARPSYNC|BSSY|BSYNC" | sort | uniq -c > "$OUT/sass_ua_bar.txt"
cuobjdump -sass "$(ls "$W"/sb/f32_dyn_rows/build/sm_90a/*.so)" 2>/dev/null | grep -E "BAR|WARPSYNC|BSSY|BSYNC" | sort | uniq -c > "$OUT/sass_b_bar.txt"
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [r["name"] for r in v if not r.get("passed")])
for r in json.load(open(f"{out}/bench.json")):
    print(f"{r['name']:40s} {r['us']:8.2f} us  cuBLAS {r['baseline_us']:8.2f}  ratio {r['ratio']:.3f}")
PY
grep -h "summary\|: {" "$OUT/gen.txt" | cut -c1-220 | tee -a "$OUT/summary.txt"
pack 'summary\.txt|bench\.json|verify\.json|build\.json|sass_.*'
