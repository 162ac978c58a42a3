#!/usr/bin/env bash
# Session 16, device call 2 (nvidia-h200): the family sweep that the cost model's cross-family constants are fitted
# to (tools/family_fit.py). Each spec of tools/session16/sweep/ whose N is among the arguments (default: 2048 4096;
# a second call takes 8192 14336) is generated once a family that can run it (`gen --family`, the family's
# model-best plan): gemv at M <= 4, tcgemv at M >= 2, hopper everywhere, splitk at N <= 4096 (the sixteenth
# session's model moved [4..8, K]x[K, 2048] at K = 2048, 4096 to it). Built (one kernel a directory: the specs promise
# 16-byte pointers), benched beside cuBLAS, verified (seed 1); the bench JSONs are in logs.tgz.
#   bash tools/session16/call2.sh 2048 4096
source tools/device_lib.sh
NS=${*:-2048 4096}
S=tools/session16/sweep
pick() {  # family -> the sweep's specs it runs, for the N values asked
  local f=$1 n m spec
  for n in $NS; do
    for spec in "$S"/sw_m*_n"${n}"_k*.yaml; do
      m=$(basename "$spec" | sed 's/sw_m\([0-9]*\)_.*/\1/')
      case $f in gemv) [ "$m" -le 4 ] ;; tcgemv) [ "$m" -ge 2 ] ;; splitk) [ "$n" -le 4096 ] ;; *) true ;; esac &&
        echo "$spec"
    done
  done
}
DIRS=()
for f in gemv tcgemv hopper splitk; do
  specs=$(pick $f)
  [ -n "$specs" ] || continue
  # shellcheck disable=SC2086
  dg gen --untuned --family $f $specs -o "$W/$f" >> "$OUT/gen.txt" 2>&1; stamp "gen $f rc=$?"
  DIRS+=("$W/$f")
done
timeout 300 python3 -m dgemm_cli build "${DIRS[@]}" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for d in "${DIRS[@]}"; do
  f=$(basename "$d")
  timeout 200 python3 -m dgemm_cli bench "$d"/* --json > "$OUT/bench_$f.json" 2>> "$OUT/bench_err.txt"; stamp "bench $f rc=$?"
done
# The plans (family, assignment) beside the times, for the fit.
(cd "$W" && tar -czf "$OUT/plans.tgz" */*/plan.json)
timeout 120 python3 -m dgemm_cli verify "${DIRS[@]}" --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
python3 tools/family_fit.py "$W" "$OUT"/bench_*.json | tee "$OUT/fit.txt"
pack 'fit\.txt|plans\.tgz|failures\.txt|verify\.json'
