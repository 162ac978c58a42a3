"""Decode-shaped draws: the small-M specs, A redrawn in vectors, and the wide redraws (tcgemv's shapes)."""

from __future__ import annotations

import math
import random

from dgemm_cli.randspec.common import (
    LETTERS,
    WIDE_MAX_MACS,
    WIDE_MAX_WEIGHT,
    _fits,
    _strides,
)


def _redraw_a_in_vectors(spec: dict, rng: random.Random) -> None:
    """Make a decode-shaped spec's A k-contiguous: its k letters innermost and dense, nested in B's order of them
    (so that they merge into one k segment), the other letters' strides a multiple of a 16-, 8- or 4-byte vector
    (sometimes one element more: no vectors), sometimes broadcast; an offset of whole vectors or not, and 16 bytes
    promised or not (the kernel then checks the pointer). Half the time B is made k-contiguous the same way (the
    nn.Linear layout, whose 16-byte loads set the K slices' grain), and half the time the innermost k letter is
    rounded up to whole vectors (else K ends inside a vector: the tail)."""
    a_letters, b_letters, c_letters = spec["contraction"].replace("->", ",").split(",")
    sizes = spec["sizes"]
    elem = 4 if spec["dtype"] == "f32" else 2
    vec = rng.choice([16, 16, 8, 4]) // elem or 1  # elements a vector
    b_strides = dict(zip(b_letters, spec["operands"]["B"]["strides"]))
    ks = sorted((x for x in a_letters if x in b_letters and x not in c_letters), key=lambda x: (abs(b_strides[x]), x))
    if rng.random() < 0.5:
        rounded = -(-sizes[ks[0]] // vec) * vec
        if math.prod(sizes[x] for x in b_letters) // sizes[ks[0]] * rounded <= WIDE_MAX_WEIGHT:
            sizes[ks[0]] = rounded
    if rng.random() < 0.5:
        b_view = _k_innermost_strides(b_letters, ks, sizes, 16 // elem, rng, broadcast=False)
        spec["operands"]["B"] = {"strides": b_view, **({"align": 16} if rng.random() < 0.5 else {})}
    b = spec["operands"]["B"]
    if _extent(b_letters, b["strides"], sizes) > WIDE_MAX_WEIGHT:  # the rounding or the rows' padding took it past
        b["strides"] = _unpadded(b_letters, ks, sizes, _k_innermost_strides(b_letters, ks, sizes, 1, rng, False))
    roll = rng.random()
    a = spec["operands"]["A"] = {"strides": _k_innermost_strides(a_letters, ks, sizes, vec, rng, broadcast=True)}
    if roll < 0.4:
        a["align"] = 16
    elif roll < 0.7:
        a["offset"] = vec * rng.randint(1, 5)
    elif roll < 0.8:
        a["offset"] = rng.randint(1, 7)


def _k_innermost_strides(letters: str, ks: list[str], sizes: dict[str, int], vec: int, rng: random.Random,
                  broadcast: bool, odd: float = 0.15) -> list[int]:
    """Strides for `letters` with the summed letters `ks` innermost and dense (ks[0] innermost), the others (rows,
    batch) in a random order from a row stride of whole `vec`-element vectors (sometimes padded; with probability
    `odd` one element off)."""
    strides, step = {}, 1
    for x in ks:
        strides[x] = step
        step *= sizes[x]
    step = -(-step // vec) * vec + rng.choice([0, 0, 0, vec * rng.randint(1, 3)])
    if rng.random() < odd:
        step += 1  # rows an odd number of elements apart: no vector holds
    rows = [x for x in letters if x not in ks]
    rng.shuffle(rows)
    for x in rows:
        if broadcast and sizes[x] > 1 and rng.random() < 0.1:
            strides[x] = 0
            continue
        strides[x] = step
        step *= sizes[x]
    return [strides[x] for x in letters]


def _extent(letters: str, strides: list[int], sizes: dict[str, int]) -> int:
    """Elements a view spans: one past its last element's offset."""
    return 1 + sum(s * (sizes[x] - 1) for x, s in zip(letters, strides))


def _unpadded(letters: str, ks: list[str], sizes: dict[str, int], strides: list[int]) -> list[int]:
    """The view of `strides` (the summed letters `ks` innermost, no broadcast) with its rows dense: the same
    nesting, no padding, so that it spans the product of its sizes."""
    rows = sorted((x for x in letters if x not in ks), key=lambda x: strides[letters.index(x)])
    out, step = {}, 1
    for x in [*ks, *rows]:
        out[x] = step
        step *= sizes[x]
    return [out[x] for x in letters]


def _wide_total(rng: random.Random, lo: int, hi: int, grains: tuple[tuple[float, int], ...]) -> int:
    """A size in lo..hi in whole `grain`s, the grain drawn from `grains` ((cumulative share, grain), ...)."""
    roll = rng.random()
    grain = next((g for share, g in grains if roll < share), 1)
    return grain * rng.randint(-(-lo // grain), hi // grain)


def _wide_split(letters: list[str], total: int, sizes: dict[str, int], rng: random.Random,
                inners: tuple[int, ...]) -> None:
    """Size `letters` (one or two) to `total`, or with two letters an inner one from `inners` times the whole number
    of them that reaches `total` (heads x head_dim, groups x group size)."""
    if len(letters) == 1:
        sizes[letters[0]] = total
        return
    inner = rng.choice(inners)
    sizes[letters[0]], sizes[letters[1]] = inner, -(-total // inner)


def _widen_decode(spec: dict, rng: random.Random, products: int = 1, short_k: random.Random | None = None,
                  staged: random.Random | None = None) -> None:
    """Redraw a decode-shaped spec wide (see WIDE_DECODE_SHARE): N = 2112..16384 columns, in whole 128s, 16s, 8s or not
    (the last block's columns past N); K = 512..8192 in whole 64s, 8s or not (K's last 64-k segment part filled, or K
    not whole 16-byte chunks); M = 2..16 rows 85 times in 100 (else 1 or 17..64); two N, K or M letters split their
    total (heads x head_dim); f16 or bf16 for A and B alike. B's summed letters innermost and dense, its rows whole
    16-byte vectors apart (the nn.Linear layout [N, K]; sometimes padded, rarely one element off) nine times in ten,
    else in a random order (where its extent stays under WIDE_MAX_WEIGHT elements; where the padding would not, the
    rows dense); A the same (k-contiguous in B's
    order of the summed letters, rows whole 16- or 8-byte vectors apart) 85 times in 100, else in a random order; C
    in a random order. The letters, batch sizes, offsets, alignment promises, C's dtype and alpha / beta stay as
    drawn; the problem stays under WIDE_MAX_MACS multiply-adds and the weight under WIDE_MAX_WEIGHT elements.
    `products` > 1 (WIDE_BATCH_SHARE): the batch letters multiply to `products`, one added at a random place in A, B
    and C where the spec has none. `short_k` (WIDE_SHORT_K_SHARE): K's total is drawn from it instead, 8..192 in whole
    64s (3 times in 10), 8s (16-byte chunks) or not (K <= 192: tcgemv's 2 warps a block, its last warps with no 64-k
    segment, K tails); `rng` still draws the long total it replaces, so that the other draws are those made without
    it (but where the long K failed the bounds, the short one may pass them sooner). Split over two K letters
    as before: an inner letter larger than the total is one of it, and the rounding up may reach 256. `staged`
    (WIDE_STAGED_SHARE; the caller passes products = 1): the batch letters are sized 1 and the M, N and K totals are
    drawn from it instead, as that share says; split over two letters the totals may round up."""
    if products > 1:
        _batch_over(spec, products, rng)
    a_letters, b_letters, c_letters = spec["contraction"].replace("->", ",").split(",")
    sizes = spec["sizes"]
    ms = [x for x in a_letters if x in c_letters and x not in b_letters]
    ns = [x for x in b_letters if x in c_letters and x not in a_letters]
    ks = [x for x in a_letters if x in b_letters and x not in c_letters]
    if staged is not None:  # one product: the drawn batch letters stay, of size 1
        sizes.update({x: 1 for x in a_letters if x in b_letters and x in c_letters})
    batch = math.prod(sizes[x] for x in a_letters if x in b_letters and x in c_letters)
    roll = rng.random()
    m = rng.randint(2, 8) if roll < 0.5 else rng.randint(9, 16) if roll < 0.85 else 1 if roll < 0.9 else \
        rng.randint(17, 64)
    if staged is not None:
        m = staged.randint(9, 16)
        spec["plan"] = {"family": "tcgemv", "a_stage": "shared"}  # the cost model prices hopper lower
    _wide_split(ms, m, sizes, rng, tuple(d for d in range(1, m + 1) if m % d == 0))
    rng.shuffle(ns)
    rng.shuffle(ks)  # ks[0] innermost where a view nests them
    while True:
        n = _wide_total(rng, 2112, 16384, ((0.35, 128), (0.6, 16), (0.8, 8)))
        k = _wide_total(rng, 512, 8192, ((0.6, 64), (0.9, 8)))
        if short_k is not None:
            k = _wide_total(short_k, 8, 192, ((0.3, 64), (0.85, 8)))
        if staged is not None:
            columns = 16 * staged.choice((6, 7, 8))
            n = columns * staged.randint(119, min(132, 16384 // columns))
            n -= staged.randint(1, columns - 1) if staged.random() < 0.3 else 0
            k = 512 * staged.randint(1, 13)
        _wide_split(ns, n, sizes, rng, (64, 128, 80, 96, 112, 8, 16))
        _wide_split(ks, k, sizes, rng, (64, 128, 32, 16, 8, 100, 56))
        n, k = math.prod(sizes[x] for x in ns), math.prod(sizes[x] for x in ks)
        if n <= 16384 and k <= 8192 and batch * m * n * k <= WIDE_MAX_MACS and batch * n * k <= WIDE_MAX_WEIGHT:
            break
    spec["arch"] = "sm_90a"
    spec["dtype"] = rng.choice(["f16", "bf16"])
    ops = spec["operands"]
    b_view = _strides(b_letters, sizes, rng, broadcast=True) if rng.random() < 0.1 else []
    if not b_view or _extent(b_letters, b_view, sizes) > WIDE_MAX_WEIGHT:
        b_view = _k_innermost_strides(b_letters, ks, sizes, 8, rng, broadcast=False, odd=0.05)
        if _extent(b_letters, b_view, sizes) > WIDE_MAX_WEIGHT:  # the rows' padding took it past the bound
            b_view = _unpadded(b_letters, ks, sizes, b_view)
    ops["B"]["strides"] = b_view
    if rng.random() < 0.85:
        ops["A"]["strides"] = _k_innermost_strides(a_letters, ks, sizes, rng.choice([8, 8, 8, 8, 4]), rng,
                                                   broadcast=True, odd=0.05)
    else:
        ops["A"]["strides"] = _strides(a_letters, sizes, rng, broadcast=True)
    ops["C"]["strides"] = _strides(c_letters, sizes, rng, broadcast=False)


def _batch_over(spec: dict, products: int, rng: random.Random) -> None:
    """Make the batch letters of a contraction spec (in A, B and C) multiply to `products`: the first takes it all
    and the others 1, or a new letter at a random place in each of the three where there is none."""
    a, b, c = spec["contraction"].replace("->", ",").split(",")
    batch = [x for x in a if x in b and x in c]
    if not batch:
        x = next(y for y in LETTERS if y not in spec["sizes"])
        a, b, c = (v[:i] + x + v[i:] for v in (a, b, c) for i in [rng.randint(0, len(v))])
        spec["contraction"] = f"{a},{b}->{c}"
        batch = [x]
    for i, x in enumerate(batch):
        spec["sizes"][x] = products if i == 0 else 1


def _small_m_spec(rng: random.Random, name: str) -> dict:
    """A decode-shaped product: M = 1..64 rows (one or two letters), K in the hundreds to thousands
    (one or two letters, so that the split-K family has k-tiles to split), N up to a few thousand,
    any dtype, permuted / padded / broadcast / offset views like the other random specs."""
    dtype = rng.choice(["f16", "bf16", "f32"])
    while True:
        n_batch, n_m, n_n, n_k = (rng.random() < 0.25), rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2)
        pool = iter(rng.sample(LETTERS, 8))
        batch, ms, ns, ks = ([next(pool) for _ in range(c)] for c in (int(n_batch), n_m, n_n, n_k))
        sizes = {x: rng.randint(1, 3) for x in batch}
        m_total = rng.choice([1, 1, 2, 3, rng.randint(4, 17), rng.randint(1, 64)])
        sizes[ms[0]] = m_total
        if len(ms) == 2:  # split M into two letters whose product stays <= 64
            sizes[ms[1]] = rng.randint(1, max(1, 64 // m_total))
        for x in ns:
            sizes[x] = rng.choice([rng.randint(1, 80), rng.randint(100, 3000)]) if len(ns) == 1 else rng.randint(1, 60)
        for x in ks:
            sizes[x] = rng.randint(33, 3000) if len(ks) == 1 else rng.randint(6, 70)
        a, b, c = batch + ms + ks, batch + ks + ns, batch + ms + ns
        for lst in (a, b, c):
            rng.shuffle(lst)
        letters = ("".join(a), "".join(b), "".join(c))
        k_total = 1
        for x in ks:
            k_total *= sizes[x]
        if k_total > 32 and _fits(letters, sizes):
            break
    operands = {op: {"strides": _strides(ls, sizes, rng, broadcast=op != "C")} for op, ls in zip("ABC", letters)}
    if dtype != "f32" and rng.random() < 0.3:
        operands["C"]["dtype"] = "f32"
    for o in operands.values():
        if rng.random() < 0.2:
            o["offset"] = rng.randint(1, 37)
        if rng.random() < 0.5:
            o["align"] = 16
            o.pop("offset", None)
    return {"name": name, "arch": "sm_90a", "dtype": dtype, "contraction": f"{letters[0]},{letters[1]}->{letters[2]}",
            "sizes": sizes, "operands": operands, "alpha": rng.choice([1.0, 0.5, -1.25]),
            "beta": rng.choice([0.0, 0.0, 1.0, -2.0])}


