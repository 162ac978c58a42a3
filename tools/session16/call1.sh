#!/usr/bin/env bash
# Session 16, device call 1 (nvidia-h200). Two questions about hopper's decode kernel, which runs 1-1.8 µs over its
# own TMA read without math (28.5 µs at [16,4096]·[4096,14336]):
# 1. tools/session16/box_probe.cu: does the order in which a tile's boxes ask DRAM for the weight set the read speed
#    (CHUNKS 64-k pieces of each row a stage: as separate boxes, one 4-d box grouped by 8-row atoms, one 3-d box)?
# 2. Ablation of the generated kernels at M = 16 and 64 (N = 14336): copies patched without the wgmmas (nomath),
#    without the epilogue (noepi), without A's loads (noA), and both first two (bare); benched in turn, 2 rounds.
#    ncu --set full of the unpatched M = 16 kernel and of [64,4096]x[4096,4096]'s split kernel.
source tools/device_lib.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o "$W/box" tools/session16/box_probe.cu > "$OUT/probe_build.txt" 2>&1; stamp "probe build rc=$?"
B=specs/bench
DEC="$B/decode_16x4096x14336.yaml $B/decode_64x4096x14336.yaml"
dg gen --untuned $DEC -o "$W/base" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
nomath='s/^\( *\)wgmma_m64n\([0-9]*\)k16(acc\[mi\], desc_a(.*);$/\1;/'
noepi='s/const long long c_tile = \(.*\);/continue; const long long c_tile = \1;/'
noA='/tma_load_2d(smem + A_OFFSET/d; s/STAGE_TX_BYTES = \(A_BOX_ROWS \* BK \* 2\|A_STAGE_BYTES\) + B_STAGE_BYTES;/STAGE_TX_BYTES = B_STAGE_BYTES;/'
patch() {  # variant, sed scripts...
  local v=$1; shift
  cp -r "$W/base" "$W/$v"
  for f in "$W/$v"/*/*[0-9].cu; do for s in "$@"; do sed -i "$s" "$f"; done; done
}
patch nomath "$nomath"; patch noepi "$noepi"; patch noA "$noA"; patch bare "$nomath" "$noepi"
for v in nomath noepi noA bare; do diff -r "$W/base" "$W/$v" > "$OUT/diff_$v.txt"; done
# Each patch must have hit both kernels (a noA copy whose expect_tx still counts A's bytes would never complete).
for v in nomath noepi noA; do
  n=$(grep -c '^>' "$OUT/diff_$v.txt"); [ "$n" = 2 ] || { echo "patch $v changed $n lines, not 2: stopping" | tee -a "$OUT/log.txt"; exit 1; }
done
timeout 400 python3 -m dgemm_cli build "$W"/base "$W"/nomath "$W"/noepi "$W"/noA "$W"/bare -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 "$W/box" 2 > "$OUT/box.txt" 2>&1; stamp "probe rc=$?"
for r in 1 2; do
  for v in base nomath noepi noA bare; do
    timeout 60 python3 -m dgemm_cli bench "$W/$v"/decode_16x4096x14336 "$W/$v"/decode_64x4096x14336 --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench r$r $v"
  done
done
# [64,4096]x[4096,4096] (64x64 split 2, 0.975-0.98x): is its stream bound by L2 (A's 64-row boxes re-read by every
# tile, as many bytes as the weight's)? ncu beside the M = 16 kernel (not ablated: a split kernel's epilogue holds
# cluster barriers that a skipped epilogue would leave waiting).
dg gen --untuned $B/decode_64x4096x4096.yaml -o "$W/split" >> "$OUT/gen.txt" 2>&1
timeout 120 python3 -m dgemm_cli build "$W/split" -j "$J" > /dev/null 2>&1; stamp "build split rc=$?"
ncu_full "$W/base/decode_16x4096x14336" "$W/split/decode_64x4096x4096"; stamp "ncu"
report | tee "$OUT/summary.txt"
cat "$OUT/box.txt"
pack 'summary\.txt|box\.txt|build\.json|ncu_details_decode_16x4096x14336\.txt|ncu_details_decode_64x4096x4096\.txt'
