#!/usr/bin/env python3
"""Write specs/einsum/: every two-operand equation of opt_einsum's test list, for tools/einsum_suite.sh.

    python tools/einsum_specs.py [OUT_DIR]        (default: specs/einsum next to this checkout)

Source: opt_einsum/tests/test_contract.py, the list `tests` (github.com/dgasmith/opt_einsum; the
2-operand entries of its current version). Most are written as numpy writes them, without `->`.
Each equation becomes four specs: small odd sizes (tails in every tile dim) in f16 with an f32 C at
an offset, and in f32 with alpha/beta and a C offset; sizes in the thousands in f16 and f32, dense.
The large sizes keep the naive float64 reference of `verify` within seconds.

The five "inner than dot" equations take a diagonal (a letter twice in one input); deepgemm refuses
them with a message saying so (DIAGONALS; tests/test_einsum_suite.py checks the refusal).
Names are C identifiers: ein_<inputs joined by _>[_to_<output>]_<small|large>_<dtype>.
"""

from __future__ import annotations

import sys
from pathlib import Path

# (equation, opt_einsum's group, sizes for the large variant)
THIRDS = {"a": 3, "b": 1023, "c": 33, "d": 31, "e": 1025, "f": 3}  # M 3069, N 3075, K 1023
OPT_EINSUM = [
    ("a,->a", "scalar-like operations", {"a": 8191}),
    ("ab,->ab", "scalar-like operations", {"a": 2047, "b": 1025}),
    ("abcd,ad", "random test cases that have previously failed", {"a": 3, "b": 1023, "c": 2049, "d": 5}),
    ("ab,ab", "inner products", {"a": 2047, "b": 3001}),
    ("ab,ba", "inner products", {"a": 3001, "b": 2047}),
    ("abc,abc", "inner products", {"a": 1023, "b": 65, "c": 33}),
    ("abc,bac", "inner products", {"a": 1025, "b": 63, "c": 31}),
    ("abc,cba", "inner products", {"a": 31, "b": 1023, "c": 65}),
    ("ab,bc", "GEMM test cases", {"a": 2049, "b": 1023, "c": 1537}),
    ("ab,cb", "GEMM test cases", {"a": 1537, "b": 2049, "c": 1023}),
    ("ba,bc", "GEMM test cases", {"a": 1023, "b": 1537, "c": 2049}),
    ("ba,cb", "GEMM test cases", {"a": 2047, "b": 1025, "c": 1537}),
    ("abcd,cd", "GEMM test cases", {"a": 1025, "b": 3, "c": 1023, "d": 5}),
    ("abcd,ab", "GEMM test cases", {"a": 5, "b": 3, "c": 1023, "d": 1025}),
    ("abcd,cdef", "GEMM test cases", THIRDS),
    ("abcd,cdef->feba", "GEMM test cases", THIRDS),
    ("abcd,efdc", "GEMM test cases", THIRDS),
]
# Not in opt_einsum's list: a summed letter in one input only (the deepgemm issue's example) and its mirror.
EXTRAS = [
    ("abc,cd->ad", "summed in A only", {"a": 1025, "b": 7, "c": 1023, "d": 2049}),
    ("ab,bcd->ad", "summed in B only", {"a": 2049, "b": 1023, "c": 7, "d": 1025}),
]
DIAGONALS = ["aab,bc->ac", "ab,bcc->ac", "aab,bcc->ac", "baa,bcc->ac", "aab,ccb->ac"]  # "inner than dot"

SMALL = {"a": 37, "b": 13, "c": 29, "d": 7, "e": 11, "f": 5}
# Per variant: dtype, and the lines after `sizes:` (C's offset/dtype/align still apply to a one-element C).
VARIANTS = {
    ("small", "f16"): ["operands:", "  C: {dtype: f32, offset: 5}", "alpha: 1.0", "beta: 0.0"],
    ("small", "f32"): ["operands:", "  C: {offset: 3, align: 16}", "alpha: -1.25", "beta: 0.5"],
    ("large", "f16"): ["alpha: 1.0", "beta: 0.0"],
    ("large", "f32"): ["alpha: 1.0", "beta: 0.0"],
}


def spec_name(equation: str, scale: str, dtype: str) -> str:
    inputs, _, output = equation.partition("->")
    parts = [term or "scalar" for term in inputs.split(",")] + (["to", output or "scalar"] if "->" in equation else [])
    return "_".join(["ein", *parts, scale, dtype])


def spec_text(equation: str, origin: str, large: dict[str, int], scale: str, dtype: str) -> str:
    letters = sorted({x for x in equation if x.isalpha()})
    sizes = {x: (large if scale == "large" else SMALL)[x] for x in letters}
    return "\n".join([
        f"# {equation}  ({origin})",
        "# Written by tools/einsum_specs.py: edit that, not this file.",
        f"name: {spec_name(equation, scale, dtype)}",
        "arch: sm_90a",
        f"dtype: {dtype}",
        f'contraction: "{equation}"',
        "sizes: {" + ", ".join(f"{x}: {s}" for x, s in sizes.items()) + "}",
        *VARIANTS[(scale, dtype)],
    ]) + "\n"


def suite() -> dict[str, str]:
    """File name -> text, for every equation and variant."""
    out = {}
    equations = ([(e, f"opt_einsum test list: {group}", large) for e, group, large in OPT_EINSUM]
                 + [(e, f"{group}; not in opt_einsum's list", large) for e, group, large in EXTRAS])
    for equation, origin, large in equations:
        for scale, dtype in VARIANTS:
            out[f"{spec_name(equation, scale, dtype)}.yaml"] = spec_text(equation, origin, large, scale, dtype)
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "specs" / "einsum"
    out.mkdir(parents=True, exist_ok=True)
    files = suite()
    for stale in set(p.name for p in out.glob("*.yaml")) - set(files):
        (out / stale).unlink()
    for name, text in files.items():
        (out / name).write_text(text)
    print(f"{len(files)} specs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
