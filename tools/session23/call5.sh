#!/usr/bin/env bash
# Session 23, device call 5 (nvidia-h200). Call 4: B's TMA loads marked evict_first in L2 ran the decode kernels
# 1.2-1.7 µs faster (16 / 64 / 128 rows of N = 14336). Now the hopper template does so where the weight streams once
# (HopperPlan.b_evict_first). (1) Those kernels against the same with the plain load back (tools/session23/
# cache_hints.py nohint), at 16, 64, 128 rows of N = 14336 and the K split of [64,4096]x[4096,4096]; at 16 rows also
# without the prefetch of the first stages, hinted and not (is the gain the prefetched boxes kept in L2?). (2) The
# same hint on gemv's and tcgemv's weight loads (gfirst, tfirst) at 1, 8, 16 rows. All verified (seeds 1, 2,
# --repeat 2), benched in turn, 3 rounds; ncu one kernel at a time (caches flushed) of the 16-row kernel with and
# without. (3) 12 random specs of the B-first K-split kernel and 16 of the prefetching one-tile-row kernels, seed 25,
# verified: the hinted loads on shapes nobody tuned.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml \
  specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x4096.yaml specs/bench/decode_1x4096x14336.yaml \
  specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x14336.yaml specs/bench/decode_8x4096x4096.yaml \
  specs/bench/decode_16x4096x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/session23/cache_hints.py "$W/t" "$W/t" decode_16x4096x14336=nohint decode_16x4096x14336=nopf \
  decode_16x4096x14336=nohint_nopf decode_64x4096x14336=nohint up_128x14336x4096=nohint decode_64x4096x4096=nohint \
  decode_1x4096x14336=gfirst decode_1x4096x4096=gfirst decode_8x4096x14336=tfirst decode_8x4096x4096=tfirst \
  decode_16x4096x4096=tfirst >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" | tr '\n' ' ')"
python3 tools/session22/bfirst_split_specs.py 12 25 "$W/rs" > "$OUT/rand_specs.txt" 2>&1
python3 tools/session21/pdl_prefetch_specs.py 16 25 "$W/rs" >> "$OUT/rand_specs.txt" 2>&1
dg gen --untuned "$W"/rs/*.yaml -o "$W/r" >> "$OUT/gen.txt" 2>&1; stamp "gen random rc=$? $(ls "$W/r" | wc -l) dirs"
timeout 300 python3 -m dgemm_cli build "$W"/t/* "$W"/r/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
timeout 300 python3 -m dgemm_cli verify "$W"/t/* "$W"/r/* --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" \
  2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
failures "$OUT/verify.json" > "$OUT/failures.txt"
grep -l 'evict_first(smem' "$W"/r/*/*.cu | wc -l > "$OUT/random_hinted.txt"
MP=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for v in decode_16x4096x14336 decode_16x4096x14336_nohint; do
  timeout 60 ncu -k "regex:^${v}_kernel" -c 1 --metrics "$MP" --csv \
    "$W/t/$v/build/sm_90a/${v}_harness" verify --seeds 1 --samples 8 > "$OUT/ncu_$v.csv" 2>> "$OUT/ncu_err.txt"
  stamp "ncu $v rc=$?"
done
bench_rounds 3 200 "$W"/t/*
bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
{ cat "$OUT/failures.txt"
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  echo "random kernels with the hinted load: $(cat "$OUT/random_hinted.txt")"
  python3 - "$OUT"/ncu_decode_16*.csv <<'PY'
import csv, sys
for path in sys.argv[1:]:
    for r in csv.DictReader(l for l in open(path) if l.startswith('"')):
        print(f"  {path.rsplit('/', 1)[-1][4:-4]:30s} {r['Metric Name']:28s} {r['Metric Value']:>16s}")
PY
  cat "$OUT/bench_rows.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|rand_specs\.txt'
