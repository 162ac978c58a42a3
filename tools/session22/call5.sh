#!/usr/bin/env bash
# Session 22, device call 5 (nvidia-h200): why does our A multicast leave L2's reads where they were (call 4's ncu:
# 6.61M read sectors against 6.52M without it, where cuBLAS's multicast reads exactly A/2 fewer than A + B)? The
# 128-row pick beside multicast variants: as in calls 2 and 4 (each block half of A's box); with A's map
# without L2 promotion (_apn); one block loading the whole box for both (_one). ncu at boost clocks of L2's reads by
# source and the bytes into the SMs, then a bench of the four, 2 rounds; all verified (seed 1).
source tools/device_lib.sh
dg gen --untuned specs/bench/up_128x14336x4096.yaml -o "$W/p" > "$OUT/gen.txt" 2>&1
python3 tools/session22/multicast.py "$W/p" "$W/p" up_128x14336x4096=2 >> "$OUT/gen.txt" 2>&1
mkdir -p "$W/one"; ln -s "$W/p/up_128x14336x4096_mc2" "$W/one/"
python3 tools/session19/copy_renamed.py "$W/one" "$W/p" _apn >> "$OUT/gen.txt" 2>&1
python3 tools/session19/copy_renamed.py "$W/one" "$W/p" _one >> "$OUT/gen.txt" 2>&1
python3 - "$W/p" >> "$OUT/gen.txt" 2>&1 <<'PY'
import re, sys
from pathlib import Path
p = Path(sys.argv[1])
apn = p / "up_128x14336x4096_mc2_apn" / "up_128x14336x4096_mc2_apn.cu"
t, n = re.subn(r"(bool encode_a\(CUtensorMap\* map, const void\* view\) \{\n(?:[^\n]*\n){5}[^\n]*)CU_TENSOR_MAP_L2_PROMOTION_L2_256B",
               r"\1CU_TENSOR_MAP_L2_PROMOTION_NONE", apn.read_text(), count=1)
assert n == 1; apn.write_text(t)
one = p / "up_128x14336x4096_mc2_one" / "up_128x14336x4096_mc2_one.cu"
t = one.read_text()
old = re.search(r"( *)tma_load_2d_multicast\([^;]*;\n", t).group(0)
ind = re.match(r" *", old).group(0)
new = (f"{ind}if (rank == 0)  // one block loads A's whole box for the cluster\n"
       f"{ind}  tma_load_2d_multicast(smem + A_OFFSET + stage * A_STAGE_BYTES, &tmap_a, &full[stage], "
       "uint16_t((1u << MULTICAST) - 1), k0, tile.m0);\n")
t = t.replace(old, new)
t, n = re.subn(r"const cuuint32_t box\[2\] = \{ 64, 128 / MULTICAST \};", "const cuuint32_t box[2] = { 64, 128 };", t, count=1)
assert n == 1; one.write_text(t)
print("patched _apn and _one")
PY
ls "$W/p" >> "$OUT/gen.txt"
build_verify 1 "$W"/p/*
M=gpu__time_duration.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum
for d in "$W"/p/*; do
  n=$(basename "$d"); h="$d/build/sm_90a/${n}_harness"
  timeout 60 ncu --clock-control none -k "regex:^${n}_kernel" -c 3 --metrics "$M" --csv "$h" bench --warmup 2 --reps 2 > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_err_$n.txt"
  stamp "ncu $n rc=$?"
done
python3 - "$OUT" > "$OUT/ncu_summary.txt" <<'PY'
import csv, glob, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"')) if r.get("ID") == "2"]
    print("==", path.rsplit("/", 1)[-1])
    for r in rows:
        print(f"  {r.get('Metric Name', ''):62s} {r.get('Metric Unit', ''):8s} {r.get('Metric Value', '')}")
PY
bench_rounds 2 60 "$W"/p/*
bench_rows "$OUT"/bench_*.json | sort -k2,2 -k1,1 > "$OUT/bench_rows.txt"
{ cat "$OUT/failures.txt"; python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('verified', sum(x['passed'] for x in r), 'of', len(r))" "$OUT/verify.json"
  cat "$OUT/bench_rows.txt" "$OUT/ncu_summary.txt"; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json'
