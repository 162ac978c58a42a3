#!/usr/bin/env bash
# The GPU verification sweep, run on the device machine from a checkout (no install needed):
#   tools/gpu_suite.sh [RANDOM_COUNT] [SEED]
# gen + build + verify every spec in specs/ and RANDOM_COUNT random specs, bench specs/, run the
# gpu-marked tests. Logs and JSON go to $OUT (or ./gpu_out); a short table is printed last.
set -u -o pipefail
COUNT=${1:-250}
SEED=${2:-7}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
W=$(mktemp -d)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
JOBS=$(nproc)
dg() { "$PY" -m dgemm_cli "$@"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit ${DG_COMMIT:-unknown}"; } > "$OUT/env.txt"
dg doctor > "$OUT/doctor.txt" 2>&1
dg gen specs/*.yaml -o "$W/specs" > "$OUT/gen_specs.txt" 2>&1 || echo "gen specs failed"
if [ "$COUNT" -gt 0 ]; then
  dg random-specs "$COUNT" -o "$W/rs" --seed "$SEED" > /dev/null
  dg gen "$W"/rs/*.yaml -o "$W/rand" --json > /dev/null 2> "$OUT/gen_rand_err.txt" || echo "gen random failed"
fi
T0=$(date +%s)
dg build "$W/specs" $( [ "$COUNT" -gt 0 ] && echo "$W/rand" ) -j "$JOBS" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
echo "build rc=$? in $(( $(date +%s) - T0 )) s"
dg verify "$W/specs" --json > "$OUT/verify_specs.json" 2> "$OUT/verify_specs_err.txt"; echo "verify specs rc=$?"
if [ "$COUNT" -gt 0 ]; then
  T0=$(date +%s)
  dg verify "$W/rand" --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"; echo "verify random rc=$? in $(( $(date +%s) - T0 )) s"
fi
dg bench "$W/specs" --json > "$OUT/bench_specs.json" 2> "$OUT/bench_err.txt"; echo "bench rc=$?"
"$PY" -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest gpu rc=$?"; tail -3 "$OUT/pytest_gpu.txt"

"$PY" - "$OUT" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    p = out / name
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"{name}: unreadable ({e})"); return []
builds = load("build.json")
bad = [b for b in builds if not b["ok"]]
spills = [(b["name"], k["kernel"][:60]) for b in builds for k in b["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]]
print(f"build: {len(builds) - len(bad)}/{len(builds)} ok, {len(spills)} spilling kernels")
for b in bad[:5]: print("  BUILD FAIL", b["name"], b["error"][-600:])
for name in ("verify_specs.json", "verify_rand.json"):
    rows = load(name)
    if not rows: continue
    fails = [r for r in rows if not r["passed"]]
    print(f"{name}: {len(rows) - len(fails)}/{len(rows)} passed")
    for r in fails[:12]:
        rep = r.get("report", {})
        print("  FAIL", r["name"], r.get("error"), "rel", r.get("rel_err"), "first", json.dumps(r.get("first_fail"))[:200],
              "api", rep.get("api_null_rejected"), rep.get("api_misaligned_rejected"),
              [ (x.get("bad_elements"), x.get("nan_elements"), x.get("holes_written"), x.get("ref_mismatch")) for x in rep.get("runs", [])][:2])
print(f"{'kernel':<20} {'us':>9} {'TFLOP/s':>8} {'GB/s':>8} {'baseline':<12} {'base us':>9} {'ratio':>6}")
for r in load("bench_specs.json"):
    f = lambda x: f"{x:.4g}" if isinstance(x, (int, float)) else str(x)
    print(f"{r['name']:<20} {f(r['us']):>9} {f(r['tflops']):>8} {f(r['gbps']):>8} {str(r['baseline'])[:12]:<12} {f(r['baseline_us']):>9} {f(r['ratio']):>6}")
PYEOF
# The device tool brings back at most 8 files: keep the summary JSONs, pack the rest.
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -v -e '^build.json$' -e '^verify_rand.json$' -e '^verify_specs.json$' -e '^bench_specs.json$' -e '^logs.tgz$')
(cd "$OUT" && ls | grep -v -e '^build.json$' -e '^verify_rand.json$' -e '^verify_specs.json$' -e '^bench_specs.json$' -e '^logs.tgz$' | xargs rm -f)
