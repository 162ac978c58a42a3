#!/usr/bin/env bash
# Session 23, device call 2 (nvidia-h200). Call 1 (session 22's call7.sh) found that A's multicast has nothing to
# save: the L2 request coalescer already serves the lockstep A reads of 128 blocks, and ours and cuBLAS's 128-row
# kernels move the same sectors from L2 to it. So where do the 2.5 µs between the 128-row kernel and its loads alone
# go? tools/session23/epilogue_stages.py's variants of the 128-row kernel (no epilogue, no math: timing only; 5
# stages; 7 stages with the epilogue staged over the drained stages, by 16 columns or the whole tile at once) and of
# the 16- and 64-row kernels (9 stages; 10 staged over the stages, whole tile). The correct ones verified (seeds 1, 2,
# --repeat 2), all benched in turn, 3 rounds.
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_16x4096x14336.yaml \
  specs/bench/decode_64x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/epilogue_stages.py "$W/t" "$W/t" up_128x14336x4096=st5 up_128x14336x4096=e7 \
  up_128x14336x4096=e7w up_128x14336x4096=noepi up_128x14336x4096=nomath decode_16x4096x14336=st9 \
  decode_16x4096x14336=e10w decode_64x4096x14336=e10w >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | tr '\n' ' ')"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
mapfile -t CORRECT < <(ls -d "$W"/t/* | grep -Ev '_(noepi|nomath)$')
timeout 240 python3 -m dgemm_cli verify "${CORRECT[@]}" --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" > "$OUT/failures.txt"
bench_rounds 3 150 "$W"/t/*
bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
{ cat "$OUT/failures.txt"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/bench_rows.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|gen\.txt'
