#!/usr/bin/env bash
# Session 8, device call 2 (nvidia-h200): calibration for the launch floor and for 64 rows at N = 4096.
# Level-2 tunes (the cost model's 16 cheapest candidates a family, each verified on one seed, then timed):
# [1,4096]x[4096,128] and [1,2048]x[2048,512] on gemv and splitk; [64,4096]x[4096,4096] (exp/specs then, specs/bench now) on hopper
# and splitk. Then the run-time N = 4096 artifact at m = 16, 48, 64.
source tools/device_lib.sh
timeout 330 python3 -m dgemm_cli tune specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x2048x512.yaml \
  specs/bench/decode_64x4096x4096.yaml --level 2 --family gemv --family splitk --family hopper --budget 40 -j "$J" \
  -o "$W/tune" --db "$OUT/tuning.json" > "$OUT/tune.txt" 2>&1; stamp "tune rc=$?"
python3 -m dgemm_cli gen specs/bench/decode_dyn_1-64x4096x4096.yaml -o "$W/dyn" --untuned > /dev/null
timeout 100 python3 -m dgemm_cli build "$W"/dyn/* -j "$J" > "$OUT/build.txt" 2>&1; stamp "build rc=$?"
timeout 60 python3 -m dgemm_cli bench "$W"/dyn/* --m 16,48,64 --json > "$OUT/bench_dyn4096.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
python3 - "$OUT/tuning.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ents = d["entries"] if isinstance(d["entries"], list) else list(d["entries"].values())
for e in ents:
    ms = sorted((m for m in e["measured"] if m.get("us")), key=lambda m: m["us"])
    print(f"## {e['name']} {e.get('bucket', '')}: {len(ms)} timed")
    for m in ms[:12]:
        print(f"  {m['id']:10s} model {m['model_us']:6.2f} meas {m['us']:6.2f} {json.dumps(m['assignment'])}")
PY
bench_rows "$OUT"/bench_*.json
pack 'tuning\.json|bench_.*\.json|tune\.txt'
