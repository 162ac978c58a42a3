#!/usr/bin/env bash
# Session 19, device call 1 (nvidia-h200): what the hopper decode kernel's tail costs at N = 14336, and whether a
# dependent launch or two tiles a block hide it. Session 17 put 1.0-1.8 µs of [16 / 64,4096]x[4096,14336] in C's
# stores after the last weight bytes (one 64x112 tile a block, 128 blocks: every block stores at once, then the
# grid completes). Variants, each generated then patched, verified (seeds 1, 2), benched in turn, 3 rounds:
#   pick      the model's plan (64x112, 8 stages; up_128: 128x112, 2 consumers)
#   pdl       the pick launched dependent (the template does so only when the grid takes every block slot),
#             its producer's trigger after its last load as generated
#   pdlx      the same, no explicit trigger: the next grid is let in as each block exits
#   n64       64x64 tiles, 8 stages: 224 tiles on 132 blocks, so most blocks store their first tile while
#             their second streams (a full grid: launched dependent by the template's own rule)
#   n64np     n64 launched plain; n64x: n64 with the trigger at block exit
#   whole     the pick with session 17's whole-tile staging (warps past M skip), M = 16 only
source tools/device_lib.sh
source tools/session19/lib.sh
V=$W/v
S16=specs/bench/decode_16x4096x14336.yaml; S64=specs/bench/decode_64x4096x14336.yaml; U=specs/bench/up_128x14336x4096.yaml
rv() { python3 tools/render_variant.py "$1" "$V" hopper "$2" "$3" >> "$OUT/gen.txt" 2>&1 || stamp "variant $3 failed"; }
cu() { echo "$V/$1/$1.cu"; }
pdl_on() { sed -i 's/config.numAttrs = (grid == resident) ? 1 : 0;/config.numAttrs = 1;/' "$1"; grep -q "config.numAttrs = 1;" "$1" || stamp "pdl_on failed $1"; }
pdl_off() { sed -i 's/config.numAttrs = (grid == resident) ? 1 : 0;/config.numAttrs = 0;/' "$1"; grep -q "config.numAttrs = 0;" "$1" || stamp "pdl_off failed $1"; }
no_trigger() { sed -i '/griddepcontrol.launch_dependents/d' "$1"; ! grep -q launch_dependents "$1" || stamp "no_trigger failed $1"; }
PICK='{"block_m":64,"block_n":112,"consumers":1,"ctas_per_sm":1,"stages":8,"k_splits":1,"l2_promotion":"none"}'
N64='{"block_m":64,"block_n":64,"consumers":1,"ctas_per_sm":1,"stages":8,"k_splits":1,"l2_promotion":"none"}'
UPPICK='{"block_m":128,"block_n":112,"consumers":2,"ctas_per_sm":1,"stages":6,"k_splits":1,"l2_promotion":"256B"}'
for s in 16 64; do
  S=$([ $s = 16 ] && echo $S16 || echo $S64); n=decode_${s}x4096x14336
  for v in pick pdl pdlx; do rv $S "$PICK" _$v; done
  for v in n64 n64np n64x; do rv $S "$N64" _$v; done
  pdl_on "$(cu ${n}_pdl)"; pdl_on "$(cu ${n}_pdlx)"; no_trigger "$(cu ${n}_pdlx)"
  pdl_off "$(cu ${n}_n64np)"; no_trigger "$(cu ${n}_n64x)"
done
rv $S16 "$PICK" _whole; python3 tools/session17/epi_patch.py whole "$(cu decode_16x4096x14336_whole)" >> "$OUT/gen.txt" 2>&1 || stamp "whole failed"
for v in pick pdl pdlx; do rv $U "$UPPICK" _$v; done
pdl_on "$(cu up_128x14336x4096_pdl)"; pdl_on "$(cu up_128x14336x4096_pdlx)"; no_trigger "$(cu up_128x14336x4096_pdlx)"
grep -c "numAttrs = 1;\|numAttrs = 0;\|grid == resident" "$V"/*/*[0-9a-z].cu | grep -v harness >> "$OUT/gen.txt"
variants_report 150 "$V"/*
