"""Draws for the e4m3 families: GEMMs the fp8_hopper family takes, over every scaling mode (FP8_SHARE), and products
over the views it refuses, which fp8_cta runs (FP8_VIEWS_SHARE)."""

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


# k blocks one scale covers, finer than fp8_hopper's 128: fp8_cta promotes every k-tile of 32, 64 or 128.
FINE_K_BLOCKS = (32, 64, 128, 256)


def _dense(sizes: list[int], order: list[int], pad: int) -> list[int]:
    """Strides of a dense tensor of `sizes` whose dims are laid out innermost first in `order`, the second innermost
    `pad` elements further apart."""
    strides = [0] * len(sizes)
    step = 1
    for n, d in enumerate(order):
        strides[d] = step
        step *= sizes[d] + (pad if n == 0 else 0)
    return strides


def _fp8_view_spec(rng: random.Random, name: str) -> dict:
    """An e4m3 product over views fp8_hopper refuses (FP8_VIEWS_SHARE): a GEMM with each operand k- or
    mn-contiguous, padded by any number of bytes and offset by any; a batched GEMM (B sometimes broadcast over the
    batch); or a 1x1 convolution over NCHW or NHWC activations. Scales: per tensor, per channel, or blocks along k
    of 32..256 with rows of 1 (or 128 along n), at an offset sometimes; C any float type in its own layout."""
    kind = rng.choice(["gemm", "gemm", "batched", "conv"])
    scale_k = rng.choice(FINE_K_BLOCKS)
    mode = rng.choice(["blocks", "blocks", "channel", "tensor"])
    if kind == "conv":
        nchw = rng.random() < 0.5
        sizes = {"n": rng.randint(1, 3), "c": rng.randint(16, 300), "h": rng.randint(2, 20), "w": rng.randint(2, 20),
                 "k": rng.randint(8, 200)}
        contraction = "nchw,kc->nkhw" if nchw else "nhwc,kc->nhwk"
        a_letters, b_letters, c_letters, cols, k = ("nchw" if nchw else "nhwc"), "kc", None, "k", "c"
    else:
        batched = kind == "batched"
        sizes = {"m": rng.randint(1, 300), "n": rng.randint(8, 300), "k": rng.randint(16, 1200)}
        if batched:
            sizes["b"] = rng.randint(2, 4)
        a_letters = ("b" if batched else "") + ("mk" if rng.random() < 0.5 else "km")
        b_letters = ("b" if batched else "") + ("nk" if rng.random() < 0.5 else "kn")
        c_letters = ("b" if batched else "") + ("mn" if rng.random() < 0.7 else "nm")
        contraction = f"{a_letters},{b_letters}->{c_letters}"
        cols, k = "n", "k"
    operands: dict = {}
    for op, letters in (("A", a_letters), ("B", b_letters)):
        dims = [sizes[x] for x in letters]
        inner = list(range(len(letters)))[::-1]  # as written: the last letter innermost
        view: dict = {"strides": _dense(dims, inner, rng.choice([0, 0, 1, 3, 16]))}
        if op == "B" and kind == "batched" and rng.random() < 0.3:
            view["strides"][0] = 0  # one B for every product
        if rng.random() < 0.4:
            view["offset"] = rng.randint(1, 15)
        operands[op] = view
    out_dtype = rng.choice(["bf16", "f16", "f32"])
    operands["C"] = {"dtype": out_dtype}
    if kind != "conv" and rng.random() < 0.3:
        c_dims = [sizes[x] for x in c_letters]
        operands["C"]["strides"] = _dense(c_dims, list(range(len(c_letters)))[::-1], rng.choice([1, 8]))
    scales: dict = {}
    for op, letters in (("A", a_letters), ("B", b_letters)):
        if mode == "tensor":
            sc: dict = {"per": "tensor"}
        elif mode == "channel":
            sc = {"per": "channel"}
        else:
            block = {k: scale_k}
            if op == "B" and kind != "conv" and rng.random() < 0.5:
                block[cols] = 128
            if "b" in letters and rng.random() < 0.5:
                block["b"] = "all"
            sc = {"block": block}
        if rng.random() < 0.2:
            sc["offset"] = rng.randint(1, 9)
        scales[op] = sc
    return {"name": name, "arch": "sm_90a", "dtype": "e4m3", "contraction": contraction, "sizes": sizes,
            "operands": operands, "scales": scales,
            "alpha": rng.choice([1.0, 1.0, 0.5, -1.25]), "beta": rng.choice([0.0, 0.0, 1.0, 0.5])}
