#!/usr/bin/env bash
# Session 13, device calls 7-8 (nvidia-h200; 7 stopped at an --m outside a spec's range): what tcgemv's spills
# at its 128-register bound cost. The seven random specs of call 6 whose tcgemv kernels spill 8-40 bytes
# (tools/session13/specs: batched seed 5, short-K seed 7), each
# as planned and with every tcgemv kernel bounded at 168 registers instead (tools/session13/regs_variants.py: same
# tilings, no spills, 12 warps an SM instead of 16); decode_8x4096x14336 likewise as a control. `deepgemm bench`
# (graph replay, inputs rotated past L2, cuBLAS in the same run); both verified.
source tools/device_lib.sh
python3 tools/session13/regs_variants.py "$W/g" 168 tools/session13/specs/*.yaml specs/bench/decode_8x4096x14336.yaml > "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/g --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 200 python3 -m dgemm_cli bench "$W"/g --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/verify.json"))
print("verify", sum(bool(r.get("passed")) for r in v), "/", len(v), [r["name"] for r in v if not r.get("passed")])
spills = {r["name"]: max([k["spill_store_bytes"] for k in r["kernels"] if "tcgemv" in k["kernel"]] or [0]) for r in json.load(open(f"{out}/build.json"))}
for r in sorted(json.load(open(f"{out}/bench.json")), key=lambda r: r["name"]):
    rows = r.get("m_rows") or [r]
    print(f"{r['name']:28s} spill {spills.get(r['name'], '?'):>3}  " + "  ".join(f"m={x.get('m', '-')}: {x['us']:7.2f} ({x['ratio']:.3f})" for x in rows))
PY
pack 'summary\.txt|bench\.json|verify\.json'
