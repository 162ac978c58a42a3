#!/usr/bin/env bash
# Session 11, device call 9 (nvidia-h200): correctness of random wide decode specs (`random-specs
# --wide-decode-share`, aebb95d): 60 fixed (seed 61) and 20 with run-time M (seed 62), A redrawn k-contiguous half
# the time; verify seeds 1, 2 with --repeat 2; compute-sanitizer on the first two tcgemv kernels drawn.
source tools/device_lib.sh
dg random-specs 60 -o "$W/rs" --seed 61 --small-m-share 1.0 --wide-decode-share 0.6 --a-vectors-share 0.5 > /dev/null
dg random-specs 20 -o "$W/rd" --seed 62 --small-m-share 1.0 --wide-decode-share 0.6 --a-vectors-share 0.5 --dynamic-share 1.0 > /dev/null
dg gen "$W"/rs/*.yaml "$W"/rd/*.yaml -o "$W/g" > "$OUT/gen.txt" 2>&1; stamp "gen rc=$? $(ls $W/g | wc -l) dirs"
grep -l '"family": "tcgemv"' "$W"/g/*/plan.json | xargs -n1 dirname | xargs -n1 basename > "$OUT/tcgemv_dirs.txt"
timeout 280 python3 -m dgemm_cli build "$W"/g -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 200 python3 -m dgemm_cli verify "$W"/g --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
sanitize $(head -2 "$OUT/tcgemv_dirs.txt" | sed "s|^|$W/g/|"); stamp "sanitize"
echo "tcgemv dirs: $(wc -l < "$OUT/tcgemv_dirs.txt") ($(tr '\n' ' ' < "$OUT/tcgemv_dirs.txt"))"
cat "$OUT/sanitize.txt"
python3 -c "
import json; v=json.load(open('$OUT/verify.json')); print('verify', sum(bool(r.get('passed')) for r in v), '/', len(v))"
failures "$OUT"/verify.json
pack '(build|verify)\.json|sanitize\.txt|tcgemv_dirs\.txt'
