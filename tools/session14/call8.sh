#!/usr/bin/env bash
# Session 14, device call 8 (nvidia-h200): the staged template after call 7 (the lane's chunk folded into its row
# pointers, the slice's box and mbarrier bases hoisted, chunks read in place without selects, warp w in row group
# w / K_WARPS: 124 registers, no spill) as planned, and with warp w in row group w % ROW_GROUPS (the probe's
# mapping; 4 bytes spilled outside the loop), beside hopper's plan and the probe; the other specs and the run-time
# artifact benched; everything verified.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o "$W/smact_probe" tools/session14/smact_probe.cu \
  > "$OUT/ptxas.txt" 2>&1; stamp "nvcc rc=$?"
B=specs/bench S=tools/session14/specs
dg gen --untuned $B/decode_16x4096x14336.yaml -o "$W/base" > "$OUT/gen.txt" 2>&1
dg gen --untuned --family hopper $B/decode_16x4096x14336.yaml -o "$W/hopper" >> "$OUT/gen.txt" 2>&1
dg gen --untuned $S/*.yaml $B/decode_dyn_1-64x4096x14336.yaml -o "$W/more" >> "$OUT/gen.txt" 2>&1
cp -r "$W/base" "$W/modrg"
python3 - "$W" <<'PY'
import sys
from pathlib import Path
f = Path(sys.argv[1]) / "modrg" / "decode_16x4096x14336" / "decode_16x4096x14336.cu"
s = f.read_text()
old = "const int group = warp / K_WARPS, k_warp = warp % K_WARPS;"
assert old in s
f.write_text(s.replace(old, "const int group = warp % ROW_GROUPS, k_warp = warp / ROW_GROUPS;"))
PY
timeout 240 python3 -m dgemm_cli build "$W"/base "$W"/hopper "$W"/modrg "$W"/more -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/base "$W"/modrg "$W"/more --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 100 "$W/smact_probe" > "$OUT/probe.txt" 2>&1; stamp "probe rc=$?"
for r in 1 2 3; do
  for v in base hopper modrg; do
    timeout 40 python3 -m dgemm_cli bench "$W"/$v/* --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(f\"{sys.argv[2]:10s} {r['us']:7.2f} us  cuBLAS {r['baseline_us']:7.2f}  ratio {r['ratio']:.3f}\")" "$OUT/bench_${v}_$r.json" $v >> "$OUT/bench.txt" 2>&1
  done
done
timeout 60 python3 -m dgemm_cli bench "$W"/more/s14_m1[126]* "$W"/more/s14_bf16* --json > "$OUT/bench_more.json" 2>> "$OUT/bench_err.txt"
timeout 60 python3 -m dgemm_cli bench "$W"/more/decode_dyn_1_64x4096x14336 --m 8,9,12,16,17 --json > "$OUT/bench_dyn.json" 2>> "$OUT/bench_err.txt"
stamp "bench"
{ grep -E "^--|mma" "$OUT/probe.txt"; cat "$OUT/bench.txt"; bench_rows "$OUT/bench_more.json" "$OUT/bench_dyn.json"; python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v), [(r['name'], (r.get('error') or '')[:200]) for r in v if not r.get('passed')])"; } | tee "$OUT/summary.txt"
pack 'summary\.txt|probe\.txt|bench\.txt|bench_more\.json|bench_dyn\.json|verify\.json'
