#!/usr/bin/env bash
# Session 13, device call 1 (nvidia-h200): tcgemv tilings outside the measured set (tools/session13/tc_variants.py):
# 4 octets a warp at one 64-k segment a round (the activation's loads shared by 4 octets, half of them a weight
# byte at 16 tokens), and 1 segment a round at 2 octets, beside the current picks and hopper, at M = 8 and 16,
# N = 4096 and 14336 (`deepgemm bench`: graph replay, inputs rotated past L2, cuBLAS in the same run). Every variant
# verified (seeds 1, 2). Then 40 random wide decode specs over a batch (--wide-batch-share 1, seed 5), verified.
source tools/device_lib.sh
B=specs/bench
tv() { python3 tools/session13/tc_variants.py "$W/bench" "$@" >> "$OUT/gen.txt" 2>&1; }
tv $B/decode_16x4096x14336.yaml 16:1:4:2:128 16:2:4:2:168 16:4:2:1:168 16:4:4:1:168 16:2:4:1:128 16:2:2:1:128
tv $B/decode_16x4096x4096.yaml 16:1:4:2:128 16:4:2:1:168 16:4:4:1:168 16:2:4:1:128 16:2:8:1:128
tv $B/decode_8x4096x14336.yaml 8:2:2:2:128 8:4:2:1:128 8:4:4:1:128 8:2:2:1:128 8:2:4:1:128
tv $B/decode_8x4096x4096.yaml 8:2:8:2:128 8:4:4:1:128 8:4:8:1:128 8:2:8:1:128
dg gen --untuned $B/decode_16x4096x14336.yaml $B/decode_16x4096x4096.yaml -o "$W/bench" >> "$OUT/gen.txt" 2>&1
dg random-specs 40 --seed 5 --small-m-share 1 --wide-decode-share 1 --wide-batch-share 1 --a-vectors-share 0.5 --dynamic-share 0.2 \
  -o "$W/rspecs" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rspecs/*.yaml -o "$W/rand" > "$OUT/gen_rand.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/bench -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/bench --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W"/bench --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 150 python3 -m dgemm_cli build "$W"/rand -j "$J" --json > "$OUT/build_rand.json" 2> "$OUT/build_rand_err.txt"; stamp "build rand rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/rand --seeds 1,2 --repeat 2 --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"; stamp "verify rand rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
for f in ("verify", "verify_rand"):
    try:
        v = json.load(open(f"{out}/{f}.json"))
    except (OSError, ValueError) as err:
        print(f, "missing", err); continue
    print(f, sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:200]) for r in v if not r.get("passed")])
for f in ("build", "build_rand"):
    try:
        b = json.load(open(f"{out}/{f}.json"))
    except (OSError, ValueError) as err:
        print(f, "missing", err); continue
    ks = [k for r in b for k in r["kernels"]]
    print(f, sum(bool(r.get("ok")) for r in b), "/", len(b), "dirs,", len(ks), "kernels,", sum(1 for k in ks if k["spill_store_bytes"]), "with spills")
for r in json.load(open(f"{out}/bench.json")):
    print(f"{r['name']:42s} {r['us']:7.2f} us {r['gbps'] or 0:6.0f} GB/s  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}")
PY
pack 'summary\.txt|verify\.json|bench\.json|verify_rand\.json|build\.json|build_rand\.json'
