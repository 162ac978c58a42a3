#!/usr/bin/env bash
# Session 13, device call 6 (nvidia-h200): correctness of the paths random sweeps reach only with this session's
# options. 40 random wide decode specs with a short K (--wide-short-k-share 1, K = 8..192; a batch 3 times in 10,
# run-time M 2 in 10; seed 7), as planned and with tcgemv taken wherever its gates allow (--family tcgemv: 11 of
# them); the 40 batched specs of call 1 (seed 5) whose verify ran out of time there. Verify seeds 1 and 2,
# --repeat 2; compute-sanitizer on three forced short-K tcgemv kernels; the spills of every build.
source tools/device_lib.sh
R="--small-m-share 1 --wide-decode-share 1 --a-vectors-share 0.5 --dynamic-share 0.2"
dg random-specs 40 --seed 7 $R --wide-short-k-share 1 --wide-batch-share 0.3 -o "$W/s7" >> "$OUT/gen.txt" 2>&1
dg random-specs 40 --seed 5 $R --wide-batch-share 1 -o "$W/s5" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/s7/*.yaml -o "$W/short" >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family tcgemv $(for n in 003 007 014 018 022 024 028 030 031 033 038; do echo "$W/s7/rand_7_$n.yaml"; done) \
  -o "$W/forced" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/s5/*.yaml -o "$W/batched" >> "$OUT/gen.txt" 2>&1
timeout 240 python3 -m dgemm_cli build "$W"/short "$W"/forced "$W"/batched -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for s in short forced batched; do
  timeout 100 python3 -m dgemm_cli verify "$W"/$s --seeds 1,2 --repeat 2 --json > "$OUT/verify_$s.json" 2> "$OUT/verify_${s}_err.txt"; stamp "verify $s rc=$?"
done
sanitize "$W"/forced/rand_7_003 "$W"/forced/rand_7_014 "$W"/forced/rand_7_030; stamp "sanitize"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
for s in ("short", "forced", "batched"):
    try:
        v = json.load(open(f"{out}/verify_{s}.json"))
    except (OSError, ValueError) as err:
        print(s, "missing", err); continue
    print("verify", s, sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:300]) for r in v if not r.get("passed")])
b = json.load(open(f"{out}/build.json"))
ks = [(r["name"], k) for r in b for k in r["kernels"]]
print("build", sum(bool(r.get("ok")) for r in b), "/", len(b), "dirs,", len(ks), "kernels,", sum(1 for _, k in ks if k["spill_store_bytes"]), "with spills")
for n, k in ks:
    if k["spill_store_bytes"]:
        print("  spill", n, k["kernel"].split("(")[0][-60:], k["registers"], "regs", k["spill_store_bytes"], "B")
PY
cat "$OUT/sanitize.txt" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|verify_.*\.json|build\.json'
