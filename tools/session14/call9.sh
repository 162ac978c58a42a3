#!/usr/bin/env bash
# Session 14, device call 9 (nvidia-h200): the final staged tcgemv. The session's specs as planned and, for the
# 120-block widths the model gives to hopper, with tcgemv forced; issue 7's decode benchmarks; all verified (seeds 1
# and 2, --repeat 2) and three sanitized; the decode set benched beside hopper's plans of the 9..16-token rows and the
# copy bandwidth (bench's copy_gbps).
source tools/device_lib.sh
S=tools/session14/specs B=specs/bench
DEC="$B/decode_1x4096x128.yaml $B/decode_1x2048x512.yaml $B/decode_1x4096x14336.yaml $B/decode_8x4096x14336.yaml
  $B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml $B/up_128x14336x4096.yaml $B/decode_1x4096x4096.yaml
  $B/decode_8x4096x4096.yaml $B/decode_16x4096x4096.yaml $B/decode_64x4096x4096.yaml"
DYN="$B/decode_dyn_1-64x4096x128.yaml $B/decode_dyn_1-64x4096x4096.yaml $B/decode_dyn_1-64x4096x14336.yaml"
dg gen --untuned $S/*.yaml $B/gqa_scores_b32_m8.yaml $B/moe_experts_b8_m8.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
dg gen --untuned $DEC -o "$W/dec" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $DYN -o "$W/dyn" >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family tcgemv $S/s14_bf16_m16_n13440.yaml $S/s14_m10_n15360_k2048_ccol.yaml \
  $S/s14_m14_n11520_k5120_gelu.yaml -o "$W/f" >> "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $B/decode_16x4096x14336.yaml $S/s14_m12_n14336.yaml $S/s14_m16_n16384.yaml -o "$W/h" >> "$OUT/gen.txt" 2>&1
timeout 330 python3 -m dgemm_cli build "$W"/g "$W"/dec "$W"/dyn "$W"/f "$W"/h -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/g "$W"/dec "$W"/dyn "$W"/f --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/dec/* --json > "$OUT/bench_dec.json" 2>> "$OUT/bench_err.txt"; stamp "bench dec rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/dyn/* --m 1,2,8,9,12,16,17,32,48,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
for r in 1 2; do
  timeout 40 python3 -m dgemm_cli bench "$W"/g/s14_m12_n14336 "$W"/g/s14_m16_n16384 "$W"/dec/decode_16x4096x14336 --json > "$OUT/bench_s$r.json" 2>> "$OUT/bench_err.txt"
  timeout 40 python3 -m dgemm_cli bench "$W"/h/* --json > "$OUT/bench_h$r.json" 2>> "$OUT/bench_err.txt"
done
stamp "bench pairs"
sanitize "$W"/g/s14_m11_n14300_beta "$W"/g/s14_dyn_1_16 "$W"/f/s14_m14_n11520_k5120_gelu; stamp "sanitize"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [(r["name"], (r.get("error") or "")[:300]) for r in v if not r.get("passed")])
b = json.load(open(f"{out}/build.json"))
ks = [(r["name"], k) for r in b for k in r["kernels"]]
print("build", sum(bool(r.get("ok")) for r in b), "/", len(b), "dirs,", len(ks), "kernels,", sum(1 for _, k in ks if k["spill_store_bytes"]), "with spills")
for f in ("bench_dec", "bench_s1", "bench_h1", "bench_s2", "bench_h2", "bench_dyn"):
    try:
        rows = json.load(open(f"{out}/{f}.json"))
    except (OSError, ValueError) as err:
        print(f, "missing", err); continue
    for r in rows:
        if r.get("m_rows"):
            print(f"{f:9s} {r['name']:34s} copy {r.get('copy_gbps', 0):6.0f} GB/s  " + "  ".join(
                f"m{x['m']}:{x['us']:.2f}/{x['baseline_us']:.2f}={x['ratio']:.3f}" for x in r["m_rows"]))
        else:
            print(f"{f:9s} {r['name']:34s} {r['us']:7.2f} us {r.get('gbps', 0):6.0f} GB/s  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}  copy {r.get('copy_gbps', 0):6.0f}")
PY
cat "$OUT/sanitize.txt" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_.*\.json'
