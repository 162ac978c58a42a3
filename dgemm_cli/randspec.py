"""Random valid specs for the verification suite (`deepgemm random-specs`) and property tests.

Each spec is a plain dict in the YAML schema: random dtypes, GEMM shorthand or a contraction of
up to 9 letters, sizes 1..300 a dim, random memory orders (permuted), padded strides, offsets,
stride-0 broadcast on inputs, byte strides, alpha/beta. A share of the contractions take the forms
numpy.einsum accepts beyond `ab,bc->ac`: no output letters (a full reduction, FULL_REDUCTION_SHARE: the dot
family's problems), summed letters in one input only, an input with no letters (a scalar) and the implicit output
(no `->`). Sizes are redrawn
until the problem stays small enough to verify in well under a second. A share may size one row letter
at run time (`{min, max}`, its strides drawn for the max). A share gets a fused epilogue: bias, scale and
residual views (broadcast, permuted, padded, offset, other dtypes), activations, clamps, and an output view D.
A share of the decode-shaped specs may be redrawn wide (N in the thousands, f16 / bf16, B in the nn.Linear layout)
for the tensor-core GEMV family (WIDE_DECODE_SHARE), a share of those over a batch of 2..8 products
(WIDE_BATCH_SHARE), a share of those with a short K of 8..192 (WIDE_SHORT_K_SHARE), and a share shaped for tcgemv's
staged activation (WIDE_STAGED_SHARE).
"""

from __future__ import annotations

import math
import random

MAX_FLOPS = 2e9
TMA_SHARE = 0.35  # specs whose views a TMA tensor map can take (16-byte strides), sized for the Hopper family
SMALL_M_SHARE = 0.0  # decode-shaped specs (M <= 64, long K) for the small-M split-K family
# Contraction draws with no output letters (C one element: M = N = 1, what the dot family takes where K is long
# enough).
FULL_REDUCTION_SHARE = 0.12
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
# whole 512s. The planner prices that kernel above hopper, so the sweep reaches it with `gen --family tcgemv`; the
# wide draws' N and K hit its windows about once in a thousand. Drawn from a generator of the spec's own (at 0, no
# other draw changes).
WIDE_STAGED_SHARE = 0.0
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


def _contraction_letters(rng: random.Random) -> tuple[tuple[str, str, str], bool, list[str]]:
    """Letters of A, B and C in random orders, whether to write the output implicitly (numpy's rule
    gives exactly C's letters then), and every letter once."""
    form = rng.random()
    full_reduction = form < FULL_REDUCTION_SHARE  # `ab,ba->`: C is one element
    scalar_a = FULL_REDUCTION_SHARE <= form < 0.17  # `,bc->c`: A has no letters
    n_batch, n_m, n_n, n_k = rng.randint(0, 1), rng.randint(0, 2), rng.randint(0, 2), rng.randint(1, 2)
    # Summed letters in one input only: the other input is broadcast over them.
    n_a_only, n_b_only = (rng.randint(0, 1), rng.randint(0, 1)) if rng.random() < 0.25 else (0, 0)
    if full_reduction:
        n_batch = n_m = n_n = 0
    elif scalar_a:
        n_batch = n_m = n_k = n_a_only = 0
        n_n = max(n_n, 1)
    elif n_m + n_n == 0:
        n_m = 1
    pool = iter(rng.sample(LETTERS, 10))
    batch, ms, ns, ks, a_only, b_only = ([next(pool) for _ in range(c)]
                                         for c in (n_batch, n_m, n_n, n_k, n_a_only, n_b_only))
    a = batch + ms + ks + a_only
    b = batch + ks + ns + b_only
    c = batch + ms + ns
    for lst in (a, b, c):
        rng.shuffle(lst)
    # Without `->` numpy's output is the letters that appear once, sorted: C then has to be that.
    implicit = not batch and not a_only and not b_only and rng.random() < 0.3
    if implicit:
        c.sort()
    return ("".join(a), "".join(b), "".join(c)), implicit, batch + ms + ns + ks + a_only + b_only


