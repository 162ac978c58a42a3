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
staged activation (WIDE_STAGED_SHARE). A share is redrawn for the hopper family's A-multicast kernel (MULTICAST_SHARE).
A share of the full reductions is pinned to the dot family (DOT_SHARE). A share is redrawn as an e4m3 GEMM with its
scales (FP8_SHARE, randspec/fp8.py), and a share as an e4m3 product over views fp8_hopper refuses (FP8_VIEWS_SHARE).
The staged, multicast and dot draws pin
their kernel with `plan:`, since the cost model prices others lower.

Modules: common.py (the shares, bounds, strides and sizes), decode.py (the decode-shaped and wide draws), tma.py (the
hopper family's draws), fp8.py (the e4m3 draws); this one draws a spec and adds the run-time size and the epilogue.
"""

from __future__ import annotations

import random

from dgemm_cli.randspec.common import (  # noqa: F401 (the CLI's defaults)
    A_VECTORS_SHARE,
    ACTIVATION_NAMES,
    DOT_SHARE,
    DYNAMIC_SHARE,
    EPILOGUE_SHARE,
    FP8_SHARE,
    FP8_VIEWS_SHARE,
    FULL_REDUCTION_SHARE,
    LETTERS,
    MAX_ELEMENTS,
    MAX_FLOPS,
    MULTICAST_SHARE,
    ROW_BLOCKS_SHARE,
    SMALL_M_SHARE,
    TMA_SHARE,
    WIDE_BATCH_SHARE,
    WIDE_DECODE_SHARE,
    WIDE_MAX_MACS,
    WIDE_MAX_WEIGHT,
    WIDE_SHORT_K_SHARE,
    WIDE_STAGED_SHARE,
    WQ_SHARE,
    _draw_sizes,
    _fits,
    _strides,
)
from dgemm_cli.randspec.decode import _redraw_a_in_vectors, _small_m_spec, _widen_decode
from dgemm_cli.randspec.fp8 import _fp8_spec, _fp8_view_spec
from dgemm_cli.randspec.tma import _multicast_spec, _tma_spec
from dgemm_cli.randspec.weights import wq_spec


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
                wide_staged_share: float = WIDE_STAGED_SHARE, multicast_share: float = MULTICAST_SHARE,
                dot_share: float = DOT_SHARE, fp8_share: float = FP8_SHARE,
                fp8_views_share: float = FP8_VIEWS_SHARE, wq_share: float = WQ_SHARE) -> dict:
    drawn: dict = {}  # a widened spec's letters and sizes as drawn
    spec = _fixed_spec(rng, name, tma_share, small_m_share, row_blocks_share, a_vectors_share, wide_decode_share,
                       drawn, wide_batch_share, wide_short_k_share, wide_staged_share)
    if rng.random() < dynamic_share:
        if drawn:  # the shared stream takes the draws of the spec as drawn (the others stay as without the share)
            _size_a_row_at_run_time(drawn, rng)
            _size_a_row_at_run_time(spec, random.Random(f"{name}/wide-decode/run-time"))
        else:
            _size_a_row_at_run_time(spec, rng)
    multicast = random.Random(f"{name}/multicast")
    if multicast.random() < multicast_share:  # replaces the spec as drawn; the main stream's draws stay
        spec = _multicast_spec(multicast, name)
    fp8 = random.Random(f"{name}/fp8")
    if fp8.random() < fp8_share:  # replaces the spec as drawn (e4m3 sizes no letter at run time)
        spec = _fp8_spec(fp8, name)
    fp8_views = random.Random(f"{name}/fp8-views")
    if fp8_views.random() < fp8_views_share:  # replaces the spec as drawn
        spec = _fp8_view_spec(fp8_views, name)
    weights = random.Random(f"{name}/weight-only")
    if weights.random() < wq_share:  # replaces the spec as drawn
        spec = wq_spec(weights, name)
    dot = random.Random(f"{name}/dot")
    if dot.random() < dot_share and not _c_letters_and_sizes(spec)[0] and "plan" not in spec:
        spec["plan"] = {"family": "dot"}
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
                 wide_staged_share: float = WIDE_STAGED_SHARE, multicast_share: float = MULTICAST_SHARE,
                 dot_share: float = DOT_SHARE, fp8_share: float = FP8_SHARE,
                 fp8_views_share: float = FP8_VIEWS_SHARE, wq_share: float = WQ_SHARE) -> list[dict]:
    rng = random.Random(seed)
    return [random_spec(rng, f"rand_{seed}_{i:03d}", tma_share, small_m_share, dynamic_share, epilogue_share,
                        row_blocks_share, a_vectors_share, wide_decode_share, wide_batch_share, wide_short_k_share,
                        wide_staged_share, multicast_share, dot_share, fp8_share, fp8_views_share, wq_share)
            for i in range(count)]


