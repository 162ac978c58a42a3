#!/usr/bin/env bash
# Session 14, device call 12 (nvidia-h200): the random sweep reaches the staged activation. 40 specs of
# `random-specs --wide-staged-share 1` (seed 14); the 12 whose tcgemv plan stages A (6, 7 and 8 row groups, run-time M
# in some), generated with --family tcgemv, built and verified (seeds 1 and 2, --repeat 2).
source tools/device_lib.sh
dg random-specs 40 --seed 14 --small-m-share 1 --wide-decode-share 1 --a-vectors-share 0.5 --dynamic-share 0.2 \
  --wide-staged-share 1 -o "$W/s" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family tcgemv $(for n in 000 005 008 009 011 013 024 026 027 029 033 037; do echo "$W/s/rand_14_$n.yaml"; done) \
  -o "$W/g" >> "$OUT/gen.txt" 2>&1
echo "staged kernels: $(grep -l 'A staged in shared memory by TMA' "$W"/g/*/*[0-9].cu | wc -l)" | tee -a "$OUT/gen.txt"
timeout 150 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
{ tail -1 "$OUT/gen.txt"; python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v), [(r['name'], (r.get('error') or '')[:200]) for r in v if not r.get('passed')])
b=json.load(open('$OUT/build.json')); ks=[k for r in b for k in r['kernels']]; print('build', sum(bool(r.get('ok')) for r in b), '/', len(b), 'dirs,', len(ks), 'kernels, spills:', [(k['kernel'][-40:], k['spill_store_bytes']) for k in ks if k['spill_store_bytes']])"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
