"""The `contraction:` string -> the letters of A, B and C, read as numpy.einsum reads it."""

from __future__ import annotations

import re
from typing import Any

from dgemm_cli.spec.reader import SpecReader

OPERAND_LETTERS = re.compile(r"[A-Za-z]*")


def parse_einsum(ctx: SpecReader, expr: Any) -> tuple[str, str, str, bool]:
    """The letters of A, B and C, read the way numpy.einsum reads the string: two inputs, then the
    output after `->`, or, without `->`, the letters that appear once, in alphabetical order (then
    the last value, `implicit`, is True).

    An output may be empty (a full reduction: C is one element), an input may be empty (a scalar),
    and a letter in one input only and not in the output is summed like any other (the other input
    is broadcast over it). What einsum itself rejects, and what one kernel cannot do, is an error:
    not two inputs, a letter twice in one operand (a diagonal), `...`, an output letter no input has.
    """
    key = "contraction"
    if not isinstance(expr, str) or not expr.strip():
        raise ctx.fail(key, f"{expr!r} is not of the form 'ab,bc->ac'",
                       "write two inputs and the output, e.g. \"nchw,kc->nkhw\" (or \"ab,bc\", numpy's implicit "
                       "output)")
    if "..." in expr:
        raise ctx.fail(key, f"{expr!r} uses '...' (numpy's ellipsis: dims left unnamed and broadcast)",
                       "name every dim with a letter of its own; a kernel needs each dim's size and stride")
    if expr.count("->") > 1:
        raise ctx.fail(key, f"{expr!r} has {expr.count('->')} arrows", "write one '->' before the output, or none")
    inputs, arrow, output = expr.partition("->")
    terms = [t.strip() for t in inputs.split(",")]
    output = output.strip()
    for term in [*terms, output]:
        if not OPERAND_LETTERS.fullmatch(term):
            bad = next(ch for ch in term if not ch.isascii() or not ch.isalpha())
            raise ctx.fail(key, f"{expr!r} is not of the form 'ab,bc->ac': {bad!r} in operand '{term}'",
                           "use letters a-z and A-Z for dims, ',' between the two inputs and '->' before the output")
    if len(terms) != 2:
        if len(terms) == 1:
            raise ctx.fail(key, f"{expr!r} has one input; a kernel here multiplies two (A and B)",
                           "write two inputs, e.g. \"ab,bc->ac\" (a transpose or a sum of one tensor is not a "
                           "product)")
        # The first step of a split, concrete: the first pair keeps the letters used later.
        everything = "".join(terms)
        final = output if arrow else "".join(sorted(x for x in everything if everything.count(x) == 1))
        later = "".join(terms[2:]) + final
        kept = "".join(x for x in dict.fromkeys(terms[0] + terms[1]) if x in later)
        raise ctx.fail(key, f"{expr!r} has {len(terms)} inputs; one kernel contracts two",
                       f"split it into pairwise contractions, one spec each: e.g. '{terms[0]},{terms[1]}->{kept}' "
                       "first, then its result with the next input (opt_einsum.contract_path finds a cheap order)")
    a, b = terms
    for op, term in (("A", a), ("B", b), ("C", output)):
        twice = next((x for x in term if term.count(x) > 1), None)
        if twice is None:
            continue
        if op == "C":
            raise ctx.fail(key, f"letter '{twice}' appears twice in C ('{term}')",
                           "write each output letter once (numpy.einsum rejects a repeated output letter too)")
        raise ctx.fail(key, f"letter '{twice}' appears twice in {op} ('{term}'): numpy takes the diagonal, "
                            "which is a strided view, not a contraction",
                       "write the letter once, with the sum of the repeated dims' strides as its stride "
                       "(the diagonal of a dense [n, n] is one letter of stride n + 1)")
    if not arrow:
        output = "".join(sorted(x for x in a + b if (a + b).count(x) == 1))
    for x in output:
        if x not in a and x not in b:
            raise ctx.fail(key, f"letter '{x}' appears in C only",
                           "every output letter must come from A or B (numpy.einsum rejects it too): "
                           "add it to an input or drop it from the output")
    if not (a or b):
        raise ctx.fail(key, f"{expr!r} has no letters: a product of two scalars",
                       "give at least one operand a letter; there is no tensor to generate a kernel for")
    return a, b, output, not arrow
