#!/usr/bin/env bash
# Session 26, device call 5 (nvidia-h200): tcgemv's register-stream kernel where K is not whole 64-k segments, with
# the partial segment loaded after the loop (no per-lane test in it; ptxas: no spill, was 32-56 bytes). The 32
# specs of tools/session25/specs and tools/session26/specs whose kernels changed are verified (seeds 1-2,
# `--repeat 2`); four of them are benched as they were (the template at e7ff090: tools/session26/tcgemv_ktail.patch
# taken back out; the run at 2b608d7 copied a whole saved template instead) and as now, in turn, two rounds each.
source tools/device_lib.sh
CHANGED="tools/session25/specs/tcgemv_29_000.yaml tools/session25/specs/tcgemv_29_001.yaml
tools/session25/specs/tcgemv_29_002.yaml tools/session25/specs/tcgemv_29_003.yaml tools/session25/specs/tcgemv_29_004.yaml
tools/session25/specs/tcgemv_29_005.yaml tools/session25/specs/tcgemv_29_006.yaml tools/session25/specs/tcgemv_29_007.yaml
tools/session25/specs/tcgemv_29_008.yaml tools/session25/specs/tcgemv_29_009.yaml tools/session25/specs/tcgemv_29_010.yaml
tools/session25/specs/tcgemv_29_012.yaml tools/session25/specs/tcgemv_29_013.yaml tools/session25/specs/tcgemv_29_014.yaml
tools/session25/specs/tcgemv_29_015.yaml tools/session25/specs/tcgemv_30_000.yaml tools/session25/specs/tcgemv_30_001.yaml
tools/session25/specs/tcgemv_30_002.yaml tools/session25/specs/tcgemv_30_003.yaml tools/session25/specs/tcgemv_30_004.yaml
tools/session25/specs/tcgemv_30_005.yaml tools/session25/specs/tcgemv_30_006.yaml tools/session25/specs/tcgemv_30_007.yaml
tools/session25/specs/tcgemv_30_009.yaml tools/session25/specs/tcgemv_30_010.yaml tools/session25/specs/tcgemv_30_011.yaml
tools/session26/specs/tcgemv_31_001.yaml tools/session26/specs/tcgemv_31_002.yaml tools/session26/specs/tcgemv_31_003.yaml
tools/session26/specs/tcgemv_31_004.yaml tools/session26/specs/tcgemv_31_005.yaml tools/session26/specs/tcgemv_31_006.yaml"
TIMED="tcgemv_29_001 tcgemv_29_012 tcgemv_30_010 tcgemv_31_006"
# shellcheck disable=SC2086
dg gen --untuned $CHANGED -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen new rc=$?"
cp templates/tcgemv/body.cu.j2 "$W/body_now.cu.j2"
patch -R -p1 -s < tools/session26/tcgemv_ktail.patch
for n in $TIMED; do dg gen --untuned "$(echo $CHANGED | tr ' ' '\n' | grep "$n")" -o "$W/old" >> "$OUT/gen.txt" 2>&1; done
stamp "gen old rc=$?"
cp "$W/body_now.cu.j2" templates/tcgemv/body.cu.j2
OLD=(); NEW=(); for n in $TIMED; do OLD+=("$W/old/$n"); NEW+=("$W/new/$n"); done
timeout 150 python3 -m dgemm_cli build "$W"/new/* "${OLD[@]}" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
timeout 110 python3 -m dgemm_cli verify "$W"/new/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
failures "$OUT/verify.json" | tee "$OUT/failures.txt"
for r in 1 2; do
  timeout 25 python3 -m dgemm_cli bench "${OLD[@]}" --json > "$OUT/bench_old_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench old r$r rc=$?"
  timeout 25 python3 -m dgemm_cli bench "${NEW[@]}" --json > "$OUT/bench_new_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench new r$r rc=$?"
done
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify.json"
  bench_rows "$OUT"/bench_old_*.json "$OUT"/bench_new_*.json; } > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_old_1\.json|bench_new_1\.json|bench_old_2\.json|bench_new_2\.json'
