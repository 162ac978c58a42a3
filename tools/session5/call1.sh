#!/usr/bin/env bash
# Session 5, device call 1 (nvidia-h200-x2), run from a checkout:
#   1. issue 9: gen + build + verify specs/einsum (opt_einsum's two-operand equations, small odd and
#      thousands, f16/f32) and the full-reduction bench specs, re-planned since their last GPU verify;
#      --samples 8 (the CPU check of the reference is slow for K in the millions), seeds 1,2, --repeat 3.
#   2. issue 5: `deepgemm tune --level 2` over specs/*.yaml (decode_dynamic's 8 buckets in call 2),
#      one worker a GPU, into $OUT/tuning.json; then gen of the same specs with that database.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
dg gen specs/einsum/*_small_*.yaml -o "$W/ein_small" > "$OUT/gen.txt" 2>&1
dg gen specs/einsum/*_large_*.yaml -o "$W/ein_large" >> "$OUT/gen.txt" 2>&1
dg gen specs/bench/fullred_*.yaml specs/bench/skinny_*.yaml -o "$W/fullred" >> "$OUT/gen.txt" 2>&1
stamp "gen"
timeout 150 python3 -m dgemm_cli build "$W/ein_small" "$W/ein_large" "$W/fullred" -j "$J" --json > "$OUT/build_ein.json" 2> "$OUT/build_ein_err.txt"; stamp "build einsum rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W/ein_small" --seeds 1,2 --samples 8 --repeat 3 --json > "$OUT/verify_ein_small.json" 2> "$OUT/verify_ein_small_err.txt"; stamp "verify einsum small rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W/ein_large" --seeds 1,2 --samples 8 --repeat 3 --json > "$OUT/verify_ein_large.json" 2> "$OUT/verify_ein_large_err.txt"; stamp "verify einsum large rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W/fullred" --seeds 1 --samples 8 --repeat 3 --json > "$OUT/verify_fullred.json" 2> "$OUT/verify_fullred_err.txt"; stamp "verify fullred rc=$?"
SPECS=$(ls specs/*.yaml | grep -v decode_dynamic)
timeout ${T_TUNE:-330} python3 -m dgemm_cli tune $SPECS --level 2 --db "$OUT/tuning.json" -j "$J" --budget 100 --reps 10 \
  -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
dg gen $SPECS -o "$W/tuned" --db "$OUT/tuning.json" --json > "$OUT/gen_tuned.json" 2> "$OUT/gen_tuned_err.txt"; stamp "gen tuned rc=$?"
python3 - "$OUT" "$W" <<'PY'
import json, sys, pathlib
out, w = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for n in ("verify_ein_small.json", "verify_ein_large.json", "verify_fullred.json"):
    try: v = json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); continue
    bad = [r for r in v if not r["passed"]]
    print(f"{n}: {len(v) - len(bad)}/{len(v)} passed; repeat bit changes: {sum(bool((r.get('report') or {}).get('repeat_differed')) for r in v)}")
    for r in bad: print(f"  FAIL {r['name']} rel {r.get('rel_err')} {r.get('error') or ''} {r.get('first_fail')}")
try:
    b = json.loads((out / "build_ein.json").read_text())
    print("build einsum:", sum(x["ok"] for x in b), "/", len(b), "spilling:", [x["name"] for x in b for k in x["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]])
except Exception as e: print("build_ein unreadable", e)
try: entries = json.loads((out / "tune.json").read_text())
except Exception as e: entries = []; print("tune.json unreadable", e)
for e in entries:
    w_ = e["winner"]; ms = [m for m in e["measured"] if m.get("us")]
    model = next((m for m in e["measured"] if m["model_rank"] == 0 and m.get("us")), None)
    base = (e.get("final") or {}).get("baseline_us")
    print(f"{e['name']:<22} {len(ms):>3}/{len(e['measured']):<3} win {w_['id']:<10} {w_['us']:9.3f} us ratio {w_.get('ratio')}  model {model and model['id']} {model and model['us']}")
for d in sorted((w / "tuned").glob("*/plan.json")):
    p = json.loads(d.read_text()); print("gen tuned:", d.parent.name, json.dumps(p.get("tuned") or p.get("plan", {}).get("tuned"))[:200])
PY
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev '^(tuning|tune|verify_ein_small|verify_ein_large|verify_fullred|build_ein)\.json$|^logs\.tgz$')
(cd "$OUT" && ls | grep -Ev '^(tuning|tune|verify_ein_small|verify_ein_large|verify_fullred|build_ein)\.json$|^logs\.tgz$' | xargs -r rm -f)
