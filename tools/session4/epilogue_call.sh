#!/usr/bin/env bash
# The session's one device call: epilogue specs and their plain twins, random epilogue specs (mixed and
# TMA-friendly on hopper), the full-reduction specs, the synccheck experiment; verify, bench, a table last.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit ${DG_COMMIT:-?}"; } > "$OUT/env.txt"
dg gen specs/epilogue/*.yaml -o "$W/ep" > "$OUT/gen.txt" 2>&1 || echo "gen ep failed"
dg gen specs/bench/up_4096x14336x4096.yaml specs/bench/decode_1x4096x14336.yaml specs/bench/conv_nchw_8x256x56x56_k512.yaml -o "$W/plain" >> "$OUT/gen.txt" 2>&1 || echo "gen plain failed"
dg random-specs "${RAND_EP:-30}" -o "$W/rse" --seed 41 --small-m-share 0.25 --dynamic-share 0.2 --epilogue-share 1.0 > /dev/null
dg gen "$W"/rse/*.yaml -o "$W/randep" >> "$OUT/gen.txt" 2>&1 || echo "gen randep failed"
dg random-specs "${RAND_EP_TMA:-12}" -o "$W/rset" --seed 43 --tma-share 1.0 --epilogue-share 1.0 > /dev/null
dg gen "$W"/rset/*.yaml -o "$W/randeptma" --family hopper >> "$OUT/gen.txt" 2>&1 || echo "gen randeptma failed"
dg gen specs/bench/fullred_*.yaml specs/bench/skinny_*.yaml -o "$W/fullred" >> "$OUT/gen.txt" 2>&1 || echo "gen fullred failed"
# The einsum specs whose plans the dot shape changed (M = N = 1)
dg gen specs/einsum/ein_ab_ab_*.yaml specs/einsum/ein_ab_ba_*.yaml specs/einsum/ein_abc_abc_*.yaml specs/einsum/ein_abc_bac_*.yaml specs/einsum/ein_abc_cba_*.yaml -o "$W/ein" >> "$OUT/gen.txt" 2>&1 || echo "gen ein failed"
# synccheck experiment: f32_dyn_rows with and without programmatic dependent launch
dg gen specs/f32/f32_dyn_rows.yaml -o "$W/pdl" > /dev/null 2>&1; cp -r "$W/pdl" "$W/nopdl"
f="$W/nopdl/f32_dyn_rows/f32_dyn_rows.cu"
sed -i 's/asm volatile("griddepcontrol.wait;\\n" ::: "memory");//; s/asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");//; s/programmaticStreamSerializationAllowed = 1;/programmaticStreamSerializationAllowed = 0;/' "$f"
echo "griddepcontrol left in nopdl: $(grep -c griddepcontrol "$f")" > "$OUT/sync.txt"
stamp "gen done"
DIRS="$W/ep $W/plain $W/randep $W/randeptma $W/fullred $W/ein $W/pdl $W/nopdl"
# shellcheck disable=SC2086
timeout "${T_BUILD:-200}" python3 -m dgemm_cli build $DIRS -j 16 --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
# shellcheck disable=SC2086
# The 64M-element dot product is left out: the reference sums it on one GPU thread (seconds).
timeout "${T_VERIFY:-70}" python3 -m dgemm_cli verify "$W/ep" "$W/randep" "$W/randeptma" --seeds 1,2 --repeat 3 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout "${T_VERIFY2:-60}" python3 -m dgemm_cli verify $(ls -d "$W"/fullred/*/ | grep -v 64M) "$W/ein" --seeds 1,2 --repeat 3 --json > "$OUT/verify_red.json" 2> "$OUT/verify_red_err.txt"; stamp "verify reductions rc=$?"
# shellcheck disable=SC2086
timeout "${T_BENCH:-80}" python3 -m dgemm_cli bench "$W/ep" "$W/plain" "$W/fullred" --reps 20 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
for v in pdl nopdl; do
  h="$W/$v/f32_dyn_rows/build/sm_90a/f32_dyn_rows_harness"
  timeout 25 compute-sanitizer --tool synccheck --error-exitcode 9 "$h" verify --seeds 1 --samples 16 --m 17 > "$OUT/sync_$v.txt" 2>&1
  echo "synccheck $v rc=$? barrier_errors=$(grep -c 'Barrier error' "$OUT/sync_$v.txt")" >> "$OUT/sync.txt"
done
stamp "synccheck done"
ep_dir=$(ls -d "$W"/ep/residual_scale_clamp_d 2>/dev/null)
[ -n "$ep_dir" ] && timeout 25 compute-sanitizer --tool memcheck --error-exitcode 9 "$ep_dir/build/sm_90a/residual_scale_clamp_d_harness" verify --seeds 1 --samples 16 > "$OUT/memcheck_ep.txt" 2>&1; echo "memcheck residual_scale_clamp_d rc=$?" >> "$OUT/sync.txt"
cd "$OUT" && tar czf logs.tgz ./*.txt 2>/dev/null; cd - > /dev/null
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    try: return json.loads((out / n).read_text())
    except Exception as e: return []
v = load("verify.json") + load("verify_red.json"); b = load("bench.json")
print(f"verify: {sum(r['passed'] for r in v)}/{len(v)} passed")
for r in v:
    if not r["passed"]: print("  FAIL", r["name"], r.get("error") or r.get("first_fail"), (r.get("report") or {}).get("nan_lost"))
for r in b:
    print(f"{r['name']:<30} {r.get('us')!s:>10} base {str(r.get('baseline'))[:26]:<26} {r.get('baseline_us')!s:>10} ratio {r.get('ratio')} ep={r.get('baseline_epilogue')} err={r.get('error')}")
print((out / "sync.txt").read_text())
PY
