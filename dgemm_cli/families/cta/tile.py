"""The `cta` family's block tile geometry (pure): the instructions, the shared-memory tiles of a stage, the
threads of a block and the elements a loader moves, read by the tiling graph, the cost model and the plan."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from dgemm_cli.constraints import Assignment
from dgemm_cli.views import OperandFacts

MMA = "mma.sync.m16n8k16"
FFMA = "ffma"
SMEM_PAD_BYTES = 16  # one 16-byte vector of padding per shared-memory row: conflict-free ldmatrix/cp.async
REGISTERS_PER_SM = 65536  # every arch in the table
FULL_REGISTER_FILE = 255  # the most registers one thread can have
OTHER = {"A": "m", "B": "n"}  # the non-k role of each input
# Loader kinds. cp_async: vector copies, asynchronous. gather: element loads staged in registers across
# the math. transpose (FFMA): vector loads along the view's stride-1 k, staged in registers and stored
# transposed into the [k][m] / [k][n] tile the FFMA loop reads. gather_direct: element loads stored at
# once (only as a run-time fallback).
STAGED = ("gather", "transpose")  # kinds that hold the next k-tile in registers across the math
# FFMA's `transpose_depth`: the k-tiles a transposing loader holds in registers at once, one register set each
# (dg/cta.cuh: LoadTranspose's kDepth). 2 lets a k-tile's loads land under two k-tiles of math; the set is issued
# STAGES - 1 k-tiles ahead and stored one k-tile later, so it needs a third stage.
TRANSPOSE_DEPTHS = (1, 2)


@dataclass(frozen=True)
class SmemTile:
    """One stage of one input in shared memory: `rows` rows of `inner` elements, padded to `pitch`."""

    operand: str
    rows: int
    inner: int
    pitch: int
    rows_role: str
    inner_role: str

    @property
    def elems(self) -> int:
        return self.rows * self.pitch


@functools.cache  # pure in five small values; the planner asks for the same few tiles a million times
def smem_tile(operand: str, smem_inner: str, block_mn: int, block_k: int, elem_bytes: int) -> SmemTile:
    other = OTHER[operand]
    rows, inner = (block_mn, block_k) if smem_inner == "k" else (block_k, block_mn)
    return SmemTile(operand, rows, inner, inner + SMEM_PAD_BYTES // elem_bytes,
                    other if smem_inner == "k" else "k", smem_inner)


def tile_smem_bytes(a: Assignment, elem_bytes: int) -> int:
    a_tile = smem_tile("A", a["smem_inner_a"], a["block_m"], a["block_k"], elem_bytes)
    b_tile = smem_tile("B", a["smem_inner_b"], a["block_n"], a["block_k"], elem_bytes)
    return a["stages"] * (a_tile.elems + b_tile.elems) * elem_bytes


def copy_elems(facts: OperandFacts, smem_inner: str, aligned: bool) -> int:
    """Elements one copy may move: a vector along the stride-1 dim when shared rows follow it,
    else single elements. `aligned`: assume a 16-byte-aligned base pointer (checked at run time)."""
    if smem_inner != facts.unit_role:
        return 1
    return facts.vector_elems_aligned if aligned else facts.vector_elems


def fragment_vector(thread_extent: int) -> int:
    """FFMA: a thread's outputs along one dim come in groups of this many consecutive rows (columns),
    each group's A (B) values one shared-memory vector of up to 16 bytes a k step."""
    return math.gcd(thread_extent, 4)


def staged_depth(a: Assignment, op: str) -> int:
    """k-tiles of input `op` a thread holds in registers at once: the transpose depth for a transposing loader, 1
    for a gather (0 for cp.async). Reads `transpose_depth` only where the loader transposes (FFMA graphs)."""
    kind = a[f"loader_{op}"]
    if kind not in STAGED:
        return 0
    return a.get("transpose_depth", 1) if kind == "transpose" else 1


def staged_per_thread(a: Assignment, op: str, instruction: str) -> int:
    """Elements of input `op` ("a" or "b") a thread holds in registers across the math: one k-tile's share a
    register set, staged_depth sets (0 unless its loader is register-staged)."""
    depth = staged_depth(a, op)
    if not depth:
        return 0
    extent = a["block_m"] if op == "a" else a["block_n"]
    return depth * math.ceil(extent * a["block_k"] / block_threads(a, instruction))


def block_threads(a: Assignment, instruction: str) -> int:
    if instruction == MMA:
        return 32 * a["warps_m"] * a["warps_n"]
    return (a["block_m"] // a["thread_m"]) * (a["block_n"] // a["thread_n"])
