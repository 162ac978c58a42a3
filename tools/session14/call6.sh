#!/usr/bin/env bash
# Session 14, device call 6 (nvidia-h200): why the generated staged kernel (call 5: 31.0-31.1 us at
# [16,4096]x[4096,14336]) runs slower than the probe it follows (29.4-30.1). The probe with A rotated past L2 as
# `deepgemm bench` rotates it; the generated kernel as planned, with groups of 2 segments a barrier, and with the
# per-segment guards removed (K = 4096: every warp's slice is whole rounds), benched in turn beside hopper's plan.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o "$W/smact_probe" tools/session14/smact_probe.cu \
  > "$OUT/ptxas.txt" 2>&1; stamp "nvcc rc=$?"
B=specs/bench
dg gen --untuned $B/decode_16x4096x14336.yaml -o "$W/base" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $B/decode_16x4096x14336.yaml -o "$W/hopper" >> "$OUT/gen.txt" 2>&1
for v in g2 noguard g2noguard; do cp -r "$W/base" "$W/$v"; done
python3 - "$W" <<'PY'
import sys
from pathlib import Path
w = Path(sys.argv[1])
def patch(v, pairs):
    f = w / v / "decode_16x4096x14336" / "decode_16x4096x14336.cu"
    s = f.read_text()
    for old, new in pairs:
        assert old in s, (v, old)
        s = s.replace(old, new)
    f.write_text(s)
g2 = [("constexpr int GROUP_SEGMENTS = 8;", "constexpr int GROUP_SEGMENTS = 2;"),
      ("constexpr int BARRIERS = 8;", "constexpr int BARRIERS = 32;"),
      ("constexpr int SMEM_BYTES = 147008;", "constexpr int SMEM_BYTES = 147264;")]
noguard = [("      if (kk + 64 * s < k_len) {\n        mbar_wait", "      {\n        mbar_wait"),
           ("      const bool in = seg < k_len;", "      const bool in = true;")]
patch("g2", g2); patch("noguard", noguard); patch("g2noguard", g2 + noguard)
PY
stamp "patched rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/base "$W"/hopper "$W"/g2 "$W"/noguard "$W"/g2noguard -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 100 python3 -m dgemm_cli verify "$W"/g2 "$W"/noguard "$W"/g2noguard --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 100 "$W/smact_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
for r in 1 2; do
  for v in base hopper g2 noguard g2noguard; do
    timeout 40 python3 -m dgemm_cli bench "$W"/$v/* --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(f\"{sys.argv[2]:10s} {r['us']:7.2f} us  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}\")" "$OUT/bench_${v}_$r.json" $v >> "$OUT/bench.txt" 2>&1
  done
done
stamp "bench"
{ grep -E "^--|mma|grid" "$OUT/probe.txt"; cat "$OUT/bench.txt"; python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', [(r['name'], r.get('passed')) for r in v])"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|probe\.txt|bench\.txt'
