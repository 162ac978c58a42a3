"""The `scales:` mapping -> a `ScaleView` for each e4m3 input: the blocks one f32 scale covers and the view of the
scales (docs/design/fp8.md). `{per: tensor}` and `{per: channel}` are shorthands for blocks."""

from __future__ import annotations

from typing import Any

from dgemm_cli.spec.model import INPUT_ONLY_DTYPES, OperandView, ScaleView
from dgemm_cli.spec.operand import OPERAND_KEYS, read_operand
from dgemm_cli.spec.reader import SpecReader

SCALE_KEYS = {"per", "block"} | OPERAND_KEYS
PER = ("tensor", "channel")
EXAMPLE = "`scales: {A: {block: {k: 128}}, B: {block: {n: 128, k: 128}}}` (DeepGEMM's 1x128 and 128x128 blocks)"


def read_scales(ctx: SpecReader, raw: Any, a: OperandView, b: OperandView, c_letters: str,
                sizes: dict[str, int]) -> tuple[ScaleView, ...]:
    """Each e4m3 input's scales; none where the inputs are not e4m3 (then `scales:` is an error)."""
    fp8 = a.dtype in INPUT_ONLY_DTYPES
    if not fp8:
        if raw is not None:
            raise ctx.fail("scales", f"scales go with e4m3 inputs; A and B are {a.dtype}",
                           "drop `scales:`, or make A and B e4m3 (`dtype: e4m3`)")
        return ()
    if raw is None:
        raise ctx.fail("scales", "missing: A and B are e4m3, each needs its f32 scales", f"add e.g. {EXAMPLE}")
    top = ctx.mapping(raw, "scales", {"A", "B"}, "scales")
    out = []
    for op in (a, b):
        key = f"scales.{op.name}"
        if op.name not in top:
            raise ctx.fail(key, "missing", f"add e.g. {EXAMPLE}")
        out.append(_read_scale(ctx, key, ctx.mapping(top[op.name], key, SCALE_KEYS, f"the scales of {op.name}"), op,
                               c_letters, sizes))
    _check_k_blocks(ctx, *out, a, b, c_letters, sizes)
    return tuple(out)


def _read_scale(ctx: SpecReader, key: str, raw: dict[str, Any], op: OperandView, c_letters: str,
                sizes: dict[str, int]) -> ScaleView:
    if ("per" in raw) == ("block" in raw):
        raise ctx.fail(key, "need exactly one of `per:` and `block:`",
                       "write `{per: tensor}`, `{per: channel}` or `{block: {k: 128}}`")
    if "per" in raw:
        per = ctx.choice(raw["per"], f"{key}.per", PER, "scale mode")
        # A channel is an output row of A (or column of B): the letters of op and C only, one scale an index, and
        # the batch letters (in A, B and C) one a product; the summed letters whole.
        blocks = {x: (1 if per == "channel" and x in c_letters else sizes[x]) for x in op.letters}
    else:
        given = raw["block"]
        if not isinstance(given, dict) or not given:
            raise ctx.fail(f"{key}.block", f"expected a mapping of letters to block sizes, got {given!r}",
                           "write e.g. `block: {k: 128}` (letters not named: one scale an index)")
        blocks = {x: 1 for x in op.letters}
        for x, v in given.items():
            if x not in op.letters:
                raise ctx.fail(f"{key}.block.{x}", f"{op.name} has no letter '{x}' (its letters: '{op.letters}')",
                               f"name letters of {op.name}")
            if isinstance(v, str) and v.strip().lower() == "all":
                blocks[x] = sizes[x]
            else:
                blocks[x] = ctx.integer(v, f"{key}.block.{x}", 1, "a block size or `all`",
                                        "write a whole number of elements, or `all` for the whole extent")
    letters = "".join(x for x in op.letters if blocks[x] < sizes[x])
    counts = {x: -(-sizes[x] // blocks[x]) for x in letters}
    view_keys = {k: v for k, v in raw.items() if k in OPERAND_KEYS}
    if "dtype" in view_keys and ctx.dtype(view_keys.pop("dtype"), f"{key}.dtype") != "f32":
        raise ctx.fail(f"{key}.dtype", "scales are f32", "drop `dtype:` (f32 is the only scale type)")
    # A scale view names its letters itself (the input's, in its order), so `layout:` reads over them in either
    # spec form, as an epilogue view's does.
    view = read_operand(ctx, f"{op.name}_scales", letters, counts, view_keys, "f32", "gemm", key)
    return ScaleView(op.name, tuple((x, min(blocks[x], sizes[x])) for x in op.letters), view)


def _check_k_blocks(ctx: SpecReader, sa: ScaleView, sb: ScaleView, a: OperandView, b: OperandView,
                    c_letters: str, sizes: dict[str, int]) -> None:
    """A's and B's blocks along each summed letter nest, so that a block of the product has one scale of each (a
    block of the whole extent nests with any)."""
    for x in a.letters:
        if x in b.letters and x not in c_letters:
            ka, kb = sa.block(x), sb.block(x)
            if max(ka, kb) < sizes[x] and max(ka, kb) % min(ka, kb):
                raise ctx.fail(f"scales.B.block.{x}", f"A's scales cover {ka} of '{x}' and B's {kb}: neither block "
                                                      "is a multiple of the other",
                               f"give both the same block along '{x}' (128 in DeepGEMM's format)")
