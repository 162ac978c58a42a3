#!/usr/bin/env bash
# Session 20, device call 3 (nvidia-h200): random specs verified behind the harness's writer kernel (every
# kernel launched right behind one that writes all its buffers): 24 of every kind (seed 20) and 16 drawn for
# the hopper family (TMA views, seed 21), seeds 1, 2, --repeat 2; compute-sanitizer memcheck on two hopper
# kernels that prefetch (one tile row; K split).
source tools/device_lib.sh
dg random-specs 24 --seed 20 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" > "$OUT/gen.txt" 2>&1
dg random-specs 16 --seed 21 --tma-share 0.9 --row-blocks-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x4096.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? ($(ls "$W/g" | wc -l) dirs, $(grep -l tma_prefetch_ "$W"/g/*/*.cu | wc -l) prefetching)"
timeout 300 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 180 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for n in decode_16x4096x14336 decode_64x4096x4096; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/g/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
  echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
{
  python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print('verify passed', sum(bool(r.get('passed')) for r in v), '/', len(v))" "$OUT/verify.json"
  cat "$OUT/failures.txt" "$OUT/sanitize.txt"
  python3 tools/session19/launch_cover.py "$W/rs" 2>&1 | tail -8
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
