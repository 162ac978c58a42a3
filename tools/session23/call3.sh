#!/usr/bin/env bash
# Session 23, device call 3 (nvidia-h200). Call 2: at 128 rows the epilogue costs 1.8-1.9 µs (no epilogue: 30.8-31.0
# against 32.75) and the math 0.9 (no math: 31.8); a seventh stage alone nothing (e7), the whole tile staged at once
# over the drained stages 0.1-0.4 µs (e7w); 64 rows e10w 0.14 µs. Now: how much of the epilogue is its global stores
# (nostore, e7w_nostore: staged and read back, not stored), the whole-tile staging at the planned 6 stages (e6w), and
# at 64 rows the planned 8 stages with the whole-tile staging (e8w) beside e10w; and the whole tile stored by one
# TMA bulk store a warpgroup, as cuBLAS stores (e7t, e10t). Correct variants verified (seeds 1,
# 2, --repeat 2); all benched in turn, 3 rounds.
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/epilogue_stages.py "$W/t" "$W/t" up_128x14336x4096=e6w up_128x14336x4096=e7w up_128x14336x4096=e7t \
  up_128x14336x4096=nostore up_128x14336x4096=e7w_nostore up_128x14336x4096=noepi decode_64x4096x14336=e8w \
  decode_64x4096x14336=e10w decode_64x4096x14336=e10t >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | tr '\n' ' ')"
timeout 300 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
mapfile -t CORRECT < <(ls -d "$W"/t/* | grep -Ev '_(noepi|nomath|nostore|[a-z0-9]*_nostore)$')
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
