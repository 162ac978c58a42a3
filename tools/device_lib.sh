# Sourced by the device-call scripts (tools/session*/call*.sh), run from a checkout on the device machine:
# $OUT (what comes back), $W (scratch), dg (deepgemm from the checkout), stamp (elapsed-time log lines), J (cores),
# env.txt (date, GPUs, commit); then `report` prints tools/gpu_summary.py's table and `pack KEEP` tars every
# file of $OUT whose name does not match the regex KEEP into logs.tgz (at most 8 files come back).
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
