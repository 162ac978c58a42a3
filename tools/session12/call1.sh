#!/usr/bin/env bash
# Session 12, call 1: tools/session11/next_wsprobe.sh (the warp-specialized probe tools/wsprobe.cu beside the
# model's picks and cuBLAS at N = 14336 / 4096, M = 5..16), with the logs packed.
source tools/session11/next_wsprobe.sh
pack "probe\.txt|bench\.json"
