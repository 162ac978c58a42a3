"""Draws for the e4m3 families (FP8_SHARE): GEMMs the fp8_hopper family takes, over every scaling mode."""

from __future__ import annotations

import random

from dgemm_cli.randspec.common import MAX_FLOPS

# Scaling modes, as `scales:` writes them: DeepGEMM's 1 x 128 and 128 x 128 blocks, one a row and one a column along
# k blocks, per channel, per tensor, coarser blocks whose k blocks nest, and mixes of them.
SCALE_MODES: tuple[tuple[str, dict, dict], ...] = (
    ("deepgemm", {"block": {"k": 128}}, {"block": {"n": 128, "k": 128}}),
    ("rows_and_columns", {"block": {"k": 128}}, {"block": {"k": 128}}),
    ("per_channel", {"per": "channel"}, {"per": "channel"}),
    ("per_tensor", {"per": "tensor"}, {"per": "tensor"}),
    ("coarse", {"block": {"m": 128, "k": 256}}, {"block": {"n": 64, "k": 128}}),
    ("tensor_and_blocks", {"per": "tensor"}, {"block": {"n": 128, "k": 128}}),
    ("channel_and_blocks", {"per": "channel"}, {"block": {"n": 128, "k": 256}}),
)


def _padded(rng: random.Random, size: int) -> int:
    """A row stride of e4m3 elements for `size` elements: a multiple of 16 bytes (TMA's rule), sometimes padded."""
    return -(-size // 16) * 16 + rng.choice([0, 0, 0, 16, 48])


def _scale_view(rng: random.Random, mode: dict, rows: str, sizes: dict[str, int]) -> dict:
    """A scale mode with a random layout where its view has two letters (m- or n-contiguous, or k-contiguous), and
    sometimes an offset."""
    out = dict(mode)
    if "block" in mode:
        blocks = {x: mode["block"].get(x, 1) for x in (rows, "k")}
    else:
        blocks = {rows: 1 if mode["per"] == "channel" else sizes[rows], "k": sizes["k"]}
    letters = [x for x, block in blocks.items() if block < sizes[x]]
    if len(letters) == 2 and rng.random() < 0.8:
        out["layout"] = rng.choice(["row", "col"])
    if rng.random() < 0.2:
        out["offset"] = rng.randint(1, 9)
    return out


def _fp8_spec(rng: random.Random, name: str) -> dict:
    """An e4m3 GEMM (FP8_SHARE): A [M, K] and B [N, K] k-contiguous, rows a whole number of 16 bytes apart (padded
    sometimes), promised 16-byte aligned, offsets of whole 16 bytes; K of any size (the last scale block partial); a
    scaling mode of SCALE_MODES with random layouts; C bf16, f16 or f32 in either order, sometimes padded."""
    while True:
        m = rng.choice([rng.randint(1, 64), rng.randint(65, 700)])
        n = rng.choice([rng.randint(8, 200), rng.randint(200, 1200)])
        k = rng.choice([rng.randint(16, 300), rng.randint(300, 3000), 128 * rng.randint(1, 24)])
        if 2 * m * n * k <= MAX_FLOPS:
            break
    sizes = {"m": m, "n": n, "k": k}
    lda, ldb = _padded(rng, k), _padded(rng, k)
    out_dtype = rng.choice(["bf16", "f16", "f32"])
    if rng.random() < 0.5:
        c: dict = {"layout": rng.choice(["row", "col"]), "dtype": out_dtype}
    else:
        ldc = n + rng.choice([0, 0, 8, rng.randint(1, 9)])
        c = {"strides": [ldc, 1], "dtype": out_dtype}
    if rng.random() < 0.5:  # the promise is the base pointer's (the store's vectors follow the strides too)
        c["align"] = 16
    _, sa, sb = rng.choice(SCALE_MODES)
    a: dict = {"strides": [lda, 1], "align": 16}
    b: dict = {"strides": [1, ldb], "align": 16}  # B [K, N] over (k, n): n's rows ldb apart, k contiguous
    for view in (a, b):
        if rng.random() < 0.2:
            view["offset"] = 16 * rng.randint(1, 4)
    spec = {"name": name, "arch": "sm_90a", "dtype": "e4m3", "gemm": {"m": m, "n": n, "k": k},
            "operands": {"A": a, "B": b, "C": c},
            "scales": {"A": _scale_view(rng, sa, "m", sizes), "B": _scale_view(rng, sb, "n", sizes)},
            "alpha": rng.choice([1.0, 1.0, 0.5, -1.25]), "beta": rng.choice([0.0, 0.0, 1.0, 0.5])}
    return spec
