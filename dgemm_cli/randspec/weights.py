"""Draws for integer weights (docs/design/weight-only.md; WQ_SHARE): every weight type, packed layout (GPTQ's and AWQ's
in either word order, an explicit packing, deepgemm's dg), group size (tails included), scale dtype and layout,
zero-point kind and form, activations in f16 or bf16, outputs of every dtype and layout, and run-time M."""

from __future__ import annotations

import random

from dgemm_cli.randspec.common import MAX_FLOPS


def _groups(rng: random.Random, k: int) -> dict:
    """A scale mode as `scales:` writes it: groups along k (any of 32..128 and odd ones), per channel or per tensor."""
    choice = rng.random()
    if choice < 0.6:
        return {"block": {"k": rng.choice([32, 64, 128, 128, rng.randint(1, max(1, k))])}}
    return {"per": "channel"} if choice < 0.9 else {"per": "tensor"}


def wq_spec(rng: random.Random, name: str) -> dict:
    """A weight-only GEMM: C[M, N] = A[M, K] . dequant(B)[K, N], B int4/uint4 (packed) or int8/uint8."""
    while True:
        m = rng.choice([rng.randint(1, 16), rng.randint(1, 64), rng.randint(65, 300)])
        n = rng.choice([rng.randint(1, 64), rng.randint(65, 600)])
        k = rng.choice([rng.randint(1, 200), rng.randint(200, 1500), 64 * rng.randint(1, 24)])
        if 2 * m * n * k <= MAX_FLOPS:
            break
    act = rng.choice(["f16", "bf16"])
    dtype = rng.choice(["uint4", "uint4", "int4", "int8", "uint8"])
    b: dict = {"dtype": dtype}
    if dtype in ("int4", "uint4"):
        packing = rng.choice(["gptq", "awq", "dg", "explicit"])
        if packing == "explicit":
            b["packing"] = {"along": rng.choice(["k", "n"]), "order": rng.choice(["linear", "awq"])}
        else:
            b["packing"] = packing
        if packing != "dg":
            b["layout"] = rng.choice(["row", "col"])
        if packing == "dg" and rng.random() < 0.5:
            b["align"] = 16
    else:
        b["layout"] = rng.choice(["row", "col"])
    # Tensor-core decode (the wqtc family, pinned: the cost model gives small shapes to wq): dg words 16-byte
    # aligned, GPTQ's words, or 8-bit weights k-contiguous in 16-byte aligned columns (padded past K at times: the
    # last run's bytes one at a time), up to 64 rows, more than one column, groups of whole 16-k tiles.
    eight_bits = dtype in ("int8", "uint8")
    tensor_cores = (b.get("packing") in ("dg", "gptq") or eight_bits) and rng.random() < 0.6
    if tensor_cores and b.get("packing") == "dg":
        b["align"] = 16
    if tensor_cores and eight_bits:
        b.pop("layout", None)
        b["strides"] = [1, 16 * (-(-k // 16) + rng.choice([0, 0, 1]))]
        b["align"] = 16
    if tensor_cores:
        m, n = min(m, rng.randint(1, 64)), max(n, 2)
    scales = _groups(rng, k)
    if tensor_cores and "block" in scales and scales["block"]["k"] % 16 and scales["block"]["k"] < k:
        scales["block"]["k"] = rng.choice([16, 32, 64, 128])
    scales["dtype"] = rng.choice(["f16", "bf16", "f32", act])
    if "block" in scales and scales["block"]["k"] < k and n > 1 and rng.random() < 0.8:  # a [k / group, n] view
        scales["layout"] = rng.choice(["row", "col"])
    spec: dict = {"name": name, "dtype": act, "gemm": {"m": m, "n": n, "k": k},
                  "operands": {"A": {"layout": "row", **({"align": 16} if tensor_cores and rng.random() < 0.5 else {})},
                               "B": b,
                               "C": {"layout": rng.choice(["row", "row", "col"]),
                                     "dtype": rng.choice([act, act, "f32"])}},
                  "scales": {"B": scales}}
    if rng.random() < 0.2:  # A's rows padded
        spec["operands"]["A"] = {"strides": [k + rng.randint(1, 24), 1]}
        spec["operands"]["C"] = {"strides": [n, 1], "dtype": spec["operands"]["C"]["dtype"]}
        spec["contraction"] = "mk,kn->mn"
        spec["sizes"] = spec.pop("gemm")
        b_strides = None if "strides" in b else _word_strides(b, k, n)
        if b_strides is not None:
            b.pop("layout", None)
            b["strides"] = b_strides
    per_column = "block" in scales or scales.get("per") == "channel"
    zero = rng.random()
    if dtype.startswith("u") and zero < 0.5:
        if dtype == "uint4" and per_column and rng.random() < 0.6:
            spec["zeros"] = {"B": {"dtype": "uint4", "packing": rng.choice(["gptq", "awq"]), "layout": "row"}}
        else:
            spec["zeros"] = {"B": {"dtype": "uint8"}}
    elif zero < 0.7:
        spec["zeros"] = {"B": {"dtype": rng.choice(["f16", "bf16", "f32"]),
                               "form": rng.choice(["subtract", "prescaled"])}}
    if rng.random() < 0.2 and "gemm" in spec:  # tokens at run time: C's rows outermost, as A's are
        spec["gemm"]["m"] = {"min": rng.randint(1, m), "max": m}
        spec["operands"]["C"]["layout"] = "row"
    spec["alpha"] = rng.choice([1.0, 1.0, 0.5])
    spec["beta"] = rng.choice([0.0, 0.0, 0.0, 1.0])
    if tensor_cores:
        spec["plan"] = {"family": "wqtc"}
    return spec


def _word_strides(b: dict, k: int, n: int) -> list[int] | None:
    """B's strides over (k, n), dense row-major, in words along its packing (bytes for 8 bits); None for dg."""
    packing = b.get("packing")
    if packing == "dg":
        return None
    along = "k" if packing in ("gptq", None) else "n" if packing == "awq" else packing["along"]
    if b["dtype"] in ("int8", "uint8"):
        return [n, 1]
    return [-(-n // 8) if along == "n" else n, 1]
