#!/usr/bin/env bash
# Builds tests/lt_selftest/fp8_selftest.cu and runs it on a GPU: which e4m3 scale-mode pairs the installed cuBLASLt
# takes, templates/dg_cublaslt_fp8.cuh's alternative against a float64 reference, and the time of the DeepGEMM-format
# product at 4096x7168x16384 beside bf16 cuBLASLt. Where a cublasLt.h is found (the nvidia-cublas wheel beside
# PyTorch, or a toolkit's), abi_check.cu is compiled against it first. Prints the JSON report; exits with the
# self-test's code (0 pass, 1 a failure, 2 no cuBLASLt, 3 no GPU, 4 the build failed).
# Run from the repository root: bash tests/lt_selftest/run_fp8_on_gpu.sh
set -u
out=${OUT:-/tmp/dg_fp8_selftest}
mkdir -p "$out"
include=$(python3 -c 'import nvidia, pathlib; print(next((str(p.parent) for r in nvidia.__path__ for p in pathlib.Path(r).glob("*/include/cublasLt.h")), ""))' 2>/dev/null)
[ -z "$include" ] && [ -f /usr/local/cuda/include/cublasLt.h ] && include=/usr/local/cuda/include
if [ -n "$include" ]; then
  grep -n -E "CUBLASLT_MATMUL_DESC_[AB]_SCALE_(POINTER|MODE) =|MATRIX_SCALE_[A-Z0-9x_]+ =" "$include/cublasLt.h"
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates -I "$include" -c tests/lt_selftest/abi_check.cu \
    -o "$out/abi_check.o" && echo "abi_check against $include/cublasLt.h: ok" || echo "abi_check against $include: FAILED"
else
  echo "abi_check: no cublasLt.h here"
fi
nvcc -std=c++17 -O1 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -I templates \
  tests/lt_selftest/fp8_selftest.cu -o "$out/fp8_selftest" -ldl 2>"$out/build.log"
rc=$?
cat "$out/build.log"
[ $rc = 0 ] || { echo "build failed"; exit 4; }
if [ -z "${DEEPGEMM_CUBLASLT:-}" ] && [ -z "${DEEPGEMM_CUBLAS:-}" ]; then
  DEEPGEMM_CUBLASLT=$(python3 -c 'import nvidia, pathlib; print(next((str(p) for r in nvidia.__path__ for p in pathlib.Path(r).glob("*/lib/libcublasLt.so.1[23]")), ""))' 2>/dev/null)
  [ -z "$DEEPGEMM_CUBLASLT" ] && DEEPGEMM_CUBLASLT=$(find / -name 'libcublasLt.so.1[23]*' -not -path '/proc/*' 2>/dev/null | head -1)
  export DEEPGEMM_CUBLASLT
fi
echo "cuBLASLt: ${DEEPGEMM_CUBLASLT:-the dynamic loader search path}"
"$out/fp8_selftest" 2>"$out/stderr.txt" | tee "$out/report.json"
rc=${PIPESTATUS[0]}
cat "$out/stderr.txt"
python3 -c 'import json,sys; json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("json ok")' "$out/report.json" || echo "JSON INVALID"
echo "fp8_selftest rc=$rc"
exit $rc
