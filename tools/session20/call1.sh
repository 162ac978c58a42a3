#!/usr/bin/env bash
# Session 20, device call 1 (nvidia-h200): hopper's L2 prefetch of its first STAGES k-iterations before the wait
# for the previous grid, against the kernel without it (_old) and with 2 * STAGES (_deep), benched in turn
# (3 rounds of the fixed sizes, 2 of the run-time artifacts at the row counts hopper takes), with issue 7's
# other kernels once. verify now runs every kernel right behind a kernel that writes all its buffers (the
# harness's dg_restore_after_idle_kernel); three negative controls without griddepcontrol.wait (gemv unsplit,
# hopper one tile row, hopper K split) must fail it. Verified: the new sources, seeds 1, 2, --repeat 2.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session20/variants.py "$W/new" "$W/var" --nowait decode_1x4096x4096,decode_16x4096x14336,decode_64x4096x4096 >> "$OUT/gen.txt" 2>&1
stamp "variants rc=$?"
# The self-test's dependent launch with and without its wait, beside the build (before any timing).
timeout 200 python3 -m pytest -q -m gpu tests/test_harness_chained.py > "$OUT/pytest_chained.txt" 2>&1 &
timeout 200 python3 -m dgemm_cli build "$W"/new "$W"/var -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait; stamp "pytest chained: $(tail -1 "$OUT/pytest_chained.txt")"
PRE=$(grep -l tma_prefetch_ "$W"/new/*/*.cu | xargs -n1 dirname | xargs -n1 basename)
FIXED=""; DYN=""
for n in $PRE; do
  case $n in
    decode_dyn*) DYN="$DYN $W/new/$n $W/var/${n}_old $W/var/${n}_deep" ;;
    *) FIXED="$FIXED $W/new/$n $W/var/${n}_old $W/var/${n}_deep" ;;
  esac
done
OTHERS=$(ls -d "$W"/new/* | grep -v -F "$(printf '%s\n' $PRE)")
M=16,17,32,64  # hopper's buckets (below 9 rows gemv and tcgemv, unchanged)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 70 python3 -m dgemm_cli bench $DYN --m $M --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn r$r rc=$?"
  fi
done
# shellcheck disable=SC2086
timeout 60 python3 -m dgemm_cli bench $OTHERS --json > "$OUT/bench_others.json" 2>> "$OUT/bench_err.txt"; stamp "bench others rc=$?"
timeout 40 python3 -m dgemm_cli verify "$W"/var/*_nowait --seeds 1 --json > "$OUT/verify_nowait.json" 2> "$OUT/verify_nowait_err.txt"
stamp "verify nowait rc=$? (must fail)"
timeout 120 python3 -m dgemm_cli verify "$W"/new --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
{
  python3 tools/session20/table.py "$OUT"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|verify_nowait\.json|bench_1\.json|bench_dyn_1\.json'
