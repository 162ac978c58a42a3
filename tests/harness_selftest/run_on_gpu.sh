#!/usr/bin/env bash
# Builds the self-test harness variants and runs them on a GPU, printing each JSON object and exit code.
# Run from the repository root: bash tests/harness_selftest/run_on_gpu.sh
# Point DEEPGEMM_CUBLAS at libcublas.so.* for the baseline; otherwise the script looks for one.
# SELFTEST_DIR: where the binaries go (default /tmp/dg_selftest); SELFTEST_PREBUILT=1 runs binaries built there
# before (by this script, on a machine without a GPU) instead of building them.
set -u
out=${SELFTEST_DIR:-/tmp/dg_selftest}
mkdir -p "$out"
flags="-std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -Wall -I templates -ldl"
src=tests/harness_selftest/selftest_harness.cu
for v in "case1:1:" "case2:2:" "case3:3:" "case4:4:" "case5:5:" "case6:6:" "case7:7:" "case8:8:" "case9:9:" \
         "broken1:1:-DSELFTEST_BROKEN=1" "broken1_batched:3:-DSELFTEST_BROKEN=1" "broken2:1:-DSELFTEST_BROKEN=2" \
         "broken3:1:-DSELFTEST_BROKEN=3" "broken4:4:-DSELFTEST_BROKEN=4" "broken5:4:-DSELFTEST_BROKEN=5" \
         "broken1_run_time:5:-DSELFTEST_BROKEN=1" "bad_baseline:1:-DSELFTEST_BAD_BASELINE" \
         "broken1_d:6:-DSELFTEST_BROKEN=1" "broken2_d:6:-DSELFTEST_BROKEN=2" "broken4_d:7:-DSELFTEST_BROKEN=4" \
         "broken6:6:-DSELFTEST_BROKEN=6" "broken6_run_time:7:-DSELFTEST_BROKEN=6" "broken6_in_place:8:-DSELFTEST_BROKEN=6" \
         "broken7:6:-DSELFTEST_BROKEN=7" "broken8:6:-DSELFTEST_BROKEN=8" "broken8_run_time:7:-DSELFTEST_BROKEN=8" \
         "broken9:6:-DSELFTEST_BROKEN=9" "dependent:3:-DSELFTEST_DEPENDENT" \
         "broken10:3:-DSELFTEST_DEPENDENT -DSELFTEST_BROKEN=10" "broken11:9:-DSELFTEST_BROKEN=11" \
         "broken12:9:-DSELFTEST_BROKEN=12" "case10:10:" "bad_pointers:10:-DSELFTEST_BAD_BASELINE"; do
  IFS=: read -r name c d <<<"$v"
  [ -n "${SELFTEST_PREBUILT:-}" ] || nvcc $flags -DSELFTEST_CASE=$c $d $src -o "$out/$name" 2>"$out/$name.build.log" &
done
wait
[ -n "${SELFTEST_PREBUILT:-}" ] || nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I templates \
  tests/harness_selftest/elementwise_speed.cu -o "$out/elementwise_speed" -ldl
