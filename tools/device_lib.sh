# Sourced by the device-call scripts (tools/session*/call*.sh), run from a checkout on the device machine:
# $OUT (what comes back), $W (scratch), dg (deepgemm from the checkout), stamp (elapsed-time log lines), J (cores),
# env.txt (date, GPUs, commit); then `report` prints tools/gpu_summary.py's table and `pack KEEP` tars every
# file of $OUT whose name does not match the regex KEEP into logs.tgz (at most 8 files come back).
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
W=$(mktemp -d); export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
J=$(nproc)
dg() { python3 -m dgemm_cli "$@"; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/log.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; echo "commit ${DG_COMMIT:-?}"; echo "$J cores"; } > "$OUT/env.txt"
report() { python3 tools/gpu_summary.py "$OUT"; }
pack() {
  local keep="^($1)\$|^logs\\.tgz\$"
  # shellcheck disable=SC2046
  tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -Ev "$keep")
  (cd "$OUT" && ls | grep -Ev "$keep" | xargs -r rm -f)
}
# One line a row of each bench JSON given: file, kernel, µs (graph-replayed and stream), cuBLAS µs, ratio.
bench_rows() {
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        print(f"{path.rsplit('/', 1)[-1]:16s} {r['name']:40s} {r['us']:8.2f} us (stream {r['us_stream']:7.2f})  "
              f"cuBLAS {r['baseline_us']:8.2f}  ratio {r['ratio']:.3f}")
PY
}
# compute-sanitizer memcheck, racecheck and synccheck on each generated directory given (its harness's verify,
# seed 1): logs san_<tool>_<name>.txt and one line a run in sanitize.txt.
sanitize() {
  local d h n tool
  for d in "$@"; do
    h=$(ls "$d"/build/sm_90a/*_harness); n=$(basename "$d")
    for tool in memcheck racecheck synccheck; do
      timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 "$h" verify --seeds 1 --samples 16 > "$OUT/san_${tool}_$n.txt" 2>&1
      echo "$tool $n rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_${tool}_$n.txt" | tail -1)" >> "$OUT/sanitize.txt"
    done
  done
}
# ncu --set full of each generated directory's own kernel (its harness's verify, seed 1), then from the saved
# report: the details page (ncu_details_<name>.txt), the raw metrics (ncu_raw_<name>.csv) and the stall samples
# per SASS instruction (ncu_sass_<name>.csv).
ncu_full() {
  local d h n
  for d in "$@"; do
    h=$(ls "$d"/build/sm_90a/*_harness); n=$(basename "$d")
    timeout 120 ncu -k "regex:^${n}_kernel" -c 1 --set full --import-source no -o "$W/$n" "$h" verify --seeds 1 --samples 8 > "$OUT/ncu_run_$n.txt" 2>&1
    echo "ncu $n rc=$?" >> "$OUT/log.txt"
    ncu --import "$W/$n.ncu-rep" --page details --print-details all > "$OUT/ncu_details_$n.txt" 2>&1
    ncu --import "$W/$n.ncu-rep" --page raw --csv > "$OUT/ncu_raw_$n.csv" 2>&1
    ncu --import "$W/$n.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_sass_$n.csv" 2>&1
  done
}
# One line a kernel that failed in each verify JSON given: FAIL, file, name, the error's start.
failures() {
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        if not r.get("passed"):
            print("FAIL", path.rsplit("/", 1)[-1], r["name"], (r.get("error") or "")[:200])
PY
}
# Issue 7's decode benchmarks (fixed sizes) and run-time artifacts.
ISSUE7_DECODE="specs/bench/decode_1x4096x128.yaml specs/bench/decode_1x2048x512.yaml specs/bench/decode_1x4096x14336.yaml
  specs/bench/decode_8x4096x14336.yaml specs/bench/decode_16x4096x14336.yaml specs/bench/decode_64x4096x14336.yaml
  specs/bench/up_128x14336x4096.yaml specs/bench/decode_1x4096x4096.yaml specs/bench/decode_8x4096x4096.yaml
  specs/bench/decode_16x4096x4096.yaml specs/bench/decode_64x4096x4096.yaml"
ISSUE7_DYNAMIC="specs/bench/decode_dyn_1-64x4096x128.yaml specs/bench/decode_dyn_1-64x4096x4096.yaml
  specs/bench/decode_dyn_1-64x4096x14336.yaml"
# The picks a model change moved (tools/pick_survey.py --diff): gen_new_old SPECS_TXT BEFORE_JSON generates each
# spec of SPECS_TXT as the model picks it now ($W/new) and as BEFORE_JSON recorded it ($W/old, render_before.py).
gen_new_old() {
  local -a specs
  read -r -a specs < "$1"
  dg gen --untuned "${specs[@]}" -o "$W/new" > "$OUT/gen.txt" 2>&1; stamp "gen new rc=$?"
  python3 tools/render_before.py "$2" "$W/old" "${specs[@]}" >> "$OUT/gen.txt" 2>&1; stamp "gen old rc=$?"
}
# build_verify SEEDS DIR...: build the generated directories, verify them (build.json, verify.json, failures.txt).
build_verify() {
  local seeds=$1; shift
  timeout 300 python3 -m dgemm_cli build "$@" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
  timeout 200 python3 -m dgemm_cli verify "$@" --seeds "$seeds" --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"
  stamp "verify rc=$?"
  failures "$OUT/verify.json" | tee "$OUT/failures.txt"
}
# bench_rounds ROUNDS TIMEOUT DIR... [bench options]: `deepgemm bench` of the directories ROUNDS times in turn
# (bench_1.json ... bench_ROUNDS.json), each run within TIMEOUT seconds.
bench_rounds() {
  local rounds=$1 limit=$2 r; shift 2
  for r in $(seq 1 "$rounds"); do
    timeout "$limit" python3 -m dgemm_cli bench "$@" --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench r$r rc=$?"
  done
}
# bench_new_old ROUND: $W/new then $W/old benched (bench_new_ROUND.json, bench_old_ROUND.json).
bench_new_old() {
  local v
  for v in new old; do
    timeout 150 python3 -m dgemm_cli bench "$W/$v"/* --json > "$OUT/bench_${v}_$1.json" 2>> "$OUT/bench_err.txt"
    stamp "bench $v r$1 rc=$?"
  done
}
# ncu_times REGEX LAUNCHES DIR...: ncu one kernel at a time (caches flushed, boost clocks) of the kernels whose
# demangled names (namespace included) match REGEX, LAUNCHES launches of each generated directory's harness verify
# (ncu_<name>.csv); then ncu_summary.txt, a line a directory: the median of all launches but the first (a first
# launch under ncu runs 0.7-3 µs slow), each launch, and the kernels matched.
ncu_times() {
  local regex=$1 launches=$2 d n; shift 2
  for d in "$@"; do
    n=$(basename "$d")
    timeout 60 ncu --clock-control none --kernel-name-base demangled -k "regex:$regex" -c "$launches" \
      --metrics gpu__time_duration.sum --csv "$d/build/sm_90a/${n}_harness" verify --seeds "$(seq -s, 1 "$launches")" \
      --samples 8 > "$OUT/ncu_$n.csv" 2>> "$OUT/ncu_err.txt"
    stamp "ncu $n rc=$?"
  done
  python3 - "$OUT" > "$OUT/ncu_summary.txt" <<'PY'
import csv, glob, statistics, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"')) if r.get("Metric Name") == "gpu__time_duration.sum"]
    us = [float(r["Metric Value"].replace(",", "")) / 1000 for r in rows]
    names = sorted({r["Kernel Name"].split("(")[0][-44:] for r in rows})
    print(f"{path.rsplit('/', 1)[-1][4:-4]:34s} " + (f"median of 2-{len(us)} {statistics.median(us[1:]):6.2f} us: "
          + ", ".join(f"{u:.2f}" for u in us) + f"  {names}" if len(us) > 1 else "no rows"))
PY
}
# bench_fixed_dyn DIR...: issue 7's way of benching, in turn: the fixed-size directories 3 rounds (bench_R.json),
# the run-time ones (decode_dyn*) 2 rounds at 10 row counts (bench_dyn_R.json).
bench_fixed_dyn() {
  local -a fixed=() dyn=()
  local d r
  for d in "$@"; do case $(basename "$d") in decode_dyn*) dyn+=("$d") ;; *) fixed+=("$d") ;; esac; done
  for r in 1 2 3; do
    timeout 80 python3 -m dgemm_cli bench "${fixed[@]}" --json > "$OUT/bench_$r.json" 2>> "$OUT/bench_err.txt"
    stamp "bench fixed r$r rc=$?"
    if [ "$r" -lt 3 ] && [ ${#dyn[@]} -gt 0 ]; then
      timeout 70 python3 -m dgemm_cli bench "${dyn[@]}" --m 1,2,5,8,9,16,17,32,48,64 --json > "$OUT/bench_dyn_$r.json" \
        2>> "$OUT/bench_err.txt"
      stamp "bench dyn r$r rc=$?"
    fi
  done
}
