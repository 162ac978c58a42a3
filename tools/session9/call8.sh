#!/usr/bin/env bash
# Session 9, device call 8 (nvidia-h200): compute-sanitizer on the final gemv staging (c7cca0b): the launch-floor
# picks (split 1 and split 8 over a cluster), the N = 14336 one-row pick, and two random small-M gemv plans with
# more than one row (seed 21). Build, then memcheck / racecheck / synccheck each.
source tools/device_lib.sh
dg gen --untuned specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x4096x14336.yaml -o "$W/dec" > "$OUT/gen.txt" 2>&1
dg random-specs 40 -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
dg gen "$W"/rss/*.yaml -o "$W/randsmall" >> "$OUT/gen.txt" 2>&1
picks=$(python3 - "$W/randsmall" <<'PY'
import json, sys, pathlib
out = []
for d in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    plan = json.loads((d / "plan.json").read_text())
    text = json.dumps(plan)
    if '"family": "gemv"' in text and '"a_vec": 1,' not in text and '"m": 1,' not in text:
        out.append(str(d))
print(" ".join(out[:2]))
PY
)
echo "random picks: $picks" | tee -a "$OUT/log.txt"
timeout 200 python3 -m dgemm_cli build "$W"/dec $picks -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
sanitize "$W"/dec/decode_1x2048x512 "$W"/dec/decode_1x4096x128 "$W"/dec/decode_1x4096x14336 $picks; stamp "sanitize"
cat "$OUT/sanitize.txt"
pack 'build\.json|sanitize\.txt|log\.txt'
