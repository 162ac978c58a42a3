#!/usr/bin/env bash
# Session 19, device call 4 (nvidia-h200): issue 7's table with this session's dependent launches (hopper's
# persistent grid when it leaves at most a sixteenth of the SMs idle over one tile row; gemv unsplit and tcgemv's
# register-stream kernel always, no trigger), each beside itself launched as before (old/: the same sources with
# the launch switched back: hopper's rule `grid == resident`, the others plain), alternately, 3 rounds of the
# decode set, 2 of the run-time artifacts at 10 row counts; copy bandwidth in the same runs. Verified: the new
# sources (seeds 1, 2, --repeat 2) and 30 random specs of every kind at this commit (seed 19).
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session19/copy_renamed.py "$W/new" "$W/old" _old >> "$OUT/gen.txt" 2>&1
python3 - "$W"/old/*/*_old.cu <<'PY' >> "$OUT/gen.txt" 2>&1
import re, sys  # old/: new's sources with the launches as before this session
for path in sys.argv[1:]:
    t = open(path).read()
    t, a = re.subn(r"config\.numAttrs = \(dependent\) \? 1 : 0;", "config.numAttrs = (grid == resident) ? 1 : 0;", t)
    t, b = re.subn(r"config\.numAttrs = 1;", "config.numAttrs = 0;", t)  # gemv unsplit, tcgemv (clusters: 2)
    open(path, "w").write(t)
    print(path.rsplit("/", 1)[-1], "hopper launches", a, "plain launches", b)
PY
dg random-specs 30 --seed 19 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/rand" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$?"
timeout 240 python3 -m dgemm_cli build "$W"/new "$W"/old "$W"/rand -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED_NEW=$(ls -d "$W"/new/* | grep -v dyn); FIXED_OLD=$(ls -d "$W"/old/* | grep -v dyn)
M=1,2,5,8,9,16,17,32,48,64
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 40 python3 -m dgemm_cli bench $FIXED_NEW --json > "$OUT/bench_new_$r.json" 2>> "$OUT/bench_err.txt"
  # shellcheck disable=SC2086
  timeout 40 python3 -m dgemm_cli bench $FIXED_OLD --json > "$OUT/bench_old_$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench fixed r$r"
  if [ "$r" -lt 3 ]; then
    timeout 60 python3 -m dgemm_cli bench "$W"/new/decode_dyn* --m $M --json > "$OUT/bench_dnew_$r.json" 2>> "$OUT/bench_err.txt"
    timeout 60 python3 -m dgemm_cli bench "$W"/old/decode_dyn* --m $M --json > "$OUT/bench_dold_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r"
  fi
done
timeout 150 python3 -m dgemm_cli verify "$W"/new "$W"/rand --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
python3 tools/session19/new_old_table.py "$OUT" | tee "$OUT/summary.txt"
cat "$OUT/failures.txt" >> "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|failures\.txt|bench_new_1\.json|bench_dnew_1\.json'
