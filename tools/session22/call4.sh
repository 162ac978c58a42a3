#!/usr/bin/env bash
# Session 22, device call 4 (nvidia-h200): hopper's B-first load order (12826d1) verified and timed. (1) Issue 7's
# table at this commit: fixed sizes 3 rounds, run-time artifacts 2 rounds at 10 row counts, verified (seeds 1, 2,
# --repeat 2). (2) Random specs, verified behind the harness's writer (seeds 1, 2, --repeat 2): 16 that reach the
# prefetch ahead of a dependent launch's wait (session 21's generator, seed 23: one tile row, so B first) and 24 of
# every kind (random-specs, seed 23); plan.json's b_first counted. memcheck on two B-first kernels. (3) ncu at boost
# clocks of L2's read requests and sectors by source, for the 128-row pick, its A multicast variant
# (tools/session22/multicast.py) and cuBLAS's kernel: does the multicast halve A's L2 reads in ours and in cuBLAS's?
source tools/device_lib.sh
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DECODE $ISSUE7_DYNAMIC -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen issue 7 rc=$?"
python3 tools/session21/pdl_prefetch_specs.py 16 23 "$W/rs" > "$OUT/pdl_specs.txt" 2>&1; stamp "pdl specs rc=$?"
dg random-specs 24 --seed 23 --tma-share 0.4 --small-m-share 0.5 --wide-decode-share 0.5 --wide-batch-share 0.3 \
  --wide-short-k-share 0.3 --dynamic-share 0.2 --epilogue-share 0.3 --a-vectors-share 0.5 -o "$W/rs" >> "$OUT/gen.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$? ($(ls "$W/r" | wc -l) dirs)"
dg gen --untuned specs/bench/up_128x14336x4096.yaml -o "$W/p" >> "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/p" "$W/p" up_128x14336x4096=2 >> "$OUT/gen.txt" 2>&1
{ echo "b_first (plan.json, kernels): issue 7 $(cat "$W"/t/*/plan.json | grep -o '"b_first": true' | wc -l)," \
    "random $(cat "$W"/r/*/plan.json | grep -o '"b_first": true' | wc -l) true / $(cat "$W"/r/*/plan.json | grep -o '"b_first": false' | wc -l) false"; } > "$OUT/cover.txt"
timeout 300 python3 -m dgemm_cli build "$W"/t "$W"/r "$W"/p -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
FIXED=$(ls -d "$W"/t/* | grep -v decode_dyn | sort -t/ -k5); DYN=$(ls -d "$W"/t/decode_dyn*)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 60 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 70 python3 -m dgemm_cli bench $DYN --m 1,2,5,8,9,16,17,32,48,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r rc=$?"
  fi
done
timeout 240 python3 -m dgemm_cli verify "$W"/t "$W"/r --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for n in decode_64x4096x4096 decode_16x4096x14336; do
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$W"/t/$n/build/sm_90a/${n}_harness verify --seeds 1 --samples 16 > "$OUT/san_$n.txt" 2>&1
  echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
done
stamp "sanitize"
M=gpu__time_duration.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_requests_srcunit_tex.sum,lts__t_tag_requests.sum
for n in up_128x14336x4096 up_128x14336x4096_mc2; do
  h="$W/p/$n/build/sm_90a/${n}_harness"
  timeout 60 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_err_$n.txt"
  stamp "ncu $n rc=$?"
done
timeout 60 ncu --clock-control none -k regex:nvjet -c 3 --metrics "$M" --csv "$W/p/up_128x14336x4096/build/sm_90a/up_128x14336x4096_harness" bench --warmup 2 --reps 2 > "$OUT/ncu_cublas.csv" 2> "$OUT/ncu_err_cublas.txt"
stamp "ncu cublas rc=$?"
python3 - "$OUT" > "$OUT/ncu_summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"')) if r.get("ID") == "2"]
    print("==", path.rsplit("/", 1)[-1], rows[0].get("Kernel Name", "")[:50] if rows else "no rows")
    for r in rows:
        print(f"  {r.get('Metric Name', ''):62s} {r.get('Metric Unit', ''):8s} {r.get('Metric Value', '')}")
PY
{ python3 tools/session20/table.py "$OUT" | grep -v "bench_others\|verify_nowait"; failures "$OUT/verify.json"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/cover.txt" "$OUT/sanitize.txt" "$OUT/ncu_summary.txt"; grep -h "ncu_err\|ERR" "$OUT"/ncu_err_* | head -5; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json|pdl_specs\.txt'
