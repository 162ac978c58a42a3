#!/usr/bin/env bash
# Session 6, device call 5 (nvidia-h200-x2): deeper hopper pipelines (8, 10, 12 stages) for small tiles.
#   GPU 1: tune --level 2 --family hopper of four memory-bound specs (how the new depths rank, measured).
#   GPU 0: verify (--repeat 2) and bench the model's picks of the decode benchmarks and specs/batched_broadcast.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
TUNE="specs/bench/decode_1x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml specs/bench/decode_8x4096x14336.yaml specs/batched_broadcast.yaml"
( export CUDA_VISIBLE_DEVICES=1
  timeout 300 python3 -m dgemm_cli tune $TUNE --level 2 --family hopper --db "$OUT/tuning.json" -j "$J" --budget 25 --reps 10 -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"
  echo "tune rc=$?" >> "$OUT/log.txt" ) &
TPID=$!
export CUDA_VISIBLE_DEVICES=0
DEC="specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml
 specs/bench/decode_64x4096x14336.yaml specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml
 specs/bench/decode_16x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x14336.yaml
 specs/batched_broadcast.yaml specs/moe_up.yaml"
dg gen $DEC -o "$W/dec" > "$OUT/gen.txt" 2>&1
grep -h "stages = \|k_splits = " "$W"/dec/*/*.cu | sort | uniq -c > "$OUT/stages.txt"
timeout 150 python3 -m dgemm_cli build "$W/dec" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/dec" --seeds 1,2 --samples 32 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 90 python3 -m dgemm_cli bench "$W/dec" --reps 20 --m 1,2,4,8,16,32,64 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
wait $TPID; stamp "tune done"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    try: return json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); return []
b = load("build.json")
print("build:", sum(x["ok"] for x in b), "/", len(b), "spilling:", [x["name"] for x in b for k in x["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]])
v = load("verify.json"); bad = [r for r in v if not r["passed"]]
print(f"verify: {len(v) - len(bad)}/{len(v)} passed; repeat bit changes: {[r['name'] for r in v if (r.get('report') or {}).get('repeat_differed')]}")
for r in bad: print(f"  FAIL {r['name']} rel {r.get('rel_err')} {r.get('error') or ''} {str(r.get('first_fail'))[:200]}")
for r in load("bench.json"):
    if r.get("m_rows"):
        print(f"{r['name']:<28} " + " ".join(f"m{x['m']}:{x['us']:.1f}/{x['baseline_us']:.1f}={x['ratio']:.2f}" for x in r["m_rows"]))
    elif r.get("us"):
        print(f"{r['name']:<28} {r['us']:.2f} us cublas {r['baseline_us']:.2f} ratio {r['ratio']:.3f}")
for e in load("tune.json"):
    ms = sorted([m for m in e["measured"] if m.get("us")], key=lambda m: m["us"])
    print(f"tune {e['name']:<22} {len(ms)}/{len(e['measured'])}: " + ", ".join(
        f"{m['id']} {m['us']:.2f} [{m['assignment']['block_m']}x{m['assignment']['block_n']} st{m['assignment']['stages']} s{m['assignment'].get('k_splits', 1)} c{m['assignment']['consumers']}x{m['assignment']['ctas_per_sm']}]" for m in ms[:8]))
PY
cat "$OUT/stages.txt"
KEEP='^(build|bench|verify|tune|tuning)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
