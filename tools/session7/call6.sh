#!/usr/bin/env bash
# Session 7, device call 6 (nvidia-h200): where the flat-rows conv kernels wait. ncu --set full and the SASS
# source page (stall samples per instruction) of the 8x256 model pick (128x256, 2 consumers), its 128x128
# two-blocks-an-SM tiling, and the 32x64 model pick.
source tools/device_lib.sh
timeout 200 python3 -m dgemm_cli build exp/new/conv_nchw_8x256x56x56_k512 exp/new/conv_nchw_8x256x56x56_k512_t128x128c1 exp/new/conv_nchw_32x64x56x56_k64 -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
ncu_full exp/new/conv_nchw_8x256x56x56_k512 exp/new/conv_nchw_8x256x56x56_k512_t128x128c1 exp/new/conv_nchw_32x64x56x56_k64
stamp ncu
for f in "$OUT"/ncu_details_*.txt; do echo "== $f"; grep -E "^    Duration|SM Active Cycles|Elapsed Cycles|Tensor Cycles Active  " "$f" | head -5; done
pack 'build\.json'
