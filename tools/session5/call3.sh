#!/usr/bin/env bash
# Session 5, device call 3 (nvidia-h200-x2), run from a checkout: the rest of issue 5's level-2 tune of
# specs/*.yaml — square_bf16 (4096^3: each candidate's verify walks 16M outputs) and decode_dynamic's 8
# buckets (25 s of measuring each) — into the database of calls 1 and 2 (tools/session5/tuning_call2.json);
# then gen of every spec in specs/ with it.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
cp tools/session5/tuning_call2.json "$OUT/tuning.json"
timeout 270 python3 -m dgemm_cli tune specs/square_bf16.yaml --level 2 --db "$OUT/tuning.json" -j "$J" --budget 150 --reps 10 \
  -o "$W/tune_sq" --json > "$OUT/tune_sq.json" 2> "$OUT/tune_sq_err.txt"; stamp "tune square rc=$?"
timeout 330 python3 -m dgemm_cli tune specs/decode_dynamic.yaml --level 2 --db "$OUT/tuning.json" -j "$J" --budget 25 --reps 10 \
  -o "$W/tune_dyn" --json > "$OUT/tune_dyn.json" 2> "$OUT/tune_dyn_err.txt"; stamp "tune decode_dynamic rc=$?"
python3 -m dgemm_cli gen specs/*.yaml -o "$W/tuned" --db "$OUT/tuning.json" > "$OUT/gen_tuned.txt" 2>&1; stamp "gen tuned rc=$?"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
db = json.loads((out / "tuning.json").read_text())
for e in sorted(db["entries"].values(), key=lambda e: (e["name"], e.get("bucket") or "")):
    w = e["winner"]; ms = [m for m in e["measured"] if m.get("us")]
    print(f"{e['name']:<20} {str(e.get('rows') or e.get('bucket') or ''):<10} L{e['level']} {len(ms):>3}/{len(e['measured']):<3} win {w['id']:<10} {w['us']:9.3f} us ratio {w.get('ratio')}")
PY
KEEP='^(tuning|tune_sq|tune_dyn)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
