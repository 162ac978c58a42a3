#!/usr/bin/env bash
# The einsum GPU suite, run on the device machine from a checkout (no install needed):
#   tools/einsum_suite.sh [RANDOM_COUNT] [SEED]          (defaults 150 and 11; BENCH=1 also benches specs/einsum;
#                                                         SPECS='specs/einsum/ein_ab_*' runs a subset)
# gen + build (-j $(nproc)) + verify every spec in specs/einsum/ (opt_einsum's two-operand equations at
# small odd sizes and at sizes in the thousands, f16 and f32; tools/einsum_specs.py writes them) and
# RANDOM_COUNT random specs (`deepgemm random-specs`: 44% of their contractions are full reductions,
# one-sided summed letters, scalar inputs or implicit outputs). JSON and logs go to $OUT (or
# ./einsum_out); a table of specs/einsum and the totals are printed last.
set -u -o pipefail
COUNT=${1:-150}
SEED=${2:-11}
OUT=${OUT:-$PWD/einsum_out}
mkdir -p "$OUT"
W=$(mktemp -d)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
JOBS=$(nproc)
dg() { "$PY" -m dgemm_cli "$@"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-unknown}"; } > "$OUT/env.txt"
# shellcheck disable=SC2086  # SPECS is a glob
dg gen ${SPECS:-specs/einsum/*.yaml} -o "$W/einsum" > "$OUT/gen_einsum.txt" 2>&1 || echo "gen specs/einsum failed (see gen_einsum.txt)"
DIRS=("$W/einsum")
if [ "$COUNT" -gt 0 ]; then
  dg random-specs "$COUNT" -o "$W/rs" --seed "$SEED" > /dev/null
  dg gen "$W"/rs/*.yaml -o "$W/rand" > "$OUT/gen_rand.txt" 2>&1 || echo "gen random failed (see gen_rand.txt)"
  DIRS+=("$W/rand")
fi
T0=$(date +%s)
dg build "${DIRS[@]}" -j "$JOBS" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
echo "build rc=$? in $(( $(date +%s) - T0 )) s"
T0=$(date +%s)
dg verify "$W/einsum" --json > "$OUT/verify_einsum.json" 2> "$OUT/verify_einsum_err.txt"
echo "verify specs/einsum rc=$? in $(( $(date +%s) - T0 )) s"
if [ "$COUNT" -gt 0 ]; then
  T0=$(date +%s)
  dg verify "$W/rand" --json > "$OUT/verify_rand.json" 2> "$OUT/verify_rand_err.txt"
  echo "verify random rc=$? in $(( $(date +%s) - T0 )) s"
fi
if [ "${BENCH:-0}" = 1 ]; then
  dg bench "$W/einsum" --json > "$OUT/bench_einsum.json" 2> "$OUT/bench_einsum_err.txt"; echo "bench rc=$?"
fi

"$PY" - "$OUT" "$W" <<'PYEOF'
import json, pathlib, sys
out, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
lines = []
def load(name):
    if not (out / name).exists():
        return []
    try:
        return json.loads((out / name).read_text())
    except (OSError, json.JSONDecodeError) as e:
        lines.append(f"{name}: unreadable ({e})")
        return []
f = lambda x: f"{x:.3g}" if isinstance(x, (int, float)) else str(x)
builds = {b["name"]: b for b in load("build.json")}
bench = {r["name"]: r for r in load("bench_einsum.json")}
rows = load("verify_einsum.json")
table = [f"{'spec':<32} {'contraction':<16} {'M':>7} {'N':>7} {'K':>8} {'tile, instr, blocks':<22} {'regs':>4} "
         f"{'rel_err':>8} result" + ("      µs  cuBLAS µs" if bench else "")]
for r in rows:
    plan = json.loads((pathlib.Path(r["directory"]) / "plan.json").read_text())
    roles, p = plan["views"]["roles"], plan["plan"]["primary"]
    regs = max((k["registers"] for k in builds.get(r["name"], {}).get("kernels", [])), default=0)
    kind = p.get("instruction", p["family"])[:3]
    shape = f"{p['block_m']}x{p['block_n']}x{p['block_k']} {kind} {p['tiles']}"
    line = (f"{r['name']:<32} {plan['spec']['contraction']:<16} {roles['m']['size']:>7} {roles['n']['size']:>7} "
            f"{roles['k']['size']:>8} {shape:<22} {regs:>4} {f(r.get('rel_err')):>8} "
            + ("PASS" if r["passed"] else "FAIL " + str(r.get("error") or r.get("first_fail"))[:60]))
    if bench:
        b = bench.get(r["name"], {})
        line += f" {f(b.get('us')):>8} {f(b.get('baseline_us')):>9}"
    table.append(line)
spills = sorted(n for n, b in builds.items() for k in b["kernels"] if k["spill_store_bytes"] or k["spill_load_bytes"])
lines.append(f"build: {sum(b['ok'] for b in builds.values())}/{len(builds)} ok; spilling: {', '.join(spills) or 'none'}")
for b in [b for b in builds.values() if not b["ok"]][:5]:
    lines.append(f"  BUILD FAIL {b['name']} {b['error'][-400:]}")
rand = load("verify_rand.json")
if rand:
    fails = [r for r in rand if not r["passed"]]
    lines.append(f"verify random: {len(rand) - len(fails)}/{len(rand)} passed")
    for r in fails[:10]:
        lines.append(f"  FAIL {r['name']} {r.get('error')} rel {r.get('rel_err')} first {json.dumps(r.get('first_fail'))[:160]}")
lines.append(f"verify specs/einsum: {sum(r['passed'] for r in rows)}/{len(rows)} passed")
text = "\n".join(table + lines)  # the totals last: the device tool keeps the tail of the output
(out / "summary.txt").write_text(text + "\n")
print(text)
PYEOF
# The device tool brings back a few files: keep the JSON summaries, pack the logs.
KEEP='^(build|verify_einsum|verify_rand|bench_einsum)\.json$|^summary\.txt$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$KEEP")
(cd "$OUT" && ls | grep -Ev "$KEEP" | xargs -r rm -f)
rm -rf "$W"
