#!/usr/bin/env bash
# Session 14, device call 5 (nvidia-h200): tcgemv with A staged in shared memory by TMA (a_stage "shared"). The
# session's specs (tails, 6 / 7 / 8 row groups, padded A rows, m-contiguous C, K = 6144, run-time tokens, an
# epilogue) and the decode benchmarks it now takes, built, verified (seeds 1 and 2, --repeat 2) and sanitized; the
# picks benched twice beside hopper's plans of the same specs (gen --family hopper).
source tools/device_lib.sh
S=tools/session14/specs B=specs/bench
dg gen --untuned $S/*.yaml $B/decode_16x4096x14336.yaml $B/decode_dyn_1-64x4096x14336.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $B/decode_16x4096x14336.yaml $S/s14_m12_n14336.yaml $S/s14_m16_n16384.yaml \
  $S/s14_bf16_m9_n12288.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
timeout 300 python3 -m dgemm_cli build "$W"/g "$W"/h -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
BENCH="$W/g/decode_16x4096x14336 $W/g/s14_m12_n14336 $W/g/s14_m16_n16384 $W/g/s14_bf16_m9_n12288"
for r in 1 2; do
  timeout 60 python3 -m dgemm_cli bench $BENCH --json > "$OUT/bench_g$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench g rc=$?"
  timeout 60 python3 -m dgemm_cli bench "$W"/h/* --json > "$OUT/bench_h$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench h rc=$?"
done
timeout 60 python3 -m dgemm_cli bench "$W"/g/decode_dyn_1-64x4096x14336 --m 8,9,12,16,17 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
sanitize "$W"/g/s14_m11_n14300_k4040_beta "$W"/g/s14_dyn_9_16_bf16; stamp "sanitize"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
try:
    v = json.load(open(f"{out}/verify.json"))
    print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:300]) for r in v if not r.get("passed")])
except (OSError, ValueError) as err:
    print("verify missing", err)
b = json.load(open(f"{out}/build.json"))
for r in b:
    for k in r["kernels"]:
        if "tcgemv" in k["kernel"] or k["spill_store_bytes"]:
            print("  build", r["name"], k["kernel"].split("(")[0][-50:], k["registers"], "regs", k["spill_store_bytes"], "B spill")
PY
bench_rows "$OUT"/bench_g1.json "$OUT"/bench_h1.json "$OUT"/bench_g2.json "$OUT"/bench_h2.json "$OUT"/bench_dyn.json | tee -a "$OUT/summary.txt"
cat "$OUT/sanitize.txt" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_.*\.json'
