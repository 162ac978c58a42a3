#!/usr/bin/env bash
# Session 20, device call 2 (nvidia-h200): (1) tools/session20/pdl_probe.cu: when does a dependent launch start
# behind a predecessor that triggers at once and idles (call 1's negative controls passed verify: no overlap);
# (2) hopper's L2 prefetch before the wait, call 1's A and B (new) against B only (_bonly), none (_old: the wait
# after the barriers' setup) and the K-split kernel as before the session (_orig: none, the wait first), benched
# in turn, 3 rounds of the fixed sizes and 2 of the run-time artifacts at hopper's row counts.
source tools/device_lib.sh
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/session20/pdl_probe.cu -o "$W/pdl_probe" && "$W/pdl_probe" | tee "$OUT/pdl_probe.txt"
stamp "probe"
PRE="specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml specs/bench/decode_64x4096x4096.yaml
  specs/bench/up_128x14336x4096.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x14336.yaml"
# shellcheck disable=SC2086
dg gen --untuned $PRE -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
python3 tools/session20/variants.py "$W/new" "$W/var" --variants _old,_bonly,_orig >> "$OUT/gen.txt" 2>&1; stamp "variants rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/new "$W"/var -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED=""; DYN=""
for d in $(ls -d "$W"/new/* "$W"/var/* | sort -t/ -k5); do
  case $(basename "$d") in decode_dyn*) DYN="$DYN $d" ;; *) FIXED="$FIXED $d" ;; esac
done
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 70 python3 -m dgemm_cli bench $DYN --m 16,17,32,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn r$r rc=$?"
  fi
done
timeout 60 python3 -m dgemm_cli verify "$W"/var/*_bonly --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
python3 tools/session20/table.py "$OUT" | tee "$OUT/summary.txt"
cat "$OUT/pdl_probe.txt" >> "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json'
