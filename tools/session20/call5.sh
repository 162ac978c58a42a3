#!/usr/bin/env bash
# Session 20, device call 5 (nvidia-h200): call 4's instrumented negative controls started only after the
# harness's writer completed, where pdl_probe.cu's reader overlapped it. (1) the probe with its reader in another
# translation unit, linked from a static library as a generated kernel is; (2) the instrumented controls with
# CUDA_MODULE_LOADING=EAGER and as built.
source tools/device_lib.sh
P=tools/session20
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -c $P/pdl_reader.cu -o "$W/pdl_reader.o" && ar rcs "$W/libreader.a" "$W/pdl_reader.o"
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -DREADER_ELSEWHERE $P/pdl_probe.cu "$W/libreader.a" -o "$W/pp2" 2>/dev/null
"$W/pp2" > "$OUT/probe_elsewhere.txt" 2>&1; stamp "probe elsewhere rc=$?"
dg gen --untuned specs/bench/decode_1x4096x4096.yaml specs/bench/decode_16x4096x14336.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1
python3 $P/variants.py "$W/g" "$W/nw" --variants none --nowait decode_1x4096x4096,decode_16x4096x14336 >> "$OUT/gen.txt" 2>&1
mkdir -p "$W/dbg"; python3 $P/chain_debug.py "$W/nw" "$W/dbg" decode_1x4096x4096_nowait decode_16x4096x14336_nowait >> "$OUT/gen.txt" 2>&1
rm -rf "$W"/dbg/*_dbgsync
timeout 200 python3 -m dgemm_cli build "$W"/dbg -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
for d in "$W"/dbg/*; do
  n=$(basename "$d")
  for mode in LAZY EAGER; do
    CUDA_MODULE_LOADING=$mode timeout 30 "$d/build/sm_90a/${n}_harness" verify --seeds 1 --samples 4 > "$OUT/dbg_${n}_$mode.txt" 2>&1
    echo "$n $mode rc=$? $(grep -c 'DBG kernel' "$OUT/dbg_${n}_$mode.txt") launches" >> "$OUT/dbg.txt"
    python3 - "$OUT/dbg_${n}_$mode.txt" <<'PY' >> "$OUT/dbg.txt"
import re, sys
w = None
for line in open(sys.argv[1]):
    m = re.match(r"DBG writer start (\d+) restore (\d+)", line)
    if m:
        w = (int(m.group(1)), int(m.group(2)))
    m = re.match(r"DBG kernel start (\d+)", line)
    if m and w:
        print(f"  kernel at {(int(m.group(1)) - w[0]) / 1e3:+9.1f} us, restore at {(w[1] - w[0]) / 1e3:+7.1f} us")
        w = None
PY
  done
done
stamp "debug"
{ cat "$OUT/probe_elsewhere.txt" "$OUT/dbg.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt'
