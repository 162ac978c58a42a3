#!/usr/bin/env bash
# Session 24's next experiment (nvidia-h200; written, not run: the session's device time ran out). Calls 1-2: tcgemv's
# register-stream kernel with its first 2 rounds of the weight prefetched into L2 before its wait and a trigger after
# its last load ran [8,4096]x[4096,14336] 0.8 µs faster chained (27.75 against 28.53-28.65 µs), but with the `.nc`
# loads it read lines the harness's predecessor had rewritten since the prefetch. With coherent loads
# (`ld.global.L1::no_allocate`: after griddepcontrol.wait the predecessor's writes are visible to them by the memory
# model) it passed at three shapes. This call asks the rest of the space before anything lands:
# (1) tools/session24/prefetch_coherent.patch applied to this copy of the template (coherent loads, 2 rounds
#     prefetched, the trigger); the 3 shapes as they are now (_base) and patched; the run-time artifacts and 24
#     random streamed-tcgemv specs (seed 28) patched; all verified 4 seeds, --repeat 2, twice over.
# (2) bench in turn, 3 rounds (fixed) and 2 (run-time, 10 row counts); ncu one kernel at a time, 8 launches, base and
#     patched at 8 rows of N = 14336 and 4096.
# Lands only if every verify passes and the bench gains where tcgemv is picked without losing one kernel at a time.
source tools/device_lib.sh
S="decode_8x4096x14336 decode_8x4096x4096 decode_16x4096x4096"
dg gen --untuned $(for s in $S; do echo specs/bench/$s.yaml; done) -o "$W/b" > "$OUT/gen.txt" 2>&1
python3 tools/session19/copy_renamed.py "$W/b" "$W/t" _base >> "$OUT/gen.txt" 2>&1
{ git apply tools/session24/prefetch_coherent.patch || patch -p1 < tools/session24/prefetch_coherent.patch; } >> "$OUT/gen.txt" 2>&1
stamp "patch rc=$? $(grep -c 'ld.global.L1::no_allocate' templates/tcgemv/body.cu.j2) coherent load(s) in the template"
# shellcheck disable=SC2086
dg gen --untuned $(for s in $S; do echo specs/bench/$s.yaml; done) $ISSUE7_DYNAMIC -o "$W/t" >> "$OUT/gen.txt" 2>&1
python3 tools/session24/tcgemv_specs.py 24 28 "$W/rs" > "$OUT/rand_specs.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | wc -l) + $(ls "$W/r" | wc -l) dirs, $(grep -l 'PREFETCH_ROUNDS = 2' "$W"/t/*/*.cu "$W"/r/*/*.cu | wc -l) prefetching"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
for v in 1 2; do
  timeout 200 python3 -m dgemm_cli verify "$W"/t/* "$W"/r/* --seeds 1,2,3,4 --repeat 2 --json > "$OUT/verify_$v.json" \
    2> "$OUT/verify_err_$v.txt"; stamp "verify $v rc=$?"
done
bench_fixed_dyn "$W"/t/*
ncu_times "tcgemv::" 8 "$W"/t/decode_8x4096x14336 "$W"/t/decode_8x4096x14336_base "$W"/t/decode_8x4096x4096 \
  "$W"/t/decode_8x4096x4096_base
{ for v in 1 2; do failures "$OUT/verify_$v.json" | cut -c1-160
    python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify_$v.json"
  done
  tail -1 "$OUT/rand_specs.txt"; cat "$OUT/ncu_summary.txt"; python3 tools/session20/table.py "$OUT"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify_1\.json|bench_1\.json|bench_dyn_1\.json|rand_specs\.txt'
