#!/usr/bin/env bash
# Builds tests/lt_selftest/lt_selftest.cu and runs it on a GPU: cuBLASLt's BIAS / RELU_BIAS / GELU_BIAS (and
# RELU, GELU) through templates/dg_cublaslt.cuh against a float64 reference. Prints the JSON report; exits
# with the self-test's code (0 all required cases pass, 1 a failure, 2 no cuBLASLt, 3 no GPU).
# Run from the repository root: bash tests/lt_selftest/run_on_gpu.sh
# Point DEEPGEMM_CUBLASLT at libcublasLt.so.* (or DEEPGEMM_CUBLAS at libcublas.so.* beside it); otherwise the
# script looks for one.
set -u
out=${OUT:-/tmp/dg_lt_selftest}
mkdir -p "$out"
nvcc -std=c++17 -O1 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -Wall \
  -I templates tests/lt_selftest/lt_selftest.cu -o "$out/lt_selftest" -ldl 2>"$out/build.log"
rc=$?
cat "$out/build.log"
[ $rc = 0 ] || { echo "build failed"; exit 4; }
if [ -z "${DEEPGEMM_CUBLASLT:-}" ] && [ -z "${DEEPGEMM_CUBLAS:-}" ]; then
  DEEPGEMM_CUBLASLT=$(find / -name 'libcublasLt.so.1[23]*' -not -path '/proc/*' 2>/dev/null | head -1)
  export DEEPGEMM_CUBLASLT
fi
echo "cuBLASLt: ${DEEPGEMM_CUBLASLT:-${DEEPGEMM_CUBLAS:-the dynamic loader search path}}"
"$out/lt_selftest" 2>"$out/stderr.txt" | tee "$out/report.json"
rc=${PIPESTATUS[0]}
cat "$out/stderr.txt"
python3 -c 'import json,sys; json.load(open(sys.argv[1])); print("json ok")' "$out/report.json" || echo "JSON INVALID"
if command -v compute-sanitizer >/dev/null; then  # each case on its own: the parent process runs no CUDA
  for c in $("$out/lt_selftest" --list); do
    compute-sanitizer --tool memcheck --error-exitcode 9 --log-file "$out/memcheck_$c.txt" "$out/lt_selftest" --case "$c" \
      >/dev/null 2>&1
    echo "memcheck $c rc=$? $(grep -h 'ERROR SUMMARY' "$out/memcheck_$c.txt")"
  done
fi
echo "lt_selftest rc=$rc"
exit $rc
