"""Draws for the hopper family: TMA-friendly contractions and the A-multicast kernel's shapes."""

from __future__ import annotations

import math
import random

from dgemm_cli.randspec.common import LETTERS, MAX_FLOPS, _fits, _strides


def _tma_spec(rng: random.Random, name: str, row_blocks_share: float = 0.0) -> dict:
    """A 16-bit contraction with 16-byte-multiple strides and sizes in the hundreds, so that the sm_90a plan
    takes the TMA + wgmma family; a share keeps an offset, a broadcast or a missing alignment promise,
    which exercise its gates and its run-time fallback. `row_blocks_share`: see ROW_BLOCKS_SHARE."""
    dtype = rng.choice(["f16", "bf16"])
    own = random.Random(f"{name}/row-blocks")
    blocked = row_blocks_share > 0 and own.random() < row_blocks_share
    while True:
        n_batch, n_m, n_n, n_k = rng.randint(0, 1), rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2)
        n_m = 2 if blocked else n_m
        pool = iter(rng.sample(LETTERS, 8))
        batch, ms, ns, ks = ([next(pool) for _ in range(c)] for c in (n_batch, n_m, n_n, n_k))
        sizes = {x: rng.choice([rng.randint(1, 40), rng.randint(64, 700)]) for x in batch + ms + ns + ks}
        for x in batch:
            sizes[x] = rng.randint(1, 4)
        if blocked:  # 64 or 192 rows: not a whole number of 128-row tiles, so flat rows save tiles
            sizes[ms[0]], sizes[ms[1]] = own.choice([64, 192]), own.randint(2, 5)
        a, b, c = batch + ms + ks, batch + ks + ns, batch + ms + ns
        for lst in (a, b, c):
            rng.shuffle(lst)
        letters = ("".join(a), "".join(b), "".join(c))
        if _fits(letters, sizes):
            break
    tiled = {"A": ms + ks, "B": ns + ks, "C": ms + ns}  # TMA needs one of these innermost (stride 1)
    every = batch + ms + ns + ks
    rng.shuffle(every)
    shared = "".join(every) if rng.random() < 0.5 else ""
    operands = {op: {"strides": _strides(ls, sizes, rng, broadcast=op != "C", round_to=8,
                                         innermost="".join(tiled[op]) if rng.random() < 0.9 else "",
                                         order_hint=shared)}
                for op, ls in zip("ABC", letters)}
    for o in operands.values():
        if rng.random() < 0.6:
            o["align"] = 16
        if rng.random() < 0.15:
            o["offset"] = rng.choice([8, 16, rng.randint(1, 37)])
    if rng.random() < 0.3:
        operands["C"]["dtype"] = "f32"
        operands["C"]["strides"] = _strides(letters[2], sizes, rng, broadcast=False, round_to=4,
                                            innermost="".join(tiled["C"]))
    return {"name": name, "arch": "sm_90a", "dtype": dtype, "contraction": f"{letters[0]},{letters[1]}->{letters[2]}",
            "sizes": sizes, "operands": operands, "alpha": rng.choice([1.0, 0.5, -1.25]),
            "beta": rng.choice([0.0, 0.0, 1.0, -2.0])}


def _multicast_spec(rng: random.Random, name: str) -> dict:
    """A TMA contraction (MULTICAST_SHARE) pinned to the hopper family's A-multicast kernel: A [rows, k] with k
    innermost, its other stride and B's and C's whole 16-byte vectors apart, N two tiles wide."""
    dtype = rng.choice(["f16", "bf16"])
    sizes = {"m": rng.randint(64, 2000), "n": rng.randint(65, 300), "k": rng.randint(16, 2048)}
    batch = rng.random() < 0.3
    if batch:
        sizes["b"] = rng.randint(1, 3)
    while 2 * math.prod(sizes.values()) > MAX_FLOPS:
        sizes["k"] = max(16, sizes["k"] // 2)
    rows = "bm" if batch else "m"
    b_letters = rng.choice(["bkn", "bnk"] if batch else ["kn", "nk"])
    letters = (f"{rows}k", b_letters, f"{rows}n" if batch else rng.choice(["mn", "nm"]))
    operands = {op: {"strides": _strides(ls, sizes, rng, broadcast=False, round_to=8, innermost=inner)}
                for op, ls, inner in zip("ABC", letters, ("k", letters[1][-1], letters[2][-1]))}
    for o in operands.values():
        o["align"] = 16 if rng.random() < 0.8 else 2
    return {"name": name, "arch": "sm_90a", "dtype": dtype, "contraction": ",".join(letters[:2]) + f"->{letters[2]}",
            "sizes": sizes, "operands": operands, "alpha": rng.choice([1.0, 0.5]), "beta": rng.choice([0.0, 1.0]),
            "plan": {"family": "hopper", "a_multicast": 2}}


