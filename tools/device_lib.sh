# Sourced by tools/random_suite.sh and tools/decode_bench.sh, run from a checkout on a GPU machine:
# $OUT (what comes back), $W (scratch), dg (deepgemm from the checkout), stamp (elapsed-time log lines), J (cores),
# env.txt (date, GPUs, commit); then `report` prints tools/gpu_summary.py's table and `pack KEEP` tars every
# file of $OUT whose name does not match the regex KEEP into logs.tgz.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
J=$(nproc)
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; echo "$J cores"; } > "$OUT/env.txt"
report() { python3 tools/gpu_summary.py "$OUT"; }
pack() {
  local keep="^($1)\$|^logs\\.tgz\$"
  # shellcheck disable=SC2046
  tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$keep")
  (cd "$OUT" && ls | grep -Ev "$keep" | xargs -r rm -f)
}
# One line a kernel that failed in each verify JSON given: FAIL, file, name, the error's start.
failures() {
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        if not r.get("passed"):
            print("FAIL", path.rsplit("/", 1)[-1], r["name"], (r.get("error") or "")[:200])
PY
}
# compute-sanitizer memcheck, racecheck and synccheck on each generated directory given (its harness's verify,
# seed 1): logs san_<tool>_<name>.txt and one line a run in sanitize.txt.
sanitize() {
  local d h n tool
  for d in "$@"; do
    h=$(ls "$d"/build/sm_90a/*_harness); n=$(basename "$d")
    for tool in memcheck racecheck synccheck; do
      timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_${tool}_$n.txt" 2>&1
      echo "$tool $n rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_${tool}_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
    done
  done
}
# Issue 7's decode benchmarks: the fixed sizes and the artifacts sized at run time (m = 1..64).
ISSUE7_DECODE="specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x14336.yaml
  specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml
  specs/bench/up_128x14336x4096.yaml specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml
  specs/bench/decode_16x4096x4096.yaml specs/bench/decode_64x4096x4096.yaml"
ISSUE7_DYNAMIC="specs/bench/decode_dyn_1-64x4096x128.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml
  specs/bench/decode_dyn_1-64x4096x14336.yaml"
