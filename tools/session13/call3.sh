#!/usr/bin/env bash
# Session 13, device call 5 (nvidia-h200): is the run-time-M hopper kernel slower than the fixed-M one with the same
# tiling? (Session 12, call 9: N = 14336, m = 16: 31.10 against 30.53 us; m = 64: 32.39 against 31.31; N = 4096,
# m = 64: 11.97 against 11.71; in separate processes, cuBLAS moving 30.6-31.2.) Here each pair is benched
# alternately, four times, `deepgemm bench` (graph replay, inputs rotated past L2). Then the GPU tests of 20-launch
# bit identity (tests/test_gpu_verify.py -k bit_identical: tcgemv 8 / 16 tokens / a batch, hopper's cluster K split,
# splitk, gemv, a run-time-M artifact).
source tools/device_lib.sh
B=specs/bench
dg gen --untuned $B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml $B/decode_64x4096x4096.yaml \
  $B/decode_dyn_1-64x4096x14336.yaml $B/decode_dyn_1-64x4096x4096.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
timeout 200 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for i in 1 2 3 4; do
  for d in decode_16x4096x14336 decode_64x4096x14336 decode_64x4096x4096; do
    timeout 30 python3 -m dgemm_cli bench "$W/g/$d" --json > "$OUT/s_${d}_$i.json" 2>> "$OUT/bench_err.txt"
  done
  timeout 40 python3 -m dgemm_cli bench "$W/g/decode_dyn_1_64x4096x14336" --m 16,64 --json > "$OUT/d14336_$i.json" 2>> "$OUT/bench_err.txt"
  timeout 40 python3 -m dgemm_cli bench "$W/g/decode_dyn_1_64x4096x4096" --m 64 --json > "$OUT/d4096_$i.json" 2>> "$OUT/bench_err.txt"
done
stamp "bench"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, glob
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(f"{out}/*_[1-4].json")):
    for r in json.load(open(path)):
        for x in r.get("m_rows") or [r]:
            key = (r["name"], x.get("m", "-"))
            rows.setdefault(key, []).append((x["us"], x["baseline_us"]))
for (name, m), v in sorted(rows.items()):
    print(f"{name:30s} m={m!s:3s} ours {' '.join(f'{a:6.2f}' for a, _ in v)}   cuBLAS {' '.join(f'{b:6.2f}' for _, b in v)}")
PY
timeout 330 python3 -m pytest -q -x tests/test_gpu_verify.py -k bit_identical > "$OUT/pytest.txt" 2>&1; stamp "pytest rc=$?"
tail -5 "$OUT/pytest.txt" | tee -a "$OUT/summary.txt"
pack 'summary\.txt|pytest\.txt'
