#!/usr/bin/env bash
# Issue 45's performance suite, run on a GPU machine from a checkout (no install needed):
#   tools/perf_suite.sh [COUNT] [SEED]      (defaults 200 and 1; SLICE=i/n: the problems whose index is i modulo n)
# `deepgemm random-specs COUNT --perf --seed SEED` (realistic problems: LLM projections and their backward, skinny
# outputs, MoE experts, attention over heads in place, 1x1 convolutions, f32 layouts, squares), gen with the model's
# untuned picks, build, verify (seed 1: a pick that fails is left out of the distribution), bench against every
# no-copy cuBLAS formulation (`--reps ${REPS:-10}`, CHUNK folders a bench call), then tools/perf_summary.py: the
# ratio's distribution, by class, and the worst problems with their plans. $OUT gets bench.json, verify.json,
# summary.json and summary.txt.
source "$(dirname "$0")/device_lib.sh"
COUNT=${1:-200}
SEED=${2:-1}
dg random-specs "$COUNT" --perf --seed "$SEED" -o "$W/ps" > "$OUT/gen.txt" 2>&1
if [ -n "${SLICE:-}" ]; then
  ls "$W"/ps/*.yaml | awk -v i="${SLICE%/*}" -v n="${SLICE#*/}" '(NR - 1) % n != i' | xargs -r rm -f
fi
dg gen --untuned "$W"/ps/*.yaml -o "$W/p" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$? ($(ls "$W/p" | wc -l) dirs)"
timeout "${T_BUILD:-3600}" python3 -m dgemm_cli build "$W"/p/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
# Verified VCHUNK folders a process, VJOBS processes at once on the one GPU (a verify is mostly host work: random
# data and the float64 reference, about 3 s a problem), each chunk's JSON kept, so that a T_VERIFY cut keeps the
# chunks it finished.
export W
ls -d "$W"/p/* | xargs -n "${VCHUNK:-5}" echo | nl -ba > "$W/vchunks.txt"
# shellcheck disable=SC2016
timeout "${T_VERIFY:-3600}" xargs -P "${VJOBS:-4}" -L 1 bash -c \
  'i=$0; python3 -m dgemm_cli verify "$@" --seeds 1 --samples 64 --json > "$W/verify_$i.json" 2>> "$W/verify_err_$i.txt"' \
  < "$W/vchunks.txt"
stamp "verify rc=$?"
cat "$W"/verify_err_*.txt > "$OUT/verify_err.txt" 2> /dev/null
merge_json() {
  python3 - "$@" <<'PY'
import json, sys
rows = []
for path in sys.argv[1:]:
    try:
        rows += json.load(open(path))
    except (json.JSONDecodeError, FileNotFoundError):
        print(f"{path}: cut off, left out", file=sys.stderr)
print(json.dumps(rows, indent=1))
print(f"{len(rows)} kernels from {len(sys.argv) - 1} files", file=sys.stderr)
PY
}
merge_json "$W"/verify_*.json > "$OUT/verify.json"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
# Benched CHUNK folders at a time, each chunk's JSON kept, so that a run stopped by T_BENCH still summarizes the
# chunks it finished.
BENCH_END=$(( $(date +%s) + ${T_BENCH:-3600} ))
ls -d "$W"/p/* | xargs -n "${CHUNK:-20}" echo > "$W/chunks.txt"
c=0
while read -r dirs; do
  left=$(( BENCH_END - $(date +%s) )); [ "$left" -gt 5 ] || { stamp "bench: T_BENCH reached"; break; }
  # shellcheck disable=SC2086
  timeout "$left" python3 -m dgemm_cli bench $dirs --reps "${REPS:-10}" --json > "$W/bench_$c.json" \
    2>> "$OUT/bench_err.txt" || stamp "bench chunk $c rc=$?"
  c=$((c + 1))
done < "$W/chunks.txt"
merge_json "$W"/bench_*.json > "$OUT/bench.json"
python3 tools/perf_summary.py "$OUT/bench.json" "$W/p" --verify "$OUT/verify.json" --json "$OUT/summary.json" \
  | tee "$OUT/summary.txt"
pack "bench\\.json|verify\\.json|summary\\.json|summary\\.txt|env\\.txt"
