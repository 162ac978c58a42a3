"""Session 21's variants of hopper kernels: B's boxes prefetched into L2 a fixed number of k-iterations ahead of
their loads, inside the producer's loop (`b_lookahead` in templates/hopper/body.cu.j2 at 9acb42f, the commit
this tool runs at: measured 2.7-9 µs slower in call 1, the template code was removed), beside the kernel as the
model plans it.

    python3 tools/session21/lookahead.py OUT SPEC... --ahead S,2S,4

Each spec is generated as planned into OUT/<name>/ and once a lookahead into OUT/<name>_la<D>/ (D a number of
k-iterations, or a multiple of the plan's stages: S, 2S, S/2). A spec given as PATH@SUFFIX@JSON is rendered at
that hopper assignment (tools/render_variant.py) under <name>SUFFIX instead of as planned. Every hopper kernel of
the spec (each bucket of a run-time spec) takes the lookahead; other families' kernels are unchanged."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.render import generate  # noqa: E402
from dgemm_cli.renderers import hopper as hopper_renderer  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from render_variant import render  # noqa: E402

_context = hopper_renderer.context
AHEAD = {"value": ""}


def _distance(text: str, stages: int) -> int:
    if text.endswith("S"):
        return int(text[:-1] or 1) * stages
    if text.startswith("S/"):
        return stages // int(text[2:])
    return int(text)


def context_with_lookahead(spec, views, plan, base):
    ctx = _context(spec, views, plan, base)
    if AHEAD["value"]:
        ctx["b_lookahead"] = _distance(AHEAD["value"], plan.stages)
    return ctx


hopper_renderer.context = context_with_lookahead


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    i = argv.index("--ahead")
    aheads = argv[i + 1].split(",")
    for arg in argv[1:i] + argv[i + 2:]:
        path, suffix, assignment = (arg.split("@", 2) + ["", ""])[:3]
        spec = load_spec(Path(path))
        spec = replace(spec, name=spec.name + suffix)
        arch = get_arch(spec.arch)

        for a in [""] + aheads:
            AHEAD["value"] = a
            named = replace(spec, name=spec.name + (f"_la{a.replace('/', '_')}" if a else ""))
            if assignment:
                print(named.name, render(named, out, "hopper", json.loads(assignment)).summary)
            else:
                print(named.name, generate(named, arch, out).plan.family)


if __name__ == "__main__":
    main(sys.argv[1:])
