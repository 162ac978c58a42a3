"""What every random draw shares: the suite's bounds and shares (each share's comment says what it reaches),
random strides, sizes and the size bound."""

from __future__ import annotations

import random

MAX_FLOPS = 2e9
TMA_SHARE = 0.35  # specs whose views a TMA tensor map can take (16-byte strides), sized for the Hopper family
SMALL_M_SHARE = 0.0  # decode-shaped specs (M <= 64, long K) for the small-M split-K family
# Contraction draws with no output letters (C one element: M = N = 1, what the dot family takes where K is long
# enough).
FULL_REDUCTION_SHARE = 0.12
# Full reductions (C one element) pinned to the dot family by `plan:` (the cost model gives the sizes drawn here,
# K of at most a few hundred thousand, to gemv). Drawn from a generator of the spec's own (at 0, no other draw
# changes).
DOT_SHARE = 0.0
DYNAMIC_SHARE = 0.0  # specs whose row letter is sized at run time (`{min, max}`): one kernel a bucket of sizes
# Specs that get an `epilogue:` (and sometimes an output view D). Drawn from a generator of their own, seeded
# by the spec's name, so that the share never changes the products the other draws give.
EPILOGUE_SHARE = 0.3
# TMA specs with two row letters, one sized in whole 64-row blocks (64 or 192) and the other 2..5:
# where the blocked letter is the inner m segment, the hopper family's tiles run across the other (flat rows).
# Drawn from a generator of the spec's own (at 0, no other draw changes).
ROW_BLOCKS_SHARE = 0.0
# Decode-shaped specs whose A is redrawn k-contiguous, its rows a whole number of 16-, 8- or 4-byte vectors apart (or
# not), so that the small-M families' vector loads of A (and their K tails and run-time pointer checks) are reached.
# Drawn from a generator of the spec's own (at 0, no other draw changes).
A_VECTORS_SHARE = 0.0
# Decode-shaped specs redrawn wide (N = 2112..16384 columns, tails included; K = 512..8192), f16 or bf16 for A and B,
# B mostly in the nn.Linear layout [N, K] and A mostly k-contiguous: the shapes the tensor-core GEMV family (tcgemv)
# needs. Drawn from a generator of the spec's own (at 0, no other draw changes).
WIDE_DECODE_SHARE = 0.0
# Wide decode specs redrawn over a batch of 2..8 products (a batch letter in A, B and C, added where the spec has
# none): batched decode (attention heads over a KV cache, MoE experts), which tcgemv takes.
# Drawn from a generator of the spec's own (at 0, no other draw changes).
WIDE_BATCH_SHARE = 0.0
# Wide decode specs whose K total is drawn short, 8..192 (in whole 64s, 8s or not; split over two K letters it may
# round up to 256): tcgemv's short-K path (K <= 192: 2 warps a block, a block's last warps with no 64-k segment, K
# tails), which the wide draws' K = 512..8192 never reach. Drawn from a generator of the spec's own (at 0, no other draw
# changes).
WIDE_SHORT_K_SHARE = 0.0
# Wide decode specs shaped for tcgemv's staged activation (`a_stage` "shared"): one product, M = 9..16, N = 6..8 row
# groups of 16 columns x 119..132 blocks (a third of them with the last block's columns past N), K = 512..6656 in
# whole 512s, pinned to it by `plan:` (the planner prices that kernel above hopper; `random-specs` drops the pin
# where tcgemv's gates refuse the views); the wide draws' N and K hit its windows about once in a thousand. Drawn
# from a generator of the spec's own (at 0, no other draw changes).
WIDE_STAGED_SHARE = 0.0
# TMA specs redrawn for the hopper family's A-multicast kernel, pinned by `plan:` (the cost model prices the K split
# above it): the weight as A (k innermost, rows 64..2000), N = 65..300 (two tiles wide), an optional batch of 1..3.
# Drawn from a generator of the spec's own (at 0, no other draw changes).
MULTICAST_SHARE = 0.0
# e4m3 GEMMs with their scales (randspec/fp8.py), every scaling mode, K of any size, padded rows, the fp8_hopper
# family's views. Drawn from a generator of the spec's own (at 0, no other draw changes).
FP8_SHARE = 0.0
# e4m3 products over the views fp8_hopper refuses (randspec/fp8.py's _fp8_view_spec): either operand mn-contiguous,
# rows at any byte offset and pitch, batches (one operand sometimes broadcast), NCHW and NHWC 1x1 convolutions, k
# blocks of 32 and 64. Drawn from a generator of the spec's own (at 0, no other draw changes).
FP8_VIEWS_SHARE = 0.0
# Share of specs redrawn as weight-only GEMMs (integer weights, the wq family; randspec/weights.py): apart, as the
# e4m3 shares are.
WQ_SHARE = 0.0
# Bounds of a wide decode draw (the GPU verify runs them): rows x columns x K, and the weight's elements.
WIDE_MAX_MACS = 3e9
WIDE_MAX_WEIGHT = 1 << 26  # elements: 128 MB in f16/bf16
ACTIVATION_NAMES = ("relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh")
MAX_ELEMENTS = 1 << 25
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _strides(letters: str, sizes: dict[str, int], rng: random.Random, broadcast: bool,
             round_to: int = 1, innermost: str = "", order_hint: str = "") -> list[int]:
    """Strides for `letters` in a random memory order, with occasional padding and broadcast.
    `round_to` > 1 (TMA-friendly views): stride 1 innermost and every other stride a multiple of it;
    `innermost`: letters one of which must be innermost; `order_hint`: a memory order (innermost first)
    shared with the other operands, as in tensors that come from one framework, which lets letters merge."""
    order = list(letters)
    rng.shuffle(order)  # order[0] is innermost
    if order_hint:
        order.sort(key=order_hint.index)
    first = [x for x in order if x in innermost]
    if first:
        order.remove(first[0])
        order.insert(0, first[0])
    strides = {}
    step = 1 if round_to > 1 or rng.random() < 0.9 else rng.choice([2, 3])
    for x in order:
        if broadcast and sizes[x] > 1 and rng.random() < (0.04 if round_to > 1 else 0.25):
            strides[x] = 0
            continue
        strides[x] = step
        pad = rng.choice([0, 0, 0, rng.randint(1, 9)])
        step = step * sizes[x] + pad
        step = -(-step // round_to) * round_to
    return [strides[x] for x in letters]


def _draw_sizes(letters: list[str], rng: random.Random) -> dict[str, int]:
    # Mostly small, sometimes up to 300; more letters -> smaller each.
    cap = 300 if len(letters) <= 3 else {4: 120, 5: 40, 6: 20}.get(len(letters), 12)
    return {x: rng.choice([rng.randint(1, cap), rng.randint(1, min(cap, 32)), rng.randint(max(1, cap // 2), cap)])
            for x in letters}


def _fits(spec_letters: tuple[str, str, str], sizes: dict[str, int]) -> bool:
    total = 1
    for s in sizes.values():
        total *= s
    per_op = [1, 1, 1]
    for i, ls in enumerate(spec_letters):
        for x in ls:
            per_op[i] *= sizes[x]
    return 2 * total <= MAX_FLOPS and max(per_op) * 16 <= MAX_ELEMENTS


