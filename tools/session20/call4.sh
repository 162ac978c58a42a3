#!/usr/bin/env bash
# Session 20, device call 4 (nvidia-h200): (1) why call 3's negative controls passed verify: the gemv and hopper
# controls instrumented (tools/session20/chain_debug.py: when the kernel's block 0 starts against the writer's
# start and restore), with the writer queued as now and after a stream synchronize; (2) issue 7's table at this
# commit (hopper's B prefetch before the wait; the K-split kernel's wait after its barriers), each kernel that
# changed beside itself as before the session (_old: no prefetch; _orig for the K-split kernels), alternately,
# 3 rounds of the fixed sizes and 2 of the run-time artifacts at 10 row counts; copy bandwidth in the same runs.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session20/variants.py "$W/new" "$W/var" --variants _old,_orig --nowait decode_1x4096x4096,decode_16x4096x14336 >> "$OUT/gen.txt" 2>&1
mkdir -p "$W/dbg"
python3 tools/session20/chain_debug.py "$W/var" "$W/dbg" decode_1x4096x4096_nowait decode_16x4096x14336_nowait >> "$OUT/gen.txt" 2>&1
rm -rf "$W"/var/*_nowait
# The K-split kernels' "before" is _orig (no prefetch, the wait first); _old is that kernel with the wait moved.
for d in "$W"/var/*_orig; do rm -rf "${d%_orig}_old"; done
timeout 240 python3 -m dgemm_cli build "$W"/new "$W"/var "$W"/dbg -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for d in "$W"/dbg/*; do
  n=$(basename "$d")
  timeout 30 "$d/build/sm_90a/${n}_harness" verify --seeds 1 --samples 4 > "$OUT/dbg_$n.txt" 2>&1
  echo "$n rc=$?" >> "$OUT/dbg.txt"
  python3 tools/session20/chain_report.py "$OUT/dbg_$n.txt" >> "$OUT/dbg.txt"
done
stamp "debug"
ALL=$(ls -d "$W"/new/* "$W"/var/* | sort -t/ -k5)
FIXED=$(printf '%s\n' $ALL | grep -v decode_dyn); DYN=$(printf '%s\n' $ALL | grep decode_dyn)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 80 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 90 python3 -m dgemm_cli bench $DYN --m 1,2,5,8,9,16,17,32,48,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r rc=$?"
  fi
done
{ cat "$OUT/dbg.txt"; python3 tools/session20/table.py "$OUT" | grep -v "verify\|bench_others"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|bench_1\.json|bench_dyn_1\.json'
