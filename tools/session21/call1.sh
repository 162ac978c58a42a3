#!/usr/bin/env bash
# Session 21, device call 1 (nvidia-h200): hopper's B boxes prefetched into L2 a fixed number of k-iterations ahead
# of their loads inside the producer's loop (tools/session21/lookahead.py: S/2, S, 2S for S = the plan's stages),
# each beside the kernel as planned, benched alternately: 16, 64, 128 rows at N = 14336 (and 128 rows with one
# consumer of 128 rows), the K-split kernel at [64,4096]x[4096,4096], the N = 14336 run-time artifact; every
# variant verified. Then session 20's untimed rule (call 7 there): grids of several tiles a block skip the
# prefetch before the wait, each beside itself with no prefetch (_old).
source tools/device_lib.sh
LA="specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml specs/bench/up_128x14336x4096.yaml
  specs/bench/up_128x14336x4096.yaml@_c1@{\"consumers\":1,\"block_m\":128,\"block_n\":112,\"stages\":6,\"ctas_per_sm\":1,\"k_splits\":1,\"l2_promotion\":\"256B\"}
  specs/bench/decode_64x4096x4096.yaml"
# shellcheck disable=SC2086
python3 tools/session21/lookahead.py "$W/la" $LA --ahead S/2,S,2S > "$OUT/gen.txt" 2>&1; stamp "gen la rc=$?"
python3 tools/session21/lookahead.py "$W/dyn" specs/bench/decode_dyn_1-64x4096x14336.yaml --ahead S,2S >> "$OUT/gen.txt" 2>&1
stamp "gen dyn rc=$?"
S="specs/bench/down_4096x4096x14336.yaml specs/bench/conv_nchw_8x256x56x56_k512.yaml"
# shellcheck disable=SC2086
dg gen --untuned $S -o "$W/rule" >> "$OUT/gen.txt" 2>&1; stamp "gen rule rc=$?"
python3 tools/session20/variants.py "$W/rule" "$W/rulevar" --variants _old >> "$OUT/gen.txt" 2>&1
timeout 300 python3 -m dgemm_cli build "$W"/la "$W"/dyn "$W"/rule "$W"/rulevar -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify "$W"/la "$W"/dyn "$W"/rule --seeds 1 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
stamp "verify rc=$?"
FIXED=$(ls -d "$W"/la/* | sort -t/ -k5)
DYN=$(ls -d "$W"/dyn/* | sort -t/ -k5)
RULE=$(ls -d "$W"/rule/* "$W"/rulevar/* | sort -t/ -k5)
for r in 1 2 3; do
  # shellcheck disable=SC2086
  timeout 90 python3 -m dgemm_cli bench $FIXED --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt 3 ]; then
    # shellcheck disable=SC2086
    timeout 60 python3 -m dgemm_cli bench $DYN --m 16,32,64 --json > "$OUT/bench_dyn_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench dyn r$r rc=$?"
    # shellcheck disable=SC2086
    timeout 60 python3 -m dgemm_cli bench $RULE --json > "$OUT/bench_rule_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench rule r$r rc=$?"
  fi
done
mkdir -p "$W/t2" && cp "$OUT"/bench_rule_*.json "$W/t2/" && for f in "$W"/t2/bench_rule_*.json; do mv "$f" "${f/rule_/}"; done
{ python3 tools/session20/table.py "$OUT" | grep -v "bench_others\|verify_nowait"; echo "--- rule"; python3 tools/session20/table.py "$W/t2" | grep -v "bench_others\|verify"; } > "$OUT/summary.txt"
failures "$OUT/verify.json" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
pack 'summary\.txt|verify\.json|bench_1\.json|bench_dyn_1\.json'
