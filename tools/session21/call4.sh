#!/usr/bin/env bash
# Session 21, device call 4 (nvidia-h200): where [128,4096]x[4096,14336] spends its main loop. ncu --set full with
# per-instruction stall samples of hopper's pick (128x112, 2 consumers), the one-consumer 128x112 tiling, and the
# 64-row kernel as a reference; then cuBLAS's kernel for the 128-row product under the same ncu set (its name says
# its tile, cluster and stages).
source tools/device_lib.sh
ONE='"ctas_per_sm":1,"k_splits":1,"l2_promotion":"256B"'
dg gen --untuned specs/bench/up_128x14336x4096.yaml specs/bench/decode_64x4096x14336.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1
python3 tools/render_variant.py specs/bench/up_128x14336x4096.yaml "$W/t" hopper "{\"consumers\":1,\"block_m\":128,\"block_n\":112,\"stages\":6,$ONE}" _c1 >> "$OUT/gen.txt" 2>&1
stamp "gen rc=$?"
timeout 120 python3 -m dgemm_cli build "$W"/t -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ncu_full "$W"/t/up_128x14336x4096 "$W"/t/up_128x14336x4096_c1 "$W"/t/decode_64x4096x14336
stamp "ncu ours"
h="$W/t/up_128x14336x4096/build/sm_90a/up_128x14336x4096_harness"
timeout 90 ncu --set basic -c 12 "$h" bench --warmup 1 --reps 1 > "$OUT/ncu_names.txt" 2>&1
grep -E '^  [A-Za-z_].*\(' "$OUT/ncu_names.txt" | sort | uniq -c > "$OUT/kernel_names.txt"
stamp "names"
timeout 150 ncu -k regex:'nvjet|gemm|cutlass|xmma' -c 1 --set full --import-source no -o "$W/cublas" "$h" bench --warmup 1 --reps 1 > "$OUT/ncu_run_cublas.txt" 2>&1
ncu --import "$W/cublas.ncu-rep" --page details --print-details all > "$OUT/ncu_details_cublas.txt" 2>&1
stamp "ncu cublas"
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import csv, glob, io, re, sys
out = sys.argv[1]
keys = ("Duration", "DRAM Throughput", "L2 Cache Throughput", "Memory Throughput", "Compute (SM) Throughput",
        "Registers Per Thread", "Shared Memory Configuration Size", "Achieved Occupancy", "Grid Size", "Cluster Size",
        "L1/TEX Hit Rate", "L2 Hit Rate", "Issue Slots Busy", "Executed Ipc Active")
for path in sorted(glob.glob(f"{out}/ncu_details_*.txt")):
    print("==", path.rsplit("/", 1)[-1])
    text = open(path, errors="replace").read()
    m = re.search(r"^  (\S.*?)\s+\(\d+, \d+, \d+\)x", text, re.M)
    print("  kernel:", m.group(1)[:150] if m else "?")
    for line in text.splitlines():
        s = line.strip()
        if any(s.startswith(k) for k in keys):
            print("  ", re.sub(r"\s{2,}", "  ", s))
for path in sorted(glob.glob(f"{out}/ncu_sass_*.csv")):
    print("== stalls", path.rsplit("/", 1)[-1])
    rows = list(csv.reader(open(path, errors="replace")))
    hdr = next((i for i, r in enumerate(rows) if "Source" in r), None)
    if hdr is None:
        print("  no table"); continue
    h = rows[hdr]
    si = h.index("Source")
    col = next((i for i, c in enumerate(h) if c.startswith("Warp Stall Sampling (All")), None)
    if col is None:
        print("  columns:", h[:12]); continue
    body = [r for r in rows[hdr + 1:] if len(r) > col]
    def num(x):
        try: return float(x.replace(",", ""))
        except ValueError: return 0.0
    total = sum(num(r[col]) for r in body) or 1
    for r in sorted(body, key=lambda r: -num(r[col]))[:14]:
        print(f"  {100 * num(r[col]) / total:5.1f}%  {r[si][:110]}")
PY
cat "$OUT/kernel_names.txt" "$OUT/summary.txt"
pack 'summary\.txt|kernel_names\.txt|ncu_details_cublas\.txt|ncu_details_up_128x14336x4096\.txt'
