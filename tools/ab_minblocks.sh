#!/usr/bin/env bash
# A/B on the GPU machine: square_bf16 and conv1x1_nchw as generated (registers capped at 128 a
# thread: __launch_bounds__(256, 2)) against the same code with the whole register file
# (__launch_bounds__(256, 1)). Verifies the variant, then benches both twice.
set -u
export PYTHONPATH=$PWD
W=$(mktemp -d)
python3 -m dgemm_cli gen specs/square_bf16.yaml specs/conv1x1_nchw.yaml -o "$W/capped" > /dev/null
for s in square_bf16 conv1x1_nchw; do
  mkdir -p "$W/uncapped"; cp -r "$W/capped/$s" "$W/uncapped/$s"
  # the plain cap, or the per-instantiation form used when a fallback gathers
  sed -i -e 's/__launch_bounds__(THREADS, 2)/__launch_bounds__(THREADS, 1)/' -e 's/? 2 : 1)/? 1 : 1)/' "$W/uncapped/$s/$s.cu"
done
python3 -m dgemm_cli build "$W/capped" "$W/uncapped" -j 4 | grep -E "regs|FAIL"
python3 -m dgemm_cli verify "$W/uncapped" | tail -3
for r in 1 2; do
  echo "capped:";   python3 -m dgemm_cli bench "$W/capped" --reps 100 | tail -2
  echo "uncapped:"; python3 -m dgemm_cli bench "$W/uncapped" --reps 100 | tail -2
done
