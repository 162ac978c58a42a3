#!/usr/bin/env bash
# Session 7, device call 1 (nvidia-h200), run from a checkout: where the two 1x1-convolution benchmarks
# (issue 6) spend their time. Build the model's picks (and the conv tuning database's picks), verify,
# bench, then ncu our kernel and cuBLAS's kernel of each with the same sections.
source tools/device_lib.sh
dg gen specs/bench/conv_nchw_*.yaml -o "$W/conv" --untuned > "$OUT/gen.txt" 2>&1
dg gen specs/bench/conv_nchw_32x64x56x56_k64.yaml -o "$W/convt" --db docs/results/2026-11-30-h200-tuning-conv-level1-c4e6a68.json >> "$OUT/gen.txt" 2>&1
mv "$W/convt/conv_nchw_32x64x56x56_k64" "$W/convt/conv_nchw_32x64x56x56_k64_tuned"
stamp gen
timeout 200 python3 -m dgemm_cli build "$W/conv" "$W/convt" -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 90 python3 -m dgemm_cli verify "$W/conv" "$W/convt" --seeds 1,2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
timeout 120 python3 -m dgemm_cli bench "$W/conv" "$W/convt" --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
METRICS="--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_global_st.sum"
for d in "$W"/conv/*/ "$W"/convt/*/; do
  n=$(basename "$d"); h=$(ls "$d"build/sm_90a/*_harness)
  timeout 60 ncu -k "regex:_kernel" -c 1 $SECTIONS $METRICS "$h" verify --seeds 1 --samples 8 > "$OUT/ncu_ours_$n.txt" 2>&1
  echo "ncu ours $n rc=$?" >> "$OUT/log.txt"
  timeout 90 ncu -k "regex:nvjet|xmma|cutlass|gemm|sm90" -c 1 $SECTIONS $METRICS "$h" bench --warmup 1 --reps 1 > "$OUT/ncu_cublas_$n.txt" 2>&1
  echo "ncu cublas $n rc=$?" >> "$OUT/log.txt"
done
stamp ncu
report
for f in "$OUT"/ncu_*.txt; do
  echo "== $(basename "$f")"
  grep -E "^  [a-zA-Z_:]+.*_kernel|^  nvjet|^  sm90|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Grid Size|Block Size|Cluster Size|Registers Per|Achieved Occupancy|dram__bytes|lts__t_bytes|gmma_cycles|Dynamic Shared|Waves Per SM|No Eligible|Issued Warp" "$f" | head -30
done
pack '(build|verify|bench)\.json'
