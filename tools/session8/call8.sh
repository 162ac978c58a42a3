#!/usr/bin/env bash
# Session 8, device call 8 (nvidia-h200): the two random small-M specs (seed 21: 020, 037) whose model's pick
# changed after call 7 (the two-chunk rule kept to 16-byte chunks): gen, build, verify seeds 1,2 --repeat 2.
source tools/device_lib.sh
dg random-specs 40 -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
dg gen "$W"/rss/rand_21_020.yaml "$W"/rss/rand_21_037.yaml -o "$W/r" > "$OUT/gen.txt" 2>&1
timeout 100 python3 -m dgemm_cli build "$W"/r -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/r --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
grep -h "Plan gemv\|Plan splitk" "$W"/r/*/*.cu | head -4
report | grep -E "verify|build"
