#!/usr/bin/env bash
# Session 9, device call 3 (nvidia-h200): the gemv with A staged in 16-byte vectors and the refitted gemv cost,
# on the model's picks: the decode benchmarks (specs/bench/decode_*), decode_qk and decode_dynamic, and
# [2,4096]x[4096,14336] (now gemv by the model) beside hopper. Build, verify (seed 1, --repeat 2), bench twice,
# the run-time artifacts at 11 m each; compute-sanitizer on two gemv kernels.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_*.yaml specs/decode_qk.yaml specs/decode_dynamic.yaml exp/specs/decode_2x4096x14336.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper exp/specs/decode_2x4096x14336_hopper.yaml -o "$W/dec" >> "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
grep -E "^\S+: " "$OUT/gen.txt" | cut -c1-150
timeout 200 python3 -m dgemm_cli build "$W"/dec -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 150 python3 -m dgemm_cli verify "$W"/dec --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  timeout 100 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $r rc=$?"
done
timeout 100 python3 -m dgemm_cli bench "$W"/dec/*dyn* --m 1,2,3,4,8,16,17,32,48,63,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
sanitize "$W"/dec/decode_1x2048x512 "$W"/dec/decode_2x4096x14336; stamp "sanitize"
bench_rows "$OUT"/bench_[12].json | sort -k2,2 -k1,1
bench_rows "$OUT"/bench_dyn.json
cat "$OUT/sanitize.txt"
report | grep -E "verif|build|pass|fail" | head -5
failures "$OUT/verify.json"
pack '(build|verify)\.json|bench_.*\.json|gen\.txt'
