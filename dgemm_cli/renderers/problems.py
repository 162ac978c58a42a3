"""The problem part of a .cu's kernel traits, said once: kernels that see the same problem (the views, the sizes and
the store) share one `struct Problem`, and a Problem no other kernel shares is folded back into its traits.

A family's template opens its traits with `struct Problem { ... };` and `struct Traits : Problem {`
(templates/common/_traits.j2). A later namespace whose Problem is the same text as an earlier one's names that one
(`using Problem = m5_8_tcgemv::Problem;`), inside a bucket template through the template at the same ROWS; the
compiled code is the same either way."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from . import Body

# A traits' problem and the traits' opening line, at the start of a line or two spaces in (in a bucket template).
_PROBLEM = re.compile(r"^(?P<indent> *)struct Problem \{\n(?P<body>.*?)^(?P=indent)\};\n\n"
                      r"(?P=indent)struct Traits : Problem \{\n", re.MULTILINE | re.DOTALL)


def share_problems(bodies: list[Body]) -> list[Body]:
    """`bodies` (the .cu's kernel namespaces in order) with each Problem said once: declared by its first namespace
    and named by the later ones where two or more see it, else folded back into the traits."""
    found = {b.namespace: _PROBLEM.search(b.text) for b in bodies}
    count = Counter(m.group(0) for m in found.values() if m is not None)
    first: dict[str, str] = {}  # a shared problem's text -> the namespace that declares it
    out = []
    for b in bodies:
        m = found[b.namespace]
        if m is None:
            out.append(b)
            continue
        indent, text = m["indent"], m.group(0)
        if count[text] == 1:  # the traits hold it: `struct Traits {`, the problem, a blank line, the plan
            shared = f"{indent}struct Traits {{\n{m['body']}\n"
        elif text in first:
            owner = first[text]
            ref = f"typename {owner}::Bucket<ROWS>::Problem" if indent else f"{owner}::Problem"
            shared = (f"{indent}using Problem = {ref};  // {owner}'s views, sizes and store\n\n"
                      f"{indent}struct Traits : Problem {{\n")
        else:
            first[text] = b.namespace
            out.append(b)
            continue
        out.append(replace(b, text=b.text[:m.start()] + shared + b.text[m.end():]))
    return out