cat "$out"/*.build.log
if [ -z "${DEEPGEMM_CUBLAS:-}" ]; then
  DEEPGEMM_CUBLAS=$(find / -name 'libcublas.so.1[23]*' -not -path '/proc/*' 2>/dev/null | head -1)
fi
echo "cuBLAS: ${DEEPGEMM_CUBLAS:-none found}"
export DEEPGEMM_CUBLAS
check() {  # check <expected rc> <binary> <args...>: runs it, prints stdout and whether it is one JSON object
  local want=$1; shift
  local stdout rc
  stdout=$("$@" 2>"$out/stderr.txt"); rc=$?
  echo "== $* -> rc=$rc (want $want)"
  echo "$stdout"
  python3 -c 'import json,sys; json.loads(sys.stdin.read()); print("   json ok")' <<<"$stdout" || echo "   JSON INVALID"
  [ "$rc" = "$want" ] || { echo "   UNEXPECTED RC"; cat "$out/stderr.txt"; }
}
check 0 "$out/case1" verify
check 0 "$out/case1" bench
check 0 "$out/case2" verify --seeds 7 --samples 4
check 0 "$out/case2" bench --reps 20
check 0 "$out/case3" verify --seeds 1
check 0 "$out/case3" bench
check 0 "$out/case4" verify --repeat 3
check 0 "$out/case4" verify --m 2,3,40 --seeds 5
check 0 "$out/case4" bench --reps 10
check 0 "$out/case5" verify
check 0 "$out/case5" bench --reps 10 --m 2,17,40
check 0 "$out/case6" verify --repeat 2
check 0 "$out/case6" bench --reps 10
check 0 "$out/case7" verify --repeat 2
check 0 "$out/case7" bench --reps 10 --m 2,17,40
check 0 "$out/case8" verify --repeat 2
check 0 "$out/case8" bench --reps 10
check 0 "$out/case9" verify --repeat 2
check 0 "$out/case9" bench --reps 10
check 0 "$out/case10" verify --repeat 2
check 0 "$out/case10" bench --reps 10   # both candidates run: "baseline_candidates" has no "error"
check 4 "$out/bad_pointers" bench --reps 5
check 2 "$out/case4" verify --m 41
check 2 "$out/case1" bench --m 4
check 1 "$out/broken1" verify
check 1 "$out/broken4" verify --seeds 1
check 1 "$out/broken5" verify --seeds 1
check 1 "$out/broken1_run_time" verify --seeds 1
check 1 "$out/broken1_batched" verify --seeds 1
check 1 "$out/broken2" verify --seeds 1
check 4 "$out/broken3" verify --seeds 1
check 1 "$out/broken1_d" verify --seeds 1
check 4 "$out/broken2_d" verify --seeds 1   # reads C when beta == 0: the C = nullptr probe faults
check 1 "$out/broken4_d" verify --seeds 1
check 1 "$out/broken6" verify --seeds 1
check 1 "$out/broken6_run_time" verify --seeds 1
check 1 "$out/broken6_in_place" verify --seeds 1
check 1 "$out/broken7" verify --seeds 1
check 1 "$out/broken8" verify --seeds 1
check 1 "$out/broken8_run_time" verify --seeds 1
check 4 "$out/broken9" verify --seeds 1
check 0 "$out/dependent" verify --repeat 2
check 1 "$out/broken10" verify --seeds 1
check 1 "$out/broken11" verify --seeds 1
check 1 "$out/broken12" verify --seeds 1
check 0 "$out/bad_baseline" bench --reps 5
check 2 "$out/case1" verify --reps 3
CUDA_VISIBLE_DEVICES= check 3 "$out/case1" verify
check 0 "$out/elementwise_speed"
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case1" verify >/dev/null 2>"$out/memcheck1.txt"; echo "memcheck case1 verify rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case2" bench --warmup 1 --reps 2 >/dev/null 2>"$out/memcheck2.txt"; echo "memcheck case2 bench rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case5" verify --seeds 1 >/dev/null 2>"$out/memcheck5.txt"; echo "memcheck case5 verify rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case5" bench --warmup 1 --reps 2 >/dev/null 2>"$out/memcheck5b.txt"; echo "memcheck case5 bench rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case6" verify --seeds 1 >/dev/null 2>"$out/memcheck6.txt"; echo "memcheck case6 verify rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case7" bench --warmup 1 --reps 2 >/dev/null 2>"$out/memcheck7b.txt"; echo "memcheck case7 bench rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case8" bench --warmup 1 --reps 2 >/dev/null 2>"$out/memcheck8b.txt"; echo "memcheck case8 bench rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case9" verify --seeds 1 >/dev/null 2>"$out/memcheck9.txt"; echo "memcheck case9 verify rc=$?"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$out/case10" bench --warmup 1 --reps 2 >/dev/null 2>"$out/memcheck10b.txt"; echo "memcheck case10 bench rc=$?"
  tail -n 3 "$out"/memcheck*.txt
fi
