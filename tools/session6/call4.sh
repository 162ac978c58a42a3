#!/usr/bin/env bash
# Session 6, device call 4 (nvidia-h200-x2), run from a checkout: the final cost model's picks.
#   verify specs/*.yaml, the decode benchmarks and 30 random run-time-M specs (seed 31) with --repeat 2;
#   bench the decode benchmarks against cuBLAS (GPU 0) while the random set verifies (GPU 1).
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
DEC="specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x4096x14336.yaml
 specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml
 specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml
 specs/bench/up_128x14336x4096.yaml specs/bench/decode_dyn_1-64x4096x128.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml
 specs/bench/decode_dyn_1-64x4096x14336.yaml"
dg gen specs/*.yaml -o "$W/specs" > "$OUT/gen.txt" 2>&1
dg gen $DEC -o "$W/dec" >> "$OUT/gen.txt" 2>&1
dg random-specs 30 -o "$W/rsd" --seed 31 --small-m-share 0.5 --dynamic-share 1.0 > /dev/null
dg gen "$W"/rsd/*.yaml -o "$W/randdyn" >> "$OUT/gen.txt" 2>&1
grep -h "family = \|k_splits = " "$W"/*/*/*.cu | sort | uniq -c > "$OUT/families.txt"
stamp "gen"
timeout 200 python3 -m dgemm_cli build "$W/specs" "$W/dec" "$W/randdyn" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
( export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 -m dgemm_cli verify "$W/randdyn" "$W/specs" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"
  echo "verify rand rc=$?" >> "$OUT/log.txt" ) &
VPID=$!
export CUDA_VISIBLE_DEVICES=0
timeout 100 python3 -m dgemm_cli verify "$W/dec" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify dec rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W/dec" --reps 20 --m 1,2,3,4,8,16,17,32,48,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $VPID; stamp "verify rand done"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    try: return json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); return []
b = load("build.json")
print("build:", sum(x["ok"] for x in b), "/", len(b), "spilling:", [x["name"] for x in b for k in x["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]])
for n in ("verify.json", "verify_rand.json"):
    v = load(n); bad = [r for r in v if not r["passed"]]
    print(f"{n}: {len(v) - len(bad)}/{len(v)} passed; repeat bit changes: {[r['name'] for r in v if (r.get('report') or {}).get('repeat_differed')]}")
    for r in bad: print(f"  FAIL {r['name']} rel {r.get('rel_err')} {r.get('error') or ''} {str(r.get('first_fail'))[:200]}")
for r in load("bench.json"):
    if r.get("m_rows"):
        print(f"{r['name']:<30} " + " ".join(f"m{x['m']}:{x['us']:.1f}/{x['baseline_us']:.1f}={x['ratio']:.2f}" for x in r["m_rows"]))
    elif r.get("us"):
        print(f"{r['name']:<30} {r['us']:.2f} us ({r.get('gbps') or 0:.0f} GB/s) cublas {r['baseline_us']:.2f} ratio {r['ratio']:.3f} copy {r.get('copy_gbps') or 0:.0f}")
    else: print(r.get("name"), r.get("error"))
PY
KEEP='^(build|bench|verify|verify_rand)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
