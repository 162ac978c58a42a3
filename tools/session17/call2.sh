#!/usr/bin/env bash
# Session 17, device call 2 (nvidia-h200). Call 1 found `direct` (accumulator pairs straight to C) no faster than
# the packed epilogue (M = 16: 29.7 against 29.5-29.8 µs; M = 128: 1 µs slower), and ncu's stall samples (session 16,
# call 1) put under 1% of the consumer warps' samples in the epilogue's instructions. So where do the 1.5 µs that
# the epilogue-less kernel saves go? Variants (tools/session17/epi_patch.py): `whole` (one staging pass, warps past M
# skip); timing only: `nostore` (everything but the global stores), `onechunk` (the first 16 of 112 columns stored).
# Verified (base and the variants that write C, seeds 1, 2), benched alternately, 2 rounds.
#   bash tools/session17/call2.sh [VARIANT...]   (default: whole nostore onechunk; call 5 ran `tmastore`; call 1,
#   at 45949a7, ran `whole direct` from a first copy of this script, since folded in: `whole` did not build there)
source tools/device_lib.sh
B=specs/bench
SPECS="$B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml $B/up_128x14336x4096.yaml $B/decode_dyn_1-64x4096x14336.yaml"
# shellcheck disable=SC2086
dg gen --untuned $SPECS -o "$W/base" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
VARIANTS=${*:-whole nostore onechunk}
WRITES=$(echo "$VARIANTS" | tr ' ' '\n' | grep -Ev '^(nostore|onechunk)$' | sed "s|^|$W/|" | tr '\n' ' ')
for v in $VARIANTS; do
  cp -r "$W/base" "$W/$v"
  python3 tools/session17/epi_patch.py "$v" "$W/$v"/*/*[0-9].cu >> "$OUT/gen.txt" 2>&1 || { stamp "patch $v failed"; exit 1; }
done
# shellcheck disable=SC2046
timeout 300 python3 -m dgemm_cli build "$W"/base $(for v in $VARIANTS; do echo "$W/$v"; done) -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
# shellcheck disable=SC2086
timeout 200 python3 -m dgemm_cli verify "$W"/base $WRITES --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  for v in base $VARIANTS; do
    timeout 100 python3 -m dgemm_cli bench "$W/$v"/* --m 9,16,32,64 --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench r$r $v rc=$?"
  done
done
report | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
