#!/usr/bin/env bash
# Session 11, device call 7 (nvidia-h200): the open synccheck report on f32_dyn_rows (splitk FFMA buckets, narrow
# cp.async loaders, 16-block clusters). synccheck (print limit 100000, twice each) on the generated kernel and two
# hand-patched copies: `unroll`: the narrow loaders' `#pragma unroll 4` loops fully unrolled; `syncwarp`: a
# __syncwarp() before every __syncthreads(). Errors counted by kernel (bucket) and block rank in the cluster.
source tools/device_lib.sh
dg gen specs/f32/f32_dyn_rows.yaml -o "$W/base" > "$OUT/gen.txt" 2>&1
for v in unroll syncwarp; do mkdir -p "$W/$v"; cp -r "$W/base/f32_dyn_rows" "$W/$v/"; done
sed -i 's/^#pragma unroll 4  \/\/ bounded.*/#pragma unroll/' "$W/unroll/f32_dyn_rows/f32_dyn_rows.cu"
sed -i 's/^\( *\)__syncthreads();/\1__syncwarp();\n\1__syncthreads();/' "$W/syncwarp/f32_dyn_rows/f32_dyn_rows.cu"
grep -c "#pragma unroll 4" "$W"/{base,unroll}/f32_dyn_rows/f32_dyn_rows.cu > "$OUT/patch_counts.txt"
grep -c "__syncwarp" "$W"/{base,syncwarp}/f32_dyn_rows/f32_dyn_rows.cu >> "$OUT/patch_counts.txt"
timeout 300 python3 -m dgemm_cli build "$W"/base "$W"/unroll "$W"/syncwarp -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/base "$W"/unroll "$W"/syncwarp --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for v in base unroll syncwarp; do
  h=$(ls "$W/$v"/f32_dyn_rows/build/sm_90a/*_harness)
  for r in 1 2; do
    timeout 150 compute-sanitizer --tool synccheck --print-limit 100000 "$h" verify --seeds 1 --samples 16 > "$OUT/sync_${v}_$r.txt" 2>&1
    echo "$v run $r: $(grep -c 'Barrier error' "$OUT/sync_${v}_$r.txt") barrier errors; $(grep 'ERROR SUMMARY' "$OUT/sync_${v}_$r.txt" | tail -1)" | tee -a "$OUT/summary.txt"
    grep -A1 "Barrier error" "$OUT/sync_${v}_$r.txt" | grep -o "m[0-9_]*_[a-z]*::f32_dyn_rows_kernel<[^>]*>" | sort | uniq -c | sed 's/^/    /' | tee -a "$OUT/summary.txt"
    grep -o "in block ([0-9]*" "$OUT/sync_${v}_$r.txt" | grep -o "[0-9]*$" | awk '{print "rank " $1 % 16}' | sort | uniq -c | tr '\n' ' ' | sed 's/^/    /' | tee -a "$OUT/summary.txt"; echo | tee -a "$OUT/summary.txt"
  done
done; stamp "synccheck"
cat "$OUT/patch_counts.txt"
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
pack 'summary\.txt|verify\.json|build\.json'
