"""A run-time-sized spec's .cu: its buckets' kernels in order, one-size buckets that differ only in their row
count folded into one template, and the header comment's plans and routes each said once.

A bucket of one size (m = 2) compiles its rows into its traits. Neighbouring such buckets of the same kernel whose
namespaces differ only where each has its own row count become one `template <int ROWS> struct Bucket` holding
the traits and the launcher; the entry point calls `<group>::Bucket<m>::launch`. Instantiating the template at a
bucket's m gives back that bucket's code token for token, so folding changes no kernel."""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import Body

# A body's traits: its `struct Problem` where it has one, then `struct Traits` to the `};` closing it, each at the
# start of a line.
_TRAITS = re.compile(r"^(?:struct Problem \{\n.*?^\};\n\n)?struct Traits(?: : Problem)? \{\n.*?^\};\n",
                     re.MULTILINE | re.DOTALL)
# The names the problem and the traits declare as types (a template's are named `typename Traits::X` outside).
_TRAITS_TYPE = re.compile(r"^  (?:using (\w+) =|struct (\w+)\b)", re.MULTILINE)
# An integer literal without suffix (not part of a name, a float or a suffixed literal).
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


@dataclass(frozen=True)
class Member:
    """One bucket's kernel in a fold: its body, its row count and its launch's dynamic shared memory."""
    body: Body
    kernel: str  # the body's namespace without the bucket's label: the same for every member of a fold
    rows: int
    smem: int


def rows_template(texts: list[str], rows: list[int]) -> str | None:
    """`texts` (of buckets with `rows` rows each) as one template's text, ROWS at every integer literal where each
    text has its own row count; None where they differ anywhere else."""
    split = [_INT.split(t) for t in texts]  # text, number, text, number, ..., text
    if len({len(s) for s in split}) != 1:
        return None
    out = []
    for i, parts in enumerate(zip(*split)):
        if len(set(parts)) == 1:
            out.append(parts[0])
        elif i % 2 == 1 and all(p == str(r) for p, r in zip(parts, rows)):  # "01" is no literal of 1
            out.append("ROWS")
        else:
            return None
    return "".join(out)


def _bucket_template(members: list[Member], sizes: str) -> str | None:
    """The members' namespaces as `template <int ROWS> struct Bucket`: the traits, then the rest with the launcher
    a static member and the traits' types named `typename Traits::X`."""
    if len({m.smem for m in members}) != 1 or not all(_TRAITS.search(m.body.text) for m in members):
        return None
    text = rows_template([m.body.text for m in members], [m.rows for m in members])
    if text is None:
        return None
    traits = _TRAITS.search(text)
    assert traits is not None
    types = "|".join(a or b for a, b in _TRAITS_TYPE.findall(traits.group(0)))
    rest = re.sub(r"^cudaError_t launch\(", "static cudaError_t launch(", text[traits.end():], flags=re.MULTILINE)
    if types:
        rest = re.sub(rf"(?<!typename )\bTraits::({types})\b", r"typename Traits::\1", rest)
    inner = text[:traits.end()] + rest
    body = "\n".join(f"  {line}" if line else line for line in inner.strip("\n").splitlines())
    return (f"// The {members[0].kernel} kernels of the buckets {sizes}: one template, ROWS is the bucket's m.\n"
            f"template <int ROWS>\nstruct Bucket {{\n{body}\n}};\n")


def fold(routes: list[dict], letter: str) -> tuple[list[Body], dict[str, int], dict[str, str]]:
    """The .cu's kernel namespaces in order (a fold's in place of its first bucket's), the shared memory of each
    new namespace, and for each folded bucket's namespace what the entry point calls instead (`<group>::Bucket<m>`).
    `routes`: each bucket's, in order, with `rows` (its one size, or None), `label`, `bodies` and `kernel_smem`."""
    runs: list[list[Member]] = []
    for slot in range(max(len(r["bodies"]) for r in routes)):
        run: list[Member] = []
        for r in routes:
            body = r["bodies"][slot] if slot < len(r["bodies"]) else None
            member = None
            if r["rows"] is not None and body is not None:
                member = Member(body, body.namespace.removeprefix(f"{r['label']}_"), r["rows"],
                                r["kernel_smem"][body.namespace])
            if member is not None and run and run[-1].kernel == member.kernel:
                run.append(member)
                continue
            runs.append(run)
            run = [member] if member is not None else []
        runs.append(run)
    first_of: dict[str, Body] = {}  # a fold's first bucket's namespace -> the fold's body
    callee: dict[str, str] = {}  # a folded bucket's namespace -> what the entry point calls
    smem: dict[str, int] = {}
    for run in runs:
        if len(run) < 2:
            continue
        namespace = f"m{run[0].rows}_{run[-1].rows}_{run[0].kernel}"
        text = _bucket_template(run, _join_sizes(letter, [(m.rows, m.rows) for m in run]))
        if text is None:
            continue
        first_of[run[0].body.namespace] = Body(namespace=namespace, text=text, title="", decisions=())
        smem[namespace] = run[0].smem
        for m in run:
            callee[m.body.namespace] = f"{namespace}::Bucket<{m.rows}>"
    bodies = [first_of.get(b.namespace, b) for r in routes for b in r["bodies"]
              if b.namespace not in callee or b.namespace in first_of]
    return bodies, smem, callee


def _join_sizes(letter: str, spans: list[tuple[int, int]]) -> str:
    """`m = 2`, `m = 2, 5`, `m in 2..8`, `m in 1, 9..64`: the sizes of `spans`, neighbouring ones joined."""
    joined: list[list[int]] = []
    for lo, hi in sorted(spans):
        if joined and lo == joined[-1][1] + 1:
            joined[-1][1] = hi
        else:
            joined.append([lo, hi])
    if all(lo == hi for lo, hi in joined):
        return f"{letter} = " + ", ".join(str(lo) for lo, _ in joined)
    return f"{letter} in " + ", ".join(str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in joined)


def merged_plans(routes: list[dict], letter: str) -> list[dict]:
    """The header comment's plans: each distinct kernel plan once, with the buckets that use it (`sizes`), its
    `title` and `decisions`; in the order of their first bucket."""
    plans: dict[tuple, dict] = {}
    for r in routes:
        for b in r["bodies"]:
            key = (b.namespace.removeprefix(f"{r['label']}_"), b.title, b.decisions)
            plans.setdefault(key, {"spans": [], "title": b.title, "decisions": b.decisions})["spans"].append(r["span"])
    return [{**p, "sizes": _join_sizes(letter, p["spans"])} for p in plans.values()]


def merged_routes(routes: list[dict], letter: str) -> list[dict]:
    """The run-time dispatch's comment lines: neighbouring buckets whose kernels are described alike as one line."""
    lines: list[dict] = []
    for r in routes:
        text = r["summary"] + (f"; {r['dispatch']['desc']}" if r["dispatch"] else "")
        if lines and lines[-1]["text"] == text:
            lines[-1]["spans"].append(r["span"])
        else:
            lines.append({"text": text, "spans": [r["span"]]})
    for line in lines:
        lo, hi = line["spans"][0][0], line["spans"][-1][1]
        line["sizes"] = f"{letter} = {lo}" if lo == hi else f"{letter} in {lo}..{hi}"
    return lines
