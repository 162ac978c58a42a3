#!/usr/bin/env bash
# Session 27, device call 9 (nvidia-h200): the picks the model moved at 926f2b0+ (tools/session27/moved_specs.txt,
# from tools/pick_survey.py --diff over specs/, the session specs and 200 random specs of seed 27: K-split plans take
# two accumulator sets, two swapped specs leave the multicast) verified with seeds 1-2 in two processes;
# compute-sanitizer on the 64-row K-split kernel; the N = 4096 run-time artifact and [64,4096]x[4096,4096] as the model
# now plans them, benched 2 rounds at m = 41..64 where cuBLAS runs its fast kernel.
source tools/device_lib.sh
mapfile -t SPECS < tools/session27/moved_specs.txt
dg gen --untuned "${SPECS[@]}" -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$?"
grep -h "acc_chains = \|a_multicast = " "$W"/g/*/*.cu | sort | uniq -c > "$OUT/decisions.txt"
timeout 200 python3 -m dgemm_cli build "$W"/g/* -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
D=("$W"/g/*); H=$(( ${#D[@]} / 2 ))
timeout 150 python3 -m dgemm_cli verify "${D[@]:0:$H}" --seeds 1,2 --json > "$OUT/verify_a.json" 2> "$OUT/verify_err.txt" &
timeout 150 python3 -m dgemm_cli verify "${D[@]:$H}" --seeds 1,2 --json > "$OUT/verify_b.json" 2>> "$OUT/verify_err.txt" &
wait; stamp "verify done"
failures "$OUT/verify_a.json" "$OUT/verify_b.json" | tee "$OUT/failures.txt"
sanitize "$W/g/decode_64x4096x4096"
for r in 1 2; do
  timeout 60 python3 -m dgemm_cli bench "$W/g/decode_dyn_1_64x4096x4096" "$W/g/decode_64x4096x4096" --m 41,42,43,44,45,46,47,57,58,60,62,64 --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench r$r rc=$?"
done
{ python3 -c "import json,sys; v=json.load(open(sys.argv[1]))+json.load(open(sys.argv[2])); print(sum(r['passed'] for r in v), 'of', len(v), 'passed')" "$OUT/verify_a.json" "$OUT/verify_b.json"
  cat "$OUT/decisions.txt" "$OUT/failures.txt" "$OUT/sanitize.txt"
  python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(f"{sys.argv[1]}/bench_*.json")):
    for d in json.load(open(f)):
        rows = d.get("m_rows") or [d]
        print(f.rsplit("/", 1)[-1], d["name"], " ".join(f"{r.get('m', '-')}:{r['us']:.2f}/{r['baseline_us']:.2f}={r['ratio']:.3f}" for r in rows))
PY
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
pack 'summary\.txt|verify_a\.json|verify_b\.json|bench_1\.json|bench_2\.json'
