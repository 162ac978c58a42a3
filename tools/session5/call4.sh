#!/usr/bin/env bash
# Session 5, device call 4 (nvidia-h200-x2): decode_dynamic's remaining buckets at level 2 (call 3 measured
# m1 only before its time ran out), --resume on the database of calls 1-3 (tools/session5/tuning_call3.json),
# each bucket measured as soon as its candidates are built, 20 s of measuring a bucket.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit ${DG_COMMIT:-?}"; } > "$OUT/env.txt"
cp tools/session5/tuning_call3.json "$OUT/tuning.json"
timeout ${T_TUNE:-230} python3 -m dgemm_cli tune specs/decode_dynamic.yaml --level 2 --resume --db "$OUT/tuning.json" -j "$(nproc)" \
  --budget 20 --reps 10 -o "$W/tune" > "$OUT/tune.txt" 2> "$OUT/tune_err.txt"; echo "tune rc=$?"
grep -v "^\s*$" "$OUT/tune.txt" | tail -12
