#!/usr/bin/env bash
# Second device call: the view-less epilogue fix (the three random specs that failed, one spec a family),
# and the full reductions / einsum specs whose verify ran out of time in the first call.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit ${DG_COMMIT:-?}"; } > "$OUT/env.txt"
dg random-specs 30 -o "$W/rse" --seed 41 --small-m-share 0.25 --dynamic-share 0.2 --epilogue-share 1.0 > /dev/null
dg random-specs 12 -o "$W/rset" --seed 43 --tma-share 1.0 --epilogue-share 1.0 > /dev/null
dg gen "$W/rse/rand_41_014.yaml" "$W/rse/rand_41_020.yaml" -o "$W/fix" > "$OUT/gen.txt" 2>&1
dg gen "$W/rset/rand_43_005.yaml" -o "$W/fix" --family hopper >> "$OUT/gen.txt" 2>&1
for f in cta splitk gemv hopper; do dg gen tools/session4/nv/nv_$f.yaml -o "$W/fix" --family $f >> "$OUT/gen.txt" 2>&1; done
dg gen specs/bench/fullred_ab_ab_4096x4096_f32.yaml specs/bench/fullred_abc_bac_1M_bf16.yaml specs/bench/fullred_dot_16M_f16.yaml specs/bench/skinny_*.yaml specs/einsum/ein_ab_ab_*.yaml specs/einsum/ein_abc_bac_*.yaml specs/einsum/ein_abc_cba_large_f32.yaml -o "$W/red" >> "$OUT/gen.txt" 2>&1
stamp "gen"
timeout 110 python3 -m dgemm_cli build "$W/fix" "$W/red" -j 16 --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 35 python3 -m dgemm_cli verify "$W/fix" --seeds 1,2 --repeat 3 --json > "$OUT/verify_fix.json" 2> "$OUT/verify_fix_err.txt"; stamp "verify fix rc=$?"
timeout 55 python3 -m dgemm_cli verify "$W/red" --seeds 1 --repeat 3 --json > "$OUT/verify_red.json" 2> "$OUT/verify_red_err.txt"; stamp "verify red rc=$?"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for n in ("verify_fix.json", "verify_red.json"):
    try: v = json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); continue
    print(f"{n}: {sum(r['passed'] for r in v)}/{len(v)} passed")
    for r in v:
        rep = r.get("report") or {}
        print(f"  {'PASS' if r['passed'] else 'FAIL'} {r['name']:<32} rel {r.get('rel_err')} repeat_differed {rep.get('repeat_differed')} {r.get('error') or ''} {'' if r['passed'] else r.get('first_fail')}")
PY
