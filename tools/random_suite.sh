#!/usr/bin/env bash
# The randomized verify suite, run on a GPU machine from a checkout (no install needed):
#   tools/random_suite.sh [COUNT] [SEED]       (defaults 40 and 28; SEEDS=1,2 verify seeds, REPEAT=2 launches;
#                                               SLICE=i/n: the specs whose index is i modulo n, for a split run)
# `deepgemm random-specs COUNT --seed SEED` with a share of every kind (decode-shaped, sized at run time, wide, A multicast, dot,
# batched, short K, staged activation, epilogues, TMA views, flat rows), gen (the model's picks) + build + verify
# behind the harness's writer, bit for bit against a second launch (--repeat). SANITIZE=N also runs memcheck,
# racecheck and synccheck on the N smallest directories of each family. $OUT (or ./gpu_out) gets verify.json,
# failures.txt, plans.txt (each spec's families) and summary.txt; the rest is packed into logs.tgz.
source "$(dirname "$0")/device_lib.sh"
COUNT=${1:-40}
SEED=${2:-28}
dg random-specs "$COUNT" --seed "$SEED" --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 \
  --wide-batch-share 0.3 --wide-short-k-share 0.3 --wide-staged-share 0.2 --dynamic-share 0.25 --epilogue-share 0.3 \
  --a-vectors-share 0.5 --row-blocks-share 0.2 --multicast-share 0.08 --dot-share 0.5 -o "$W/rs" > "$OUT/gen.txt" 2>&1
if [ -n "${SLICE:-}" ]; then  # SLICE=i/n: only the specs whose index is i modulo n (a suite split over calls)
  ls "$W"/rs/*.yaml | awk -v i="${SLICE%/*}" -v n="${SLICE#*/}" '(NR - 1) % n != i' | xargs -r rm -f
fi
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$? ($(ls "$W/r" | wc -l) dirs)"
timeout "${T_BUILD:-3600}" python3 -m dgemm_cli build "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
timeout "${T_VERIFY:-3600}" python3 -m dgemm_cli verify "$W"/r/* --seeds "${SEEDS:-1,2}" --repeat "${REPEAT:-2}" --json \
  > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
# Each directory's kernel variants (a run-time spec: one a bucket), read from plan.json.
python3 - "$W"/r/*/plan.json > "$OUT/plans.txt" <<'PY'
import collections, json, pathlib, sys
count = collections.Counter()


def variant(plan):
    """The family, and for hopper and tcgemv the kernel variant the plan takes."""
    prim = plan["primary"]
    if plan["family"] == "hopper":
        return "hopper/" + ("split" if prim.get("k_splits", 1) > 1 else "multicast" if prim.get("a_multicast", 1) > 1
                            else "persistent")
    if plan["family"] == "tcgemv":
        return "tcgemv/" + prim.get("a_stage", "l1")
    return plan["family"]


for path in sys.argv[1:]:
    plan = json.loads(pathlib.Path(path).read_text())["plan"]
    fams = [variant(b) for b in plan["buckets"]] if "buckets" in plan else [variant(plan)]
    count.update(fams)
    print(pathlib.Path(path).parent.name, " ".join(fams))
print("kernels:", ", ".join(f"{n} {f}" for f, n in count.most_common()))
PY
python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(bool(r.get('passed')) for r in v), 'of', len(v), 'verified')" \
  "$OUT/verify.json" > "$OUT/summary.txt"
tail -1 "$OUT/plans.txt" >> "$OUT/summary.txt"
if [ "${SANITIZE:-0}" -gt 0 ]; then
  # shellcheck disable=SC2046  # the smallest directories of each family, by blocks (or tiles) planned
  sanitize $(python3 - "$SANITIZE" "$W"/r/*/plan.json <<'PY'
import collections, json, pathlib, sys
rows = collections.defaultdict(list)
for path in sys.argv[2:]:
    plan = json.loads(pathlib.Path(path).read_text())["plan"]
    plan = plan["buckets"][-1] if "buckets" in plan else plan
    prim = plan["primary"]
    rows[plan["family"]].append((prim.get("blocks") or prim.get("tiles") or 0, str(pathlib.Path(path).parent)))
print(" ".join(d for fam in rows for _, d in sorted(rows[fam])[: int(sys.argv[1])]))
PY
)
  stamp "sanitize done"
  cat "$OUT/sanitize.txt" >> "$OUT/summary.txt"
fi
report
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt|plans\.txt'
rm -rf "$W"
