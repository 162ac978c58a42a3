#!/usr/bin/env bash
# Session 12, device call 3 (nvidia-h200): decode with [K, N] weights (B row-major), which tcgemv does not take:
# a level-1 tune (the model's 4 cheapest candidates of every family allowed, each verified, timed, the winner
# benched against cuBLAS) of tools/session12/specs/kn_*.yaml.
source tools/device_lib.sh
timeout 560 python3 -m dgemm_cli tune --level 1 --budget 45 -j "$J" --db "$OUT/kn_db.json" -o "$W/tune" \
  tools/session12/specs/kn_{1,8,16}x4096x14336.yaml tools/session12/specs/kn_8x4096x4096.yaml \
  tools/session12/specs/kn_64x4096x14336.yaml > "$OUT/tune.txt" 2> "$OUT/tune_err.txt"; stamp "tune rc=$?"
tail -60 "$OUT/tune.txt"
pack 'tune\.txt|kn_db\.json'
