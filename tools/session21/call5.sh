#!/usr/bin/env bash
# Session 21, device call 5 (nvidia-h200): the epilogue's staging over the pipeline stages and the shared memory
# it frees spent on stages (tools/session21/overlay.py): 128 rows at 7 stages (cuBLAS's depth for the same tile,
# call 4), 16 and 64 rows at 10, each beside the kernel as planned, benched alternately, 3 rounds; the variants
# verified (seeds 1, 2).
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/new" > "$OUT/gen.txt" 2>&1
python3 tools/session21/overlay.py "$W/new" "$W/var" up_128x14336x4096=7 decode_16x4096x14336=10 decode_64x4096x14336=10 >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
timeout 90 python3 -m dgemm_cli build "$W"/new "$W"/var -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli verify "$W"/var --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
bench_rounds 3 40 $(ls -d "$W"/new/* "$W"/var/* | sort -t/ -k5)
python3 tools/session20/table.py "$OUT" | grep -v "bench_others\|verify_nowait" | tee "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json'
