#!/usr/bin/env bash
# Session 19, device call 6 (nvidia-h200): the random specs that reach hopper's new dependent-launch rule (one tile
# row leaving at most a sixteenth of the SMs idle), which the call-4 random set (seed 19) did not: the 5 of
# `random-specs 200 --seed 23 --small-m-share 1 --wide-decode-share 1 --dynamic-share 0.2` that plan it
# (tools/session19/specs/cover/; 8 kernels, also gemv and tcgemv buckets), verified seeds 1, 2, --repeat 2.
source tools/device_lib.sh
dg gen --untuned tools/session19/specs/cover/*.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
build_verify 1,2 "$W"/g
timeout 100 python3 -m dgemm_cli verify "$W"/g --seeds 3 --repeat 2 --json > "$OUT/verify_repeat.json" 2>> "$OUT/verify_err.txt"
stamp "verify repeat rc=$?"; failures "$OUT/verify_repeat.json" | tee -a "$OUT/failures.txt"
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); r=json.load(open('$OUT/verify_repeat.json'))
print('verify', sum(bool(x.get('passed')) for x in v), '/', len(v), '; seed 3 --repeat 2:', sum(bool(x.get('passed')) for x in r), '/', len(r))" | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt'
