#!/usr/bin/env bash
# Session 12, device call 10 (nvidia-h200): random specs that plan batched tcgemv kernels, at the final planner code.
# tools/session12/specs/random_batched holds the 41 of 1503 random decode specs (seeds 14, 15, 20..34: small-M share
# 1, wide 0.8, A vectors 0.5, run-time M 0.2) whose plan has a tcgemv kernel over a batch of 2 or 3; this call runs
# 14 of them (K and N tails, run-time M, 16 tokens, pointer checks), seeds 1 and 2, --repeat 2.
source tools/device_lib.sh
R=tools/session12/specs/random_batched
dg gen --untuned $(for n in 20_048 21_059 21_068 22_023 23_032 26_061 27_037 27_065 30_088 31_022 31_035 33_028 34_099 15_080; do
  echo $R/rand_$n.yaml; done) -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 90 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
python3 -c "
import json; v=json.load(open('$OUT/verify.json'))
print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v), [(r['name'], (r.get('error') or '')[:300]) for r in v if not r.get('passed')])
b=json.load(open('$OUT/build.json')); ks=[k for r in b for k in r['kernels']]
print('build', sum(bool(r.get('ok')) for r in b), '/', len(b), 'dirs,', len(ks), 'kernels,', sum(1 for k in ks if k['spill_store_bytes']), 'with spills')" | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|build\.json'
