#!/usr/bin/env bash
# Session 7, device call 2 (nvidia-h200): programmatic dependent launch on the persistent hopper kernel.
# exp/old (generated at f86a0b9) against exp/pdl (this commit), same specs, model's picks: build, verify
# (seeds 1,2, --repeat 2), bench old/new/old/new in one process each; ncu of our two conv kernels.
source tools/device_lib.sh
timeout 240 python3 -m dgemm_cli build exp/old exp/pdl -j "$J" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"; stamp "build rc=$?"
timeout 120 python3 -m dgemm_cli verify exp/old exp/pdl --seeds 1,2 --repeat 2 --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
for r in 1 2; do
  for v in old pdl; do
    timeout 120 python3 -m dgemm_cli bench exp/$v --json > "$OUT/bench_${v}_$r.json" 2>> "$OUT/bench_err.txt"; stamp "bench $v $r rc=$?"
  done
done
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters"
for n in conv_nchw_8x256x56x56_k512 conv_nchw_32x64x56x56_k64; do
  h=$(ls exp/pdl/$n/build/sm_90a/*_harness)
  timeout 90 ncu -k "regex:^${n}_kernel" -c 1 $SECTIONS --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum "$h" verify --seeds 1 --samples 8 > "$OUT/ncu_ours_$n.txt" 2>&1
  echo "ncu ours $n rc=$?" >> "$OUT/log.txt"
done
stamp ncu
report
bench_rows "$OUT"/bench_*.json
for f in "$OUT"/ncu_ours_*.txt; do
  echo "== $(basename "$f")"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|dram__bytes|lts__t_bytes|No Eligible|Issued Warp|Stall|stall" "$f" | head -40
done
pack '(build|verify)\.json|bench_.*\.json'
