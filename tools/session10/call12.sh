#!/usr/bin/env bash
# Session 10, device call 12 (nvidia-h200): the tcgemv template without per-lane predicates where K is whole 64-k
# segments and N whole blocks, against call 11 (31.0 / 10.64 / 10.65 us) and the probe's same tilings (call 10:
# 29.42 / 10.21 / 10.51), in one run; verify first.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/swapmma_probe" tools/swapmma_probe.cu > "$OUT/probe_build.txt" 2>&1 &
dg gen --untuned specs/bench/decode_8x4096x14336.yaml specs/bench/decode_8x4096x4096.yaml specs/bench/decode_16x4096x4096.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml specs/bench/decode_dyn_1-64x4096x14336.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg gen --untuned tools/session10/tcgemv/*.yaml --family tcgemv -o "$W/tcf" >> "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/dec "$W"/tcf -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
wait
timeout 120 python3 -m dgemm_cli verify "$W"/dec "$W"/tcf --seeds 1 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_1.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 60 "$W/swapmma_probe" call12 > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
timeout 60 python3 -m dgemm_cli bench $(ls -d "$W"/dec/* | grep -v dyn) --json > "$OUT/bench_2.json" 2>> "$OUT/bench_err.txt"; stamp "bench rc=$?"
timeout 90 python3 -m dgemm_cli bench "$W"/dec/*dyn_* --m 1,2,3,4,5,8,9,12,16,64 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"; stamp "bench dyn rc=$?"
bench_rows "$OUT"/bench_[12].json | sort -k2,2 -k1,1
bench_rows "$OUT"/bench_dyn.json
cat "$OUT/probe.txt"
report | grep -E "verif|build|pass|fail" | head -8
failures "$OUT"/verify*.json
pack '(build|verify)\.json|bench_.*\.json|probe\.txt'
