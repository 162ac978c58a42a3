#!/usr/bin/env bash
# Session 13, device call 9 (nvidia-h200): correctness at the session's final code. Every GPU test of the suite
# (pytest -m gpu) in the background; meanwhile 60 random specs of every kind (seed 13: TMA share 0.4, small-M 0.3 with
# half of those wide, a batch and short K each 3 in 10 of the wide ones, run-time M 0.2, epilogues 0.3, A vectors 0.5),
# verified seeds 1 and 2 with --repeat 2.
source tools/device_lib.sh
(timeout 540 python3 -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest rc=$?" >> "$OUT/pytest_gpu.txt") &
dg random-specs 60 --seed 13 --tma-share 0.4 --small-m-share 0.3 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/s" > "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/s/*.yaml -o "$W/g" >> "$OUT/gen.txt" 2>&1
timeout 300 python3 -m dgemm_cli build "$W"/g -j 12 --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
wait; stamp "pytest done"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, collections
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:300]) for r in v if not r.get("passed")])
b = json.load(open(f"{out}/build.json"))
fam = collections.Counter(k["kernel"].split("::")[1].split("_")[-1] if "::" in k["kernel"] else "?" for r in b for k in r["kernels"])
print("build", sum(bool(r.get("ok")) for r in b), "/", len(b), "dirs; kernels by namespace:", dict(fam))
PY
tail -3 "$OUT/pytest_gpu.txt" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|pytest_gpu\.txt'
