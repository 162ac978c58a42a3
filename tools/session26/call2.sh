#!/usr/bin/env bash
# Session 26, device call 2 (nvidia-h200). Call 1 timed the N = 4096 run-time artifact below cuBLAS at m = 44, 45
# (0.985-0.999), and its time rose from 11.19 to 11.3-11.8 µs exactly at the m whose *previous* m's cuBLAS ran its
# fast kernel (11.5 µs against 13.6): the bench times ours at m right after cuBLAS at m - 1. Is our time set by
# what ran before it? The harness timed directly, with the GPU's clocks, power and throttle reasons sampled every
# 50 ms (smi.csv) and a time mark a run (marks.txt):
#   run1: m = 33..64 as the bench runs (ours, then cuBLAS, each m in turn);
#   run2: m = 33..64 without the baseline (ours only);
#   run3: m = 41, 44, 45, 60, a process each (ours first in the process);
#   run4: run1 again.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/t" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
timeout 200 python3 -m dgemm_cli build "$W"/t/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
H=$(ls "$W"/t/*/build/sm_90a/*_harness)
DEEPGEMM_CUBLAS=$(python3 -c "from dgemm_cli.run import find_cublas; print(find_cublas() or '')"); export DEEPGEMM_CUBLAS
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 50 > "$OUT/smi.csv" 2>&1 &
SMI=$!
mark() { echo "$1 $(date +%s.%N)" >> "$OUT/marks.txt"; }
sleep 1
M33=$(seq -s, 33 64)
mark run1; timeout 100 "$H" bench --m "$M33" > "$OUT/run1.json" 2>> "$OUT/err.txt"; stamp "run1 rc=$?"
mark run2; timeout 100 "$H" bench --m "$M33" --baseline 0 > "$OUT/run2.json" 2>> "$OUT/err.txt"; stamp "run2 rc=$?"
for m in 41 44 45 60; do
  mark "run3_m$m"; timeout 60 "$H" bench --m "$m" > "$OUT/run3_m$m.json" 2>> "$OUT/err.txt"; stamp "run3 m=$m rc=$?"
done
mark run4; timeout 100 "$H" bench --m "$M33" > "$OUT/run4.json" 2>> "$OUT/err.txt"; stamp "run4 rc=$?"
mark end; sleep 0.5; kill "$SMI"
head -3 "$OUT/smi.csv"
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, glob, sys
out = sys.argv[1]
def rows(path):
    text = open(path).read()
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return f"unreadable: {text[:200]}"
for path in sorted(glob.glob(f"{out}/run*.json")):
    j = rows(path)
    if isinstance(j, str):
        print(path, j); continue
    rs = j.get("m_rows") or j.get("rows") or []
    print(path.rsplit("/", 1)[-1], " ".join(f"{r['m']}:{r.get('us', float('nan')):.2f}/{(r.get('baseline_us') or 0):.2f}" for r in rs))
PY
cat "$OUT/summary.txt"
pack 'summary\.txt|smi\.csv|marks\.txt|run1\.json|run2\.json|run4\.json'
