#!/usr/bin/env bash
# Issue 7's decode table against cuBLAS, run on a GPU machine from a checkout (no install needed):
#   tools/decode_bench.sh [ROUNDS]              (default 3: rounds of the fixed sizes; the run-time ones get ROUNDS - 1)
# gen (the model's picks) + build of the 11 fixed-size decode benchmarks and the 3 artifacts sized at run time
# (specs/bench/decode_*, up_128x14336x4096); then `deepgemm bench` of the fixed sizes (fixed_rR.json) and of the
# run-time artifacts at every m of 1..64 (every_m_rR.json), in turn. summary.txt: µs, cuBLAS µs and ratio of each
# fixed size a round; the least ratio of each artifact a round and the m below 1.0.
source "$(dirname "$0")/device_lib.sh"
ROUNDS=${1:-3}
# shellcheck disable=SC2086
dg gen --untuned $ISSUE7_DYNAMIC $ISSUE7_DECODE -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout "${T_BUILD:-600}" python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
stamp "build rc=$?"
fixed=$(ls -d "$W"/t/* | grep -v decode_dyn_)
for r in $(seq 1 "$ROUNDS"); do
  # shellcheck disable=SC2086
  timeout "${T_BENCH:-300}" python3 -m dgemm_cli bench $fixed --json > "$OUT/fixed_r$r.json" 2>> "$OUT/bench_err.txt"
  stamp "bench fixed r$r rc=$?"
  if [ "$r" -lt "$ROUNDS" ] || [ "$ROUNDS" = 1 ]; then
    timeout "${T_BENCH:-300}" python3 -m dgemm_cli bench "$W"/t/decode_dyn_* --m "$(seq -s, 1 64)" --json \
      > "$OUT/every_m_r$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench every m r$r rc=$?"
  fi
done
python3 - "$OUT"/fixed_r*.json "$OUT"/every_m_r*.json > "$OUT/summary.txt" <<'PY'
import json, sys
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1]
    for r in json.load(open(path)):
        if r.get("error"):
            print(f"{name} {r['name']}: ERROR {r['error'][:200]}")
            continue
        rows = r.get("m_rows") or [r]
        if len(rows) > 1:
            low = min(rows, key=lambda x: x["ratio"])
            below = [x["m"] for x in rows if x["ratio"] < 1.0]
            print(f"{name} {r['name']}: ratio {low['ratio']:.3f} at m = {low['m']} (.. {max(x['ratio'] for x in rows):.3f}); "
                  f"below 1.0 at m = {below or 'none'}; copy {r['copy_gbps']:.0f} GB/s")
        else:
            print(f"{name} {r['name']}: {r['us']:.2f} us cuBLAS {r['baseline_us']:.2f} ratio {r['ratio']:.3f} "
                  f"{r['gbps']:.0f} GB/s copy {r['copy_gbps']:.0f}")
PY
cat "$OUT/log.txt" "$OUT/summary.txt"
pack 'summary\.txt|fixed_r[0-9]*\.json|every_m_r[0-9]*\.json'
rm -rf "$W"