def random_spec(rng: random.Random, name: str, tma_share: float = TMA_SHARE,
                small_m_share: float = SMALL_M_SHARE, dynamic_share: float = DYNAMIC_SHARE,
                epilogue_share: float = EPILOGUE_SHARE, row_blocks_share: float = ROW_BLOCKS_SHARE,
                a_vectors_share: float = A_VECTORS_SHARE, wide_decode_share: float = WIDE_DECODE_SHARE,
                wide_batch_share: float = WIDE_BATCH_SHARE, wide_short_k_share: float = WIDE_SHORT_K_SHARE,
                wide_staged_share: float = WIDE_STAGED_SHARE) -> dict:
    drawn: dict = {}  # a widened spec's letters and sizes as drawn
    spec = _fixed_spec(rng, name, tma_share, small_m_share, row_blocks_share, a_vectors_share, wide_decode_share,
                       drawn, wide_batch_share, wide_short_k_share, wide_staged_share)
    if rng.random() < dynamic_share:
        if drawn:  # the shared stream takes the draws of the spec as drawn (the others stay as without the share)
            _size_a_row_at_run_time(drawn, rng)
            _size_a_row_at_run_time(spec, random.Random(f"{name}/wide-decode/run-time"))
        else:
            _size_a_row_at_run_time(spec, rng)
    own = random.Random(f"{name}/epilogue")
    if own.random() < epilogue_share:
        _add_epilogue(spec, own)
    return spec


def _c_letters_and_sizes(spec: dict) -> tuple[str, dict[str, int]]:
    """C's letters (in C's order) and every letter's largest size, from a spec dict."""
    if "gemm" in spec:
        g = spec["gemm"]
        sizes = {x: (v["max"] if isinstance(v, dict) else v) for x, v in g.items()}
        return ("bmn" if "batch" in g else "mn"), {"b" if x == "batch" else x: n for x, n in sizes.items()}
    sizes = {x: (v["max"] if isinstance(v, dict) else v) for x, v in spec["sizes"].items()}
    inputs, arrow, out = spec["contraction"].partition("->")
    if not arrow:
        every = inputs.replace(",", "")
        out = "".join(sorted(x for x in every if every.count(x) == 1))
    return out, sizes


def _add_epilogue(spec: dict, rng: random.Random) -> None:
    """1 to 5 steps in a random order, each view with explicit strides (so that a run-time-sized letter's
    strides hold for every size), sometimes another dtype, an offset or a 16-byte promise; sometimes an
    output view D in its own memory order."""
    c_letters, sizes = _c_letters_and_sizes(spec)
    dtypes = ["f16", "bf16", "f32"]

    def view(letters: str) -> dict:
        v: dict = {"letters": letters, "strides": _strides(letters, sizes, rng, broadcast=True)}
        if rng.random() < 0.3:
            v["dtype"] = rng.choice(dtypes)
        if rng.random() < 0.25:
            v["offset"] = rng.randint(1, 19)
        return v

    def some_letters() -> str:
        picked = [x for x in c_letters if rng.random() < 0.5] or [rng.choice(c_letters)]
        rng.shuffle(picked)
        return "".join(picked)

    kinds = ["activation", "clamp", "residual"] + (["bias", "scale"] if c_letters else [])
    chosen = rng.sample(kinds, rng.randint(1, len(kinds)))
    steps: list[dict] = []
    for kind in chosen:
        if kind == "activation":
            steps.append({"activation": rng.choice(ACTIVATION_NAMES)})
        elif kind == "clamp":
            lo = round(rng.uniform(-2.0, 0.5), 3)
            steps.append({"clamp": [lo, round(lo + rng.uniform(0.0, 2.5), 3)]})
        elif kind == "residual":
            order = list(c_letters)
            rng.shuffle(order)
            steps.append({"residual": view("".join(order))})
        else:
            steps.append({kind: view(some_letters())})
    spec["epilogue"] = steps
    if rng.random() < 0.3:
        d: dict = {"strides": _strides(c_letters, sizes, rng, broadcast=False)}
        if rng.random() < 0.3:
            d["dtype"] = rng.choice(dtypes)
        if rng.random() < 0.3:
            d["align"] = 16
        spec["operands"]["D"] = d


def _size_a_row_at_run_time(spec: dict, rng: random.Random) -> None:
    """Give one row letter (in A and C, not B) of size >= 2 a run-time range ending at its size, when the
    spec writes A's and C's strides explicitly (those were drawn for the largest size, so they hold for
    every size). Leaves the spec fixed-size when no letter qualifies."""
    if "gemm" in spec:
        if any("layout" in spec["operands"][x] for x in "AC") or spec["gemm"]["m"] < 2:
            return
        sizes, x = spec["gemm"], "m"
    else:
        if "->" not in spec["contraction"]:
            return
        a, b, c = spec["contraction"].replace("->", ",").split(",")
        rows = [y for y in a if y in c and y not in b and spec["sizes"][y] >= 2]
        if not rows:
            return
        sizes, x = spec["sizes"], rng.choice(rows)
    hi = sizes[x]
    sizes[x] = {"min": rng.choice([1, 1, rng.randint(1, hi)]), "max": hi}


