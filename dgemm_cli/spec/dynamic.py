"""The run-time-sized letter: which letter may take a range, and strides that hold over all of it."""

from __future__ import annotations

from typing import Any

from dgemm_cli.spec.model import OperandView
from dgemm_cli.spec.operand import read_operand
from dgemm_cli.spec.reader import SpecReader


def check_dynamic(ctx: SpecReader, dynamic: dict[str, tuple[int, int]], sizes: dict[str, int],
                   views: tuple[OperandView, ...], op_maps: dict[str, dict[str, Any]], shorthand: str) -> None:
    """A run-time size is a row letter (in A and C, not in B: the tokens of a decode batch), one per
    spec, and no stride may depend on it: the strides worked out for its largest size must hold for
    every size (explicit strides, or layouts where the letter is outermost)."""
    if not dynamic:
        return
    if len(dynamic) > 1:
        second = list(dynamic)[1]
        raise ctx.fail(f"sizes.{second}", f"{len(dynamic)} letters have run-time sizes ({', '.join(dynamic)})",
                       "give one letter (the rows, e.g. the tokens of a decode batch) a range, the others sizes")
    (x, (lo, _)), = dynamic.items()
    where = f"gemm.{x}" if shorthand == "gemm" else f"sizes.{x}"
    a, b, c = views
    if x in b.letters or x not in a.letters or x not in c.letters:
        raise ctx.fail(where, f"'{x}' has a run-time size but is not a row letter (in A and C, not in B)",
                       "only the rows of A and C (M) may be sized at run time; give the other letters sizes")
    for view in views:
        check_dynamic_strides(ctx, dynamic, sizes, view, op_maps[view.name], f"operands.{view.name}", shorthand)


def check_dynamic_strides(ctx: SpecReader, dynamic: dict[str, tuple[int, int]], sizes: dict[str, int],
                           view: OperandView, raw: dict[str, Any], key: str, shorthand: str) -> None:
    """The strides worked out for the run-time letter's largest size must hold at its smallest."""
    if not dynamic:
        return
    (x, (lo, _)), = dynamic.items()
    if x not in view.letters:  # strides of a view without the letter cannot depend on its size
        return
    quiet = SpecReader(ctx.path)  # the view was read once already: no second round of notes
    again = read_operand(quiet, view.name, view.letters, dict(sizes, **{x: lo}), raw, view.dtype, shorthand, key=key)
    if again.strides != view.strides:
        given = next((k for k in ("layout", "strides", "byte_strides") if k in raw),
                     "layout" if shorthand == "gemm" else "strides")
        raise ctx.fail(f"{key}.{given}",
                       f"{view.name}'s strides {list(view.strides)} depend on the run-time size of '{x}' "
                       f"({list(again.strides)} when it is {lo})",
                       f"give explicit strides (elements) that hold for every size, or a layout where '{x}' "
                       "is the outermost dim")
