#!/usr/bin/env bash
# Session 10, device call 11 (nvidia-h200): the tcgemv family. Model's picks of the decode benchmarks (decode_qk,
# decode_dynamic, decode_bias_silu too); tools/session10/tcgemv forced to tcgemv; the hopper picks of before as A/B
# (`gen --family hopper`, renamed *_hopper) at the shapes tcgemv took. Verify (seeds 1, 2, --repeat 2),
# compute-sanitizer on three tcgemv kernels, bench twice (fixed shapes) and the run-time artifacts at
# m = 1, 2, 3, 4, 8, 16, 64.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_*.yaml specs/decode_qk.yaml specs/decode_dynamic.yaml specs/epilogue/decode_bias_silu.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen --untuned tools/session10/tcgemv/*.yaml --family tcgemv -o "$W/tcf" >> "$OUT/gen.txt" 2>&1
mkdir -p "$W/hs"
for s in decode_8x4096x14336 decode_16x4096x4096 decode_8x4096x4096; do
  sed "s/^name: $s\$/name: ${s}_hopper/" specs/bench/$s.yaml > "$W/hs/${s}_hopper.yaml"
done
dg gen --untuned "$W"/hs/*.yaml --family hopper -o "$W/hop" >> "$OUT/gen.txt" 2>&1
stamp "gen"
grep -h "^// Plan" "$W"/dec/*/*.cu | grep -v ": cta" | cut -c1-160 > "$OUT/picks.txt"
timeout 300 python3 -m dgemm_cli build "$W"/dec "$W"/tcf "$W"/hop -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/dec "$W"/tcf --seeds 1,2 --repeat 2 --json > "$OUT/verify_tc.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/hop --seeds 1 --json > "$OUT/verify_hop.json" 2>> "$OUT/verify_err.txt"; stamp "verify hop rc=$?"
for r in 1 2; do
  timeout 90 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) "$W"/hop/* --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
timeout 90 python3 -m dgemm_cli bench "$W"/dec/*dyn_* --m 1,2,3,4,8,16,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
sanitize "$W"/tcf/tc_m2_bf16_tails "$W"/tcf/tc_m16_epilogue "$W"/tcf/tc_m8_short_k; stamp "sanitize"
grep tcgemv "$OUT/picks.txt" | cut -c1-120
bench_rows "$OUT"/bench_[12].json | sort -k2,2 -k1,1
bench_rows "$OUT"/bench_dyn.json
cat "$OUT/sanitize.txt"
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify_*.json
pack '(build|verify_.*)\.json|bench_.*\.json|sanitize\.txt|picks\.txt'
