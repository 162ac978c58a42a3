"""The `deepgemm` command line: click wiring and printing around the stages, one module a command
(gen, build, verify and bench, tune, explain and doctor, random-specs, pack)."""

from __future__ import annotations

import click

from dgemm_cli import __version__
from dgemm_cli.cli.bisect_cmd import bisect
from dgemm_cli.cli.build_cmd import build_cmd
from dgemm_cli.cli.gen_cmd import gen
from dgemm_cli.cli.harness_cmds import bench, verify
from dgemm_cli.cli.inspect_cmds import doctor, explain
from dgemm_cli.cli.pack_cmd import pack
from dgemm_cli.cli.random_specs_cmd import random_specs_cmd
from dgemm_cli.cli.tune_cmd import tune

EPILOG = """\b
Exit codes: 0 ok, 1 a kernel failed (build or verify), 2 bad spec or command line,
3 no GPU (verify/bench of GPU folders), 4 no usable nvcc (or coqc for verify --formal) or nothing
built, 5 verify --formal proved what it could, but some kernel's family has no index model yet.
\b
Typical session:
  deepgemm gen specs/*.yaml            # -> generated/<name>/ (sources, plan.json, build files)
  deepgemm build                       # nvcc for each folder's arch; prints registers / spills per kernel
  deepgemm verify                      # on a GPU: random data, poisoned output, float64 reference
  deepgemm verify --formal             # no GPU: Coq proves each kernel's addresses in bounds, output once, full K
  deepgemm bench --json                # µs, TFLOP/s, GB/s and the ratio to cuBLAS (graph-timed)
  deepgemm tune specs/*.yaml --level 2 # on a GPU: measure candidates, keep the fastest; gen uses it
  deepgemm bisect SPEC                 # on a GPU: which --disable option makes a verify failure go away
  deepgemm gen specs/conv1x1_nchw.yaml --arch cpu -o host && deepgemm build host && deepgemm verify host
                                         # the same spec as C++17 + OpenMP for this machine: no GPU needed
  deepgemm pack qweight.npy --from gptq --to dg -k 4096 -n 11008 -o w.npy
                                       # a GPTQ/AWQ/int4 weight in deepgemm's packed layout (packing: dg)
\b
A spec (README.md has every key; specs/ has examples):
  name: up
  dtype: bf16                          # f16, bf16, f32; e4m3 (fp8) for A and B with `scales:`
  gemm: {m: 4096, n: 14336, k: 4096}   # or contraction: "nchw,kc->nkhw" with sizes: {...}
  operands: {A: {layout: row}, B: {layout: col}, C: {layout: row}}   # or strides / byte_strides, offset, align
  epilogue: [{bias: {letters: n}}, {activation: gelu_tanh}]          # optional: bias, scale, residual, ...
  scales: {A: {block: {k: 128}, layout: col}, B: {block: {n: 128, k: 128}}}   # e4m3 only: f32 scales as views,
                                       # also {per: channel} and {per: tensor}
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deepgemm")
def main() -> None:
    """Generate standalone CUDA kernels for GEMMs and tensor contractions over strided views,
    build them with nvcc, verify them on a GPU and benchmark them against cuBLAS; or, with
    --arch cpu, C++ for this host, verified and benchmarked against numpy here."""


for command in (gen, build_cmd, verify, bench, tune, explain, bisect, doctor, random_specs_cmd, pack):
    main.add_command(command)
