#!/usr/bin/env bash
# Session 11, device call 12 (nvidia-h200): the synccheck control, second part. Call 11's fixed M = 32 kernels were
# clean at 16-, 8- and 4-block clusters; here M = 17 and 24 (rows past M in the tile: the A loader's row predicate
# at work, as in f32_dyn_rows' run-time buckets), split 16 and 8 ways, synccheck three times each.
source tools/device_lib.sh
rv() { python3 tools/render_variant.py tools/session11/specs/f32_splitk_m$1.yaml "$W/s" splitk "$2" "$3" >> "$OUT/gen.txt" 2>&1; }
for m in 17 24; do rv $m '{"block_m": 32, "block_n": 32, "block_k": 64, "thread_m": 1, "thread_n": 4, "stages": 3, "smem_inner_a": "m", "smem_inner_b": "n", "loader_a": "cp_async", "loader_b": "cp_async", "registers": 128, "splits": 16, "groups": 1}' _s16; rv $m '{"block_m": 32, "block_n": 32, "block_k": 64, "thread_m": 1, "thread_n": 4, "stages": 3, "smem_inner_a": "m", "smem_inner_b": "n", "loader_a": "cp_async", "loader_b": "cp_async", "registers": 128, "splits": 8, "groups": 1}' _s8; done
timeout 200 python3 -m dgemm_cli build "$W"/s -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/s --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for d in "$W"/s/*/; do
  n=$(basename "$d"); h=$(ls "$d"build/sm_90a/*_harness)
  for r in 1 2 3; do
    timeout 100 compute-sanitizer --tool synccheck --print-limit 100000 "$h" verify --seeds $r --samples 16 > "$OUT/sync_${n}_$r.txt" 2>&1
    echo "$n run $r: $(grep -c 'Barrier error' "$OUT/sync_${n}_$r.txt") barrier errors; $(grep 'ERROR SUMMARY' "$OUT/sync_${n}_$r.txt" | tail -1)" | tee -a "$OUT/summary.txt"
  done
done; stamp "synccheck"
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
pack 'summary\.txt|verify\.json|build\.json'
