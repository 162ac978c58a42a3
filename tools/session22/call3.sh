#!/usr/bin/env bash
# Session 22, device call 3 (nvidia-h200): (1) hopper's producer issuing each stage's B box before its A box, and B's
# map without L2 promotion at 128 rows (tools/session22/producer.py), beside the picks at 16, 64 and 128 rows of
# N = 14336 and at the K split (64 rows, N = 4096); (2) a K split of 4 at [64,4096]x[4096,4096]: 64x128 tiles, 32
# clusters of 4 = 128 blocks, a quarter less L2 traffic into the SMs than the pick's 64x64 split 2
# (tools/session22/split4.py), fixed and in the run-time artifact's hopper kernel (m = 17..64). All verified (seeds
# 1, 2, --repeat 2), benched in turn: 3 rounds fixed, 2 rounds run-time.
source tools/device_lib.sh
S4='"consumers":1,"block_m":64,"block_n":128,"ctas_per_sm":1,"k_splits":4,"l2_promotion":"none"'
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml \
  specs/bench/decode_64x4096x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
dg gen --untuned specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/d" >> "$OUT/gen.txt" 2>&1
python3 tools/session22/producer.py "$W/t" "$W/t" up_128x14336x4096=bfirst up_128x14336x4096=bnone up_128x14336x4096=bfirst_bnone \
  decode_64x4096x14336=bfirst decode_16x4096x14336=bfirst decode_64x4096x4096=bfirst >> "$OUT/gen.txt" 2>&1
python3 tools/session22/split4.py specs/bench/decode_64x4096x4096.yaml "$W/t" "{$S4,\"stages\":8}" _s4 >> "$OUT/gen.txt" 2>&1
python3 tools/session22/split4.py specs/bench/decode_64x4096x4096.yaml "$W/t" "{$S4,\"stages\":6}" _s4st6 >> "$OUT/gen.txt" 2>&1
python3 tools/session22/split4.py specs/bench/decode_dyn_1-64x4096x4096.yaml "$W/d" "{$S4,\"stages\":8}" _s4 >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$? $(ls "$W/t" "$W/d" | tr '\n' ' ')"
build_verify 1,2 "$W"/t/* "$W"/d/*
bench_rounds 3 90 "$W"/t/*
for r in 1 2; do
  timeout 90 python3 -m dgemm_cli bench "$W"/d/* --m 17,32,48,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench dyn r$r rc=$?"
done
bench_rows "$OUT"/bench_[0-9].json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
python3 - "$OUT"/bench_dyn_*.json >> "$OUT/bench_rows.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        print(f"{path.rsplit('/', 1)[-1]:16s} {r['name']:36s} m={r.get('m')!s:4s} {r['us']:8.2f} us  cuBLAS {r['baseline_us']:8.2f}  ratio {r['ratio']:.3f}")
PY
grep -h "spill" "$OUT/build.json" | head -5 > "$OUT/spills.txt"
{ cat "$OUT/failures.txt"; python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"; cat "$OUT/bench_rows.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json'
