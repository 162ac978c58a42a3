#!/usr/bin/env bash
# Session 8, device call 6 (nvidia-h200): the width variants again. Call 5's hung: tools/width_variants.py had
# rendered widths 96/112/160/224 for an n-major B, which its 64-wide boxes cannot load (the planner's domain left
# them out, but an explicit assignment went past the domain; ConstraintGraph.restrict now refuses it). exp/wv:
# the 16 valid variants of the first 20 random TMA specs (seed 11). Build, verify seed 1 --repeat 2.
source tools/device_lib.sh
timeout 150 python3 -m dgemm_cli build exp/wv -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify exp/wv --seeds 1 --repeat 2 --json > "$OUT/verify_wv.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
report
pack '(build|verify_wv)\.json'
