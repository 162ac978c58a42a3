#!/usr/bin/env bash
# Session 6, device call 1 (nvidia-h200-x2), run from a checkout:
#   1. issue 8: gen + build + verify specs/epilogue (the model's picks) and its two vector_loads specs on the
#      hopper family (seeds 1,2,3, --repeat 2); memcheck those two; count the vector loads in their sources.
#   2. issue 5: decode_dynamic's last buckets at level 2 (tune --resume on the fifth session's database).
#   3. issue 7: ncu of the decode kernels at M = 1 (gemv) and M = 8 (hopper), what bounds their bandwidth.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
dg gen specs/epilogue/*.yaml -o "$W/ep" > "$OUT/gen.txt" 2>&1
dg gen specs/epilogue/vector_loads_*.yaml -o "$W/eph" --family hopper >> "$OUT/gen.txt" 2>&1
for d in "$W"/eph/*/; do n=$(basename "$d"); mv "$d" "$W/eph/${n}_hopper"; done
dg gen specs/bench/decode_1x4096x14336.yaml specs/bench/decode_8x4096x14336.yaml -o "$W/dec" >> "$OUT/gen.txt" 2>&1
stamp "gen"
grep -h -E "vector load|_v\[" "$W"/eph/*/*.cu | sort | uniq -c > "$OUT/vector_lines.txt"
timeout 200 python3 -m dgemm_cli build "$W/ep" "$W/eph" "$W/dec" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/ep" "$W/eph" --seeds 1,2,3 --repeat 2 --json > "$OUT/verify_ep.json" 2> "$OUT/verify_ep_err.txt"; stamp "verify ep rc=$?"
for d in "$W"/eph/*/; do
  n=$(basename "$d"); h=$(ls "$d"build/sm_90a/*_harness)
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_memcheck_$n.txt" 2>&1
  echo "memcheck $n rc=$?" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
for n in decode_1x4096x14336 decode_8x4096x14336; do
  h=$(ls "$W/dec/$n/build/sm_90a/"*_harness)
  timeout 60 ncu -k "regex:${n}" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats "$h" verify --seeds 1 --samples 8 > "$OUT/ncu_$n.txt" 2>&1
  echo "ncu $n rc=$?" >> "$OUT/log.txt"
done
stamp "ncu"
cp docs/results/2026-11-30-h200-tuning-specs-level2-1c97a3b.json "$OUT/tuning.json"
timeout ${T_TUNE:-260} python3 -m dgemm_cli tune specs/decode_dynamic.yaml --level 2 --resume --db "$OUT/tuning.json" -j "$J" \
  --budget 60 --reps 10 -o "$W/tune" > "$OUT/tune.txt" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    try: return json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); return []
b = load("build.json")
print("build:", sum(x["ok"] for x in b), "/", len(b), "spilling:", [x["name"] for x in b for k in x["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]])
v = load("verify_ep.json"); bad = [r for r in v if not r["passed"]]
print(f"verify: {len(v) - len(bad)}/{len(v)} passed; repeat bit changes: {sum(bool((r.get('report') or {}).get('repeat_differed')) for r in v)}")
for r in v: print(f"  {r['name']:<36} {'ok' if r['passed'] else 'FAIL'} rel {r.get('rel_err')} {r.get('error') or ''}")
print((out / "sanitize.txt").read_text())
print((out / "vector_lines.txt").read_text()[:1500])
PY
tail -12 "$OUT/tune.txt"
KEEP='^(tuning|build|verify_ep)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
