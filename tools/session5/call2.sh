#!/usr/bin/env bash
# Session 5, device call 2 (nvidia-h200-x2), run from a checkout:
#   1. issue 9: verify the full-reduction / skinny bench specs (the GPU reference now splits long sums).
#   2. issue 8: the epilogue vector loads: gen + build + verify specs/epilogue, 30 random epilogue specs
#      and 16 TMA-friendly ones on hopper (seeds 1,2,3, --repeat 2); bench the three targets beside
#      their plain GEMMs (same run).
#   3. issue 5: `deepgemm tune --level 2` of the specs call 1's tune did not reach, into tuning.json
#      (merged with call 1's database, carried in tools/session5/tuning_call1.json), then gen with it.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; nproc; } > "$OUT/env.txt"
J=$(nproc)
dg gen specs/bench/fullred_*.yaml specs/bench/skinny_*.yaml -o "$W/fullred" > "$OUT/gen.txt" 2>&1
dg gen specs/epilogue/*.yaml -o "$W/ep" >> "$OUT/gen.txt" 2>&1
dg gen specs/bench/up_4096x14336x4096.yaml specs/bench/decode_1x4096x14336.yaml specs/bench/conv_nchw_8x256x56x56_k512.yaml -o "$W/plain" >> "$OUT/gen.txt" 2>&1
dg random-specs 30 -o "$W/rse" --seed 51 --small-m-share 0.25 --dynamic-share 0.2 --epilogue-share 1.0 > /dev/null
dg gen "$W"/rse/*.yaml -o "$W/randep" >> "$OUT/gen.txt" 2>&1
dg random-specs 16 -o "$W/rset" --seed 53 --tma-share 1.0 --epilogue-share 1.0 > /dev/null
dg gen "$W"/rset/*.yaml -o "$W/randeptma" --family hopper >> "$OUT/gen.txt" 2>&1
stamp "gen"
timeout 150 python3 -m dgemm_cli build "$W/fullred" "$W/ep" "$W/plain" "$W/randep" "$W/randeptma" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/fullred" --seeds 1,2 --samples 8 --repeat 3 --json > "$OUT/verify_fullred.json" 2> "$OUT/verify_fullred_err.txt"; stamp "verify fullred rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W/ep" --repeat 2 --json > "$OUT/verify_ep.json" 2> "$OUT/verify_ep_err.txt"; stamp "verify ep rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/randep" "$W/randeptma" --samples 64 --repeat 2 --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"; stamp "verify rand rc=$?"
timeout 80 python3 -m dgemm_cli bench "$W/ep" "$W/plain" --reps 20 --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
cp tools/session5/tuning_call1.json "$OUT/tuning.json"
timeout ${T_TUNE:-200} python3 -m dgemm_cli tune specs/moe_up.yaml specs/nhwc_padded_f32.yaml specs/odd_tails.yaml specs/square_bf16.yaml \
  --level 2 --db "$OUT/tuning.json" -j "$J" --budget 60 --reps 10 -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    try: return json.loads((out / n).read_text())
    except Exception as e: print(n, "unreadable", e); return []
b = load("build.json")
print("build:", sum(x["ok"] for x in b), "/", len(b), "spilling:", [x["name"] for x in b for k in x["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"]])
for n in ("verify_fullred.json", "verify_ep.json", "verify_rand.json"):
    v = load(n); bad = [r for r in v if not r["passed"]]
    print(f"{n}: {len(v) - len(bad)}/{len(v)} passed; repeat bit changes: {sum(bool((r.get('report') or {}).get('repeat_differed')) for r in v)}")
    for r in bad: print(f"  FAIL {r['name']} rel {r.get('rel_err')} {r.get('error') or ''} {str(r.get('first_fail'))[:200]}")
for r in load("bench.json"):
    print(f"bench {r['name']:<28} {r.get('us')} us  baseline {r.get('baseline_us')} ({r.get('baseline_epilogue') or r.get('baseline_formulation')}) ratio {r.get('ratio')}")
for e in load("tune.json"):
    w = e["winner"]; ms = [m for m in e["measured"] if m.get("us")]
    print(f"tune {e['name']:<22} {len(ms)}/{len(e['measured'])} win {w['id']} {w['us']:.3f} us ratio {w.get('ratio')}")
PY
KEEP='^(tuning|tune|build|bench|verify_fullred|verify_ep|verify_rand)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
