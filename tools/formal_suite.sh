#!/usr/bin/env bash
# Issue 44's formal suite (no GPU, Coq): `verify --formal` over specs/ (every subfolder but cpu/) as gen plans them,
# the same specs planned as the cta family on sm_80 (but e4m3 ones), and COUNT random specs both ways; the JSON
# reports and a summary per family and status (tools/formal_summary.py) under $OUT (default ./formal_out).
#   bash tools/formal_suite.sh [COUNT] [SEED]     (200, 5); JOBS=N proves N kernels at once (default: the CPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
COUNT=${1:-200}
SEED=${2:-5}
OUT=$(mkdir -p "${OUT:-./formal_out}" && cd "${OUT:-./formal_out}" && pwd)
JOBS=${JOBS:-$(nproc)}
dg() { (cd "$OUT" && PYTHONPATH="$ROOT" python3 -m dgemm_cli "$@"); }

mapfile -t SPECS < <(ls "$ROOT"/specs/*.yaml "$ROOT"/specs/*/*.yaml | grep -v '/specs/cpu/')
mapfile -t SPECS_CTA < <(grep -L 'e4m3' "${SPECS[@]}")
rm -rf "$OUT/random" && dg random-specs "$COUNT" -o random --seed "$SEED" >/dev/null
mapfile -t RANDOM < <(ls "$OUT"/random/*.yaml)
mapfile -t RANDOM_CTA < <(grep -L 'e4m3' "${RANDOM[@]}")

start=$(date +%s)
dg verify --formal --jobs "$JOBS" --json "${SPECS[@]}" > "$OUT/specs.json" 2> "$OUT/specs.log"
dg verify --formal --jobs "$JOBS" --json --family cta --arch sm_80 "${SPECS_CTA[@]}" > "$OUT/specs_cta.json" \
  2> "$OUT/specs_cta.log"
dg verify --formal --jobs "$JOBS" --json "${RANDOM[@]}" > "$OUT/random.json" 2> "$OUT/random.log"
dg verify --formal --jobs "$JOBS" --json --family cta --arch sm_80 "${RANDOM_CTA[@]}" > "$OUT/random_cta.json" \
  2> "$OUT/random_cta.log"
echo "wall: $(( $(date +%s) - start )) s on $(nproc) CPUs, $JOBS jobs"
python3 "$ROOT/tools/formal_summary.py" "$OUT"/specs.json "$OUT"/specs_cta.json "$OUT"/random.json "$OUT"/random_cta.json
