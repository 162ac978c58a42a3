#!/usr/bin/env bash
# Session 19, device call 3 (nvidia-h200): which hopper persistent grids a dependent launch slows. Call 2: faster
# at 64x112 (128 tiles, 4 SMs idle) and unsplit 64x64 (64 tiles, 68 idle), slower at 64x128 (112 tiles, 20 idle),
# 64x224 (64 tiles) and 64x224 over two tile rows (128 tiles, 4 idle). Tile width or idle SMs? Here, plain (p)
# against dependent (d), verified (seeds 1, 2), benched in turn, 3 rounds:
#   [16,4096]x[4096,16384]: 64x128 (the pick; 128 tiles, 4 idle), 64x112 (147 tiles: two waves)
#   [16,4096]x[4096,12288]: 64x96 (the pick; 128 tiles, 4 idle), 64x112 (110 tiles, 22 idle)
#   [16,4096]x[4096,14336] and [128,...] picks again.
source tools/device_lib.sh
source tools/session19/lib.sh
V=$W/v
S16=specs/bench/decode_16x4096x14336.yaml; U=specs/bench/up_128x14336x4096.yaml
A=tools/session19/specs/s19_16x4096x16384.yaml; B=tools/session19/specs/s19_16x4096x12288.yaml
rv() { python3 tools/render_variant.py "$1" "$V" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1 || stamp "variant $3 failed"; }
cu() { echo "$V/$1/$1.cu"; }
pdl() { sed -i "s/config.numAttrs = (grid == resident) ? 1 : 0;/config.numAttrs = $2;/" "$1"; grep -q "config.numAttrs = $2;" "$1" || stamp "pdl $2 failed $1"; }
H() { echo "{\"block_m\":$1,\"block_n\":$2,\"consumers\":$3,\"ctas_per_sm\":1,\"stages\":$4,\"k_splits\":1,\"l2_promotion\":\"$5\"}"; }
hv() { rv "$1" "$2" "_$4p"; rv "$1" "$2" "_$4d"; pdl "$(cu "$3_$4p")" 0; pdl "$(cu "$3_$4d")" 1; }
hv $A "$(H 64 128 1 8 none)" s19_16x4096x16384 n128
hv $A "$(H 64 112 1 8 none)" s19_16x4096x16384 n112
hv $B "$(H 64 96 1 8 none)" s19_16x4096x12288 n96
hv $B "$(H 64 112 1 8 none)" s19_16x4096x12288 n112
hv $S16 "$(H 64 112 1 8 none)" decode_16x4096x14336 pick
hv $U "$(H 128 112 2 6 256B)" up_128x14336x4096 pick
variants_report 150 "$V"/*
