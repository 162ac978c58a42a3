#!/usr/bin/env bash
# Session 19, device call 2 (nvidia-h200). Call 1 found the hopper decode pick 0.4-1.3 µs faster launched dependent
# (programmatic dependent launch, the producer's trigger after its last load) at 128 tiles on 132 SMs, where the
# seventh session had measured a persistent grid of 112 tiles 2 µs slower that way. Here:
#  1. Where the rule's boundary lies: hopper grids that leave 20 and 68 SMs idle ([16,4096]x[4096,14336] at 64x128,
#     112 tiles; 64x224, 64 tiles), 64x224 at [128,...] (128 tiles of two rows), [64,4096]x[4096,4096] unsplit 64x64
#     (64 tiles), and the run-time artifact's hopper bucket (m = 9..64), each plain and dependent; the pick at 16,
#     64 and 128 rows again.
#  2. The register-stream families launched dependent (tools/session19/pdl_patch.py: the wait first; the trigger at
#     once, or at block exit): gemv at one row and tcgemv at 8 and 16 rows, N = 14336 and 4096.
# All verified (seeds 1, 2), benched in turn, 3 rounds.
source tools/device_lib.sh
source tools/session19/lib.sh
V=$W/v
S1=specs/bench/decode_1x4096x14336.yaml; S8=specs/bench/decode_8x4096x14336.yaml; S16=specs/bench/decode_16x4096x14336.yaml
S64=specs/bench/decode_64x4096x14336.yaml; U=specs/bench/up_128x14336x4096.yaml
N1=specs/bench/decode_1x4096x4096.yaml; N8=specs/bench/decode_8x4096x4096.yaml; N16=specs/bench/decode_16x4096x4096.yaml
N64=specs/bench/decode_64x4096x4096.yaml; DYN=specs/bench/decode_dyn_1-64x4096x14336.yaml
rv() { python3 tools/render_variant.py "$1" "$V" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1 || stamp "variant $3 failed"; }
cu() { echo "$V/$1/$1.cu"; }
pdl_on() { sed -i 's/config.numAttrs = (grid == resident) ? 1 : 0;/config.numAttrs = 1;/' "$1"; grep -q "config.numAttrs = 1;" "$1" || stamp "pdl_on failed $1"; }
pdl_off() { sed -i 's/config.numAttrs = (grid == resident) ? 1 : 0;/config.numAttrs = 0;/' "$1"; grep -q "config.numAttrs = 0;" "$1" || stamp "pdl_off failed $1"; }
H() { echo "{\"block_m\":$1,\"block_n\":$2,\"consumers\":$3,\"ctas_per_sm\":1,\"stages\":$4,\"k_splits\":1,\"l2_promotion\":\"$5\"}"; }
# 1. hopper, plain (_p) and dependent (_d)
hv() {  # spec, assignment, name, suffix
  rv "$1" "$2" "_$4p"; rv "$1" "$2" "_$4d"; pdl_off "$(cu "$3_$4p")"; pdl_on "$(cu "$3_$4d")"
}
hv $S16 "$(H 64 112 1 8 none)" decode_16x4096x14336 pick
hv $S64 "$(H 64 112 1 8 none)" decode_64x4096x14336 pick
hv $U "$(H 128 112 2 6 256B)" up_128x14336x4096 pick
hv $S16 "$(H 64 128 1 8 none)" decode_16x4096x14336 n128
hv $S16 "$(H 64 224 1 5 none)" decode_16x4096x14336 n224
hv $U "$(H 64 224 1 5 256B)" up_128x14336x4096 m64n224
hv $N64 "$(H 64 64 1 8 none)" decode_64x4096x4096 unsplit
for v in p d; do
  dg gen --untuned $DYN -o "$W/dyn_$v" >> "$OUT/gen.txt" 2>&1
  python3 tools/session19/copy_renamed.py "$W/dyn_$v" "$V" "_$v" >> "$OUT/gen.txt" 2>&1
done
if [ "$(grep -c 'grid == resident' "$(cu decode_dyn_1_64x4096x14336_d)")" != 1 ]; then stamp "dyn: not one hopper launch"; fi
pdl_off "$(cu decode_dyn_1_64x4096x14336_p)"; pdl_on "$(cu decode_dyn_1_64x4096x14336_d)"
# 2. gemv / tcgemv: plain (_p, as generated), trigger at once (_s), at exit (_x)
for S in $S1 $S8 $N1 $N8 $N16; do
  n=$(basename "$S" .yaml)
  for v in p s x; do
    dg gen --untuned "$S" -o "$W/rs_$v" >> "$OUT/gen.txt" 2>&1
  done
done
for v in p s x; do python3 tools/session19/copy_renamed.py "$W/rs_$v" "$V" "_$v" >> "$OUT/gen.txt" 2>&1; done
python3 tools/session19/pdl_patch.py start "$V"/*_s/*_s.cu >> "$OUT/gen.txt" 2>&1 || stamp "pdl start patch failed"
python3 tools/session19/pdl_patch.py exit "$V"/*_x/*_x.cu >> "$OUT/gen.txt" 2>&1 || stamp "pdl exit patch failed"
variants_report 170 "$V"/* --m 9,16,32,64
