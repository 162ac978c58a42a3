"""The `epilogue:` list -> `EpilogueStep`s: activations, clamps, and the bias / scale / residual views."""

from __future__ import annotations

from typing import Any

from dgemm_cli.spec.dynamic import check_dynamic_strides
from dgemm_cli.spec.einsum import OPERAND_LETTERS
from dgemm_cli.spec.model import ACTIVATIONS, EPILOGUE_STEPS, EpilogueStep, OperandView
from dgemm_cli.spec.operand import read_operand
from dgemm_cli.spec.reader import SpecReader
from dgemm_cli.spec.suggest import fix_naming

ACTIVATION_ALIASES = {"swish": "silu", "logistic": "sigmoid"}
EPILOGUE_VIEW_KEYS = {"letters", "layout", "strides", "byte_strides", "dtype", "offset", "align"}


def read_epilogue(ctx: SpecReader, raw: Any, c: OperandView, sizes: dict[str, int],
              dynamic: dict[str, tuple[int, int]]) -> tuple[EpilogueStep, ...]:
    """The `epilogue:` list: each item one step, `{bias: {letters: n, ...}}`, `{activation: gelu_tanh}`,
    `{clamp: [lo, hi]}`, ... The views of bias / scale / residual take the operand keys (strides or
    byte_strides in their letters' order, offset, dtype (default C's), align); dense by default."""
    if raw is None:
        return ()
    example = "`epilogue: [{bias: {letters: n}}, {activation: gelu_tanh}]`"
    if not isinstance(raw, list):
        raise ctx.fail("epilogue", f"expected a list of steps, got {type(raw).__name__}", f"write e.g. {example}")
    steps = []
    for i, item in enumerate(raw):
        key = f"epilogue[{i}]"
        if isinstance(item, str) and item in ACTIVATIONS:
            raise ctx.fail(key, f"'{item}' is an activation, written as a step of its own",
                           f"write `{{activation: {item}}}`")
        if not isinstance(item, dict) or len(item) != 1:
            raise ctx.fail(key, f"each step is a mapping with one key, got {item!r}",
                           f"use one of {', '.join(EPILOGUE_STEPS)}, e.g. {example}")
        (kind, value), = item.items()
        if kind not in EPILOGUE_STEPS:
            raise ctx.fail(f"{key}.{kind}", f"unknown epilogue step '{kind}'", fix_naming(kind, EPILOGUE_STEPS))
        key = f"{key}.{kind}"
        if kind == "activation":
            steps.append(EpilogueStep(kind, activation=ctx.choice(value, key, ACTIVATIONS, "activation",
                                                                  ACTIVATION_ALIASES)))
        elif kind == "clamp":
            if not isinstance(value, list) or len(value) != 2:
                raise ctx.fail(key, f"expected [lo, hi], got {value!r}", "write e.g. `clamp: [-1.0, 1.0]`")
            lo, hi = ctx.number(value[0], f"{key}[0]"), ctx.number(value[1], f"{key}[1]")
            if lo > hi:
                raise ctx.fail(key, f"lo {lo} > hi {hi}", "give the lower bound first")
            steps.append(EpilogueStep(kind, clamp=(lo, hi)))
        else:
            earlier = next((j for j, st in enumerate(steps) if st.kind == kind), None)
            if earlier is not None:
                raise ctx.fail(key, f"a second {kind} step (the first is epilogue[{earlier}])",
                               f"give one {kind} view (the C API takes one {kind} pointer); fold two into one "
                               f"tensor over the union of their letters")
            view = _epilogue_view(ctx, key, kind, value, c, sizes)
            check_dynamic_strides(ctx, dynamic, sizes, view, _view_keys(value), key, "contraction")
            steps.append(EpilogueStep(kind, view=view))
    return tuple(steps)


def _view_keys(value: dict[str, Any]) -> dict[str, Any]:
    """An epilogue view's operand keys, without `letters:`."""
    return {k: v for k, v in value.items() if k != "letters"}


def _epilogue_view(ctx: SpecReader, key: str, kind: str, value: Any, c: OperandView,
                   sizes: dict[str, int]) -> OperandView:
    raw = dict(ctx.mapping(value, key, EPILOGUE_VIEW_KEYS, f"the {kind} view"))
    if kind == "residual":
        letters = raw.pop("letters", c.letters)
        if not isinstance(letters, str) or sorted(letters) != sorted(c.letters):
            raise ctx.fail(f"{key}.letters", f"a residual has C's letters ('{c.letters}'), got {letters!r}",
                           "leave `letters:` out (C's order), or list C's letters in the residual's memory order")
    else:
        if "letters" not in raw:
            raise ctx.fail(f"{key}.letters", "missing",
                           f"say which of C's letters ('{c.letters}') the {kind} runs over, e.g. `letters: "
                           f"{c.letters[-1:] or 'n'}`, or `letters: \"\"` for one scalar")
        letters = raw.pop("letters")
        # No letters ("") is one element for every element of C: a scalar bias or scale read from memory.
        if not isinstance(letters, str) or not OPERAND_LETTERS.fullmatch(letters):
            raise ctx.fail(f"{key}.letters", f"{letters!r} is not a string of letters",
                           f"write some of C's letters ('{c.letters}'), or \"\" for one scalar")
        stray = [x for x in letters if x not in c.letters]
        if stray:
            raise ctx.fail(f"{key}.letters", f"letter '{stray[0]}' is not one of C's ('{c.letters}')",
                           f"a {kind} runs over C's letters only: use some of '{c.letters}'")
        twice = next((x for x in letters if letters.count(x) > 1), None)
        if twice is not None:
            raise ctx.fail(f"{key}.letters", f"letter '{twice}' appears twice", "write each letter once")
    return read_operand(ctx, kind, letters, sizes, raw, c.dtype, "contraction", key=key)