def _fixed_spec(rng: random.Random, name: str, tma_share: float, small_m_share: float,
                row_blocks_share: float = 0.0, a_vectors_share: float = 0.0, wide_decode_share: float = 0.0,
                drawn: dict | None = None, wide_batch_share: float = 0.0, wide_short_k_share: float = 0.0,
                wide_staged_share: float = 0.0) -> dict:
    """`drawn`: where a decode-shaped spec is widened, its contraction and sizes from before go there."""
    if rng.random() < small_m_share:
        spec = _small_m_spec(rng, name)
        if wide_decode_share > 0:
            wide = random.Random(f"{name}/wide-decode")
            if wide.random() < wide_decode_share:
                if drawn is not None:
                    drawn.update(contraction=spec["contraction"], sizes=dict(spec["sizes"]))
                batched = random.Random(f"{name}/wide-batch")
                short = random.Random(f"{name}/wide-short-k")
                products = batched.randint(2, 8) if batched.random() < wide_batch_share else 1
                staged = random.Random(f"{name}/wide-staged")
                staged_draw = wide_staged_share > 0 and staged.random() < wide_staged_share
                _widen_decode(spec, wide, 1 if staged_draw else products,
                              short if short.random() < wide_short_k_share else None,
                              staged if staged_draw else None)
        own = random.Random(f"{name}/a-vectors")
        if own.random() < a_vectors_share:
            _redraw_a_in_vectors(spec, own)
        return spec
    if rng.random() < tma_share:
        return _tma_spec(rng, name, row_blocks_share)
    dtype = rng.choice(["f16", "bf16", "f32"])
    spec: dict = {"name": name, "arch": "sm_90a", "dtype": dtype}
    if rng.random() < 0.4:
        batch = rng.random() < 0.3
        while True:
            sizes = {x: rng.choice([rng.randint(1, 300), rng.randint(1, 40)]) for x in "mnk"}
            if batch:
                sizes["b"] = rng.randint(1, 6)
            letters = ("bmk", "bkn", "bmn") if batch else ("mk", "kn", "mn")
            if _fits(letters, sizes):
                break
        spec["gemm"] = {"m": sizes["m"], "n": sizes["n"], "k": sizes["k"], **({"batch": sizes["b"]} if batch else {})}
        operands = {}
        for op, ls in zip("ABC", letters):
            if rng.random() < 0.5 and not batch:
                operands[op] = {"layout": rng.choice(["row", "col"])}
            else:
                operands[op] = {"strides": _strides(ls, sizes, rng, broadcast=op != "C")}
    else:
        while True:
            letters, implicit, every_letter = _contraction_letters(rng)
            sizes = _draw_sizes(every_letter, rng)
            if _fits(letters, sizes):
                break
        spec["contraction"] = f"{letters[0]},{letters[1]}" + ("" if implicit else f"->{letters[2]}")
        spec["sizes"] = sizes
        operands = {op: {"strides": _strides(ls, sizes, rng, broadcast=op != "C")} for op, ls in zip("ABC", letters)}
    if dtype != "f32" and rng.random() < 0.3:
        operands["C"]["dtype"] = "f32"
    for o in operands.values():
        elem = 4 if o.get("dtype", dtype) == "f32" else 2
        if rng.random() < 0.3:
            o["offset"] = rng.randint(1, 37)
        if rng.random() < 0.4:
            o["align"] = 16
            if rng.random() < 0.5:
                o.pop("offset", None)
        if "strides" in o and rng.random() < 0.2:
            o["byte_strides"] = [s * elem for s in o.pop("strides")]
    spec["operands"] = operands
    spec["alpha"] = rng.choice([1.0, 1.0, 0.5, -1.25])
    spec["beta"] = rng.choice([0.0, 0.0, 0.0, 1.0, 0.5, -2.0])
    return spec


def random_specs(count: int, seed: int, tma_share: float = TMA_SHARE, small_m_share: float = SMALL_M_SHARE,
                 dynamic_share: float = DYNAMIC_SHARE, epilogue_share: float = EPILOGUE_SHARE,
                 row_blocks_share: float = ROW_BLOCKS_SHARE, a_vectors_share: float = A_VECTORS_SHARE,
                 wide_decode_share: float = WIDE_DECODE_SHARE,
                 wide_batch_share: float = WIDE_BATCH_SHARE,
                 wide_short_k_share: float = WIDE_SHORT_K_SHARE,
                 wide_staged_share: float = WIDE_STAGED_SHARE) -> list[dict]:
    rng = random.Random(seed)
    return [random_spec(rng, f"rand_{seed}_{i:03d}", tma_share, small_m_share, dynamic_share, epilogue_share,
                        row_blocks_share, a_vectors_share, wide_decode_share, wide_batch_share, wide_short_k_share,
                        wide_staged_share)
            for i in range(count)]


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
