"""`deepgemm pack`: a quantized checkpoint's 4-bit weight (GPTQ, AWQ, or plain integers) in another packed layout,
deepgemm's `dg` above all (issue 42; dgemm_cli/quant.py does the work)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from dgemm_cli.cli.common import fail
from dgemm_cli.errors import PackError
from dgemm_cli.quant import SOURCES, TARGETS, repack, repack_zeros

HELP = """Repack a 4-bit weight W [k, n] (k the summed in_features, n the out_features) from a checkpoint's
layout into another: IN.npy (the layout --from names) to OUT.npy (--to's). No GPU needed.

\b
Layouts (docs/design/weight-only.md, "Packed 4-bit views"):
  gptq   qweight [ceil(k/8), n] int32, eight values of k a word, value 8w+j in bits 4j..4j+3
  awq    qweight [k, ceil(n/8)] int32, eight values of n a word, nibble j holding value
         (0, 2, 4, 6, 1, 3, 5, 7)[j] of the word's eight (AWQ's order_map)
  int8   plain [k, n], values -8..7 (written as int4 two's complement nibbles)
  uint8  plain [k, n], values 0..15
  dg     deepgemm's own: one dense 1-D run of ceil(n/16) * ceil(k/64) * 128 uint32 words, each
         lane's mma.m16n8k16 fragments of a 16 (n) x 64 (k) chunk in a 16-byte load, one word a
         16-k tile, lane t holding the chunk's k 16t..16t+15; zero nibbles past k and n (the
         decode kernel's layout)
\b
Examples:
  deepgemm pack qweight.npy --from gptq --to dg -k 4096 -n 11008 -o w_dg.npy \\
      --zeros qzeros.npy --zeros-out z.npy          # + GPTQ's qzeros, unpacked to uint8
  deepgemm pack qweight.npy --from awq --to dg -k 4096 -n 11008 -o w_dg.npy
  deepgemm pack w_int4.npy --from int8 --to dg -k 4096 -n 11008 -o w_dg.npy
  deepgemm pack w_u4.npy --from uint8 --to gptq -k 4096 -n 11008 -o qweight.npy
\b
The spec that reads the output (B is the weight [k, n]; scales: and zeros: as in the doc):
  operands: {B: {dtype: uint4, packing: dg, align: 16}}   # --to dg (int4 for --from int8); align: 16
                                                          # lets the tensor-core decode kernel (wqtc) run it
  operands: {B: {dtype: uint4, packing: gptq, layout: row}}   # --to gptq
  operands: {B: {dtype: uint4, packing: awq, layout: row}}    # --to awq

--zeros-out writes the zero points as uint8 [groups, n]: `zeros: {B: {dtype: uint8, ...}}`.
Prints one line (shapes and bytes in and out), or --json. Exit 2 for input that does not fit the
declared layout, k and n (the message names the argument and the fix).
"""


def _load(path: Path, argument: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise PackError(f"{path}", f"cannot be read as a .npy array ({err})",
                        f"save the {argument} with numpy.save (e.g. numpy.save(path, tensor.numpy()))") from err


def _save(path: Path, a: np.ndarray, option: str) -> None:
    """numpy.save to exactly `path` (numpy.save given a name appends .npy where it lacks one)."""
    try:
        with open(path, "wb") as f:
            np.save(f, a)
    except OSError as err:
        raise PackError(f"{option} {path}", f"cannot be written ({err.strerror})",
                        "name a file in a folder that exists and is writable") from err


def _side(path: Path, a: np.ndarray, layout: str) -> dict:
    return {"path": str(path), "layout": layout, "shape": list(a.shape), "dtype": str(a.dtype), "bytes": int(a.nbytes)}


def _text(side: dict) -> str:
    return f"{side['layout']} {side['shape']} {side['dtype']} ({side['bytes']} bytes)"


@click.command(name="pack", help=HELP)
@click.argument("in_path", metavar="IN.npy", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "source", type=click.Choice(SOURCES), required=True,
              help="IN.npy's layout: gptq, awq (packed int32 words as the checkpoint stores qweight), int8 or uint8 "
                   "(plain [k, n] values).")
@click.option("--to", "target", type=click.Choice(TARGETS), required=True,
              help="OUT.npy's layout: dg (deepgemm's, for `packing: dg`), gptq or awq.")
@click.option("-k", "k", type=click.IntRange(1), required=True, help="The weight's k: in_features, the summed size.")
@click.option("-n", "n", type=click.IntRange(1), required=True, help="The weight's n: out_features.")
@click.option("-o", "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the repacked weight (.npy).")
@click.option("--zeros", "zeros_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The checkpoint's qzeros [groups, ceil(n/8)] (gptq or awq, as --from), unpacked to --zeros-out.")
@click.option("--zeros-out", "zeros_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the zero points, uint8 [groups, n] (with --zeros).")
@click.option("--gptq-v1", is_flag=True,
              help="The GPTQ checkpoint is v1 (stores zero - 1): --zeros-out holds the stored value + 1, 1..16.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def pack(in_path: Path, source: str, target: str, k: int, n: int, out_path: Path, zeros_path: Path | None,
         zeros_out: Path | None, gptq_v1: bool, as_json: bool) -> None:
    try:
        if (zeros_path is None) != (zeros_out is None):
            raise PackError("--zeros" if zeros_path is None else "--zeros-out", "is missing",
                            "give --zeros QZEROS.npy and --zeros-out Z.npy together")
        if zeros_path is not None and source not in ("gptq", "awq"):
            raise PackError("--zeros", f"--from {source} has no packed qzeros",
                            "drop --zeros and --zeros-out (plain zero points need no repacking)")
        if gptq_v1 and source != "gptq":
            raise PackError("--gptq-v1", f"is for --from gptq, not {source}", "drop it")
        qweight = _load(in_path, "weight")
        try:
            out = repack(qweight, source, target, k, n)
        except PackError as err:
            raise PackError(f"{in_path}: {err.argument}", err.problem, err.fix) from err
        zeros = None
        if zeros_path is not None:
            qzeros = _load(zeros_path, "qzeros")
            groups = qzeros.shape[0] if qzeros.ndim == 2 and qzeros.shape[0] > 0 else 0
            if not groups:
                raise PackError(f"{zeros_path}", f"shape {list(qzeros.shape)} is not [groups, ceil(n/8)]",
                                "pass the checkpoint's qzeros for this weight")
            try:
                zeros = repack_zeros(qzeros, source, groups, n, gptq_v1)
            except PackError as err:
                raise PackError(f"{zeros_path}: {err.argument}", err.problem, err.fix) from err
        _save(out_path, out, "-o")
        if zeros is not None:
            assert zeros_out is not None
            _save(zeros_out, zeros, "--zeros-out")
    except PackError as err:
        fail(err)
        return
    summary = {"input": _side(in_path, qweight, source), "output": _side(out_path, out, target), "k": k, "n": n,
               "zeros": None}
    if zeros is not None:
        summary["zeros"] = {"input": _side(zeros_path, qzeros, source), "output": _side(zeros_out, zeros, "plain"),
                            "gptq_v1": gptq_v1}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    line = f"packed {in_path}: {_text(summary['input'])} -> {out_path}: {_text(summary['output'])}, k={k} n={n}"
    if zeros is not None:
        line += f"; zeros {zeros_path}: {_text(summary['zeros']['input'])} -> {zeros_out}: " \
                f"{_text(summary['zeros']['output'])}" + (" (v1: stored + 1)" if gptq_v1 else "")
    click.echo(line)
