#!/usr/bin/env bash
# Session 8, device call 5 (nvidia-h200): call 4's verify of the non-benchmark sets ran past its timeout (one
# JSON at the end: nothing came back). The same sets, generated the same way, verified set by set (seed 1), each
# into its own JSON.
source tools/device_lib.sh
dg gen specs/*.yaml specs/epilogue/*.yaml -o "$W/specs" > "$OUT/gen.txt" 2>&1
dg gen exp/rst/*.yaml -o "$W/randtma" --family hopper >> "$OUT/gen.txt" 2>&1
python3 tools/width_variants.py "$W/wv" $(ls exp/rst/*.yaml | head -20) >> "$OUT/gen.txt" 2>&1
dg random-specs 20 -o "$W/rsd" --seed 31 --small-m-share 0.5 --dynamic-share 1.0 > /dev/null
dg gen "$W"/rsd/*.yaml -o "$W/randdyn" >> "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/specs "$W"/randtma "$W"/wv "$W"/randdyn -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for s in wv randtma specs randdyn; do
  timeout 110 python3 -m dgemm_cli verify "$W/$s" --seeds 1 --json > "$OUT/verify_$s.json" 2>> "$OUT/verify_err.txt"; stamp "verify $s rc=$?"
done
report
pack '(build|verify_.*)\.json'
