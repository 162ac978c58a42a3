#!/usr/bin/env bash
# Session 25, device call 4 (nvidia-h200): call 2's verify (every directory of issue 7 and the random specs, seeds
# 1-4, --repeat 2) ran past 240 s where call 3's, split in two, took 140 s: the same verify one directory at a time,
# each timed, to find any that hangs.
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1
dg gen --untuned tools/session25/specs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
for d in "$W"/r/* "$W"/t/*; do
  s=$(date +%s.%N)
  timeout 30 python3 -m dgemm_cli verify "$d" --seeds 1,2,3,4 --repeat 2 --json > "$W/v_$(basename "$d").json" 2>&1
  rc=$?
  echo "$(basename "$d") rc=$rc $(python3 -c "print(f'{$(date +%s.%N) - $s:.1f} s')")" >> "$OUT/per_dir.txt"
  [ $(( $(date +%s) - T0 )) -gt 150 ] && break
done
stamp "verify done"
sort "$OUT/per_dir.txt" > "$OUT/summary.txt"
grep -c "rc=0" "$OUT/per_dir.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt" "$OUT/log.txt"
pack 'summary\.txt'
