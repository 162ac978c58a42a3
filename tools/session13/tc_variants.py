"""Session 13: tcgemv tilings outside the measured set, for timing (octets 4, one 64-k segment a round).

    python tools/session13/tc_variants.py OUT SPEC 'TOKENS:OCTETS:K_WARPS:UNROLL:REGS' [...] [SPEC ...]

The family's graph admits only the tilings timed so far (MEASURED), 1 or 2 octets and 2 segments a round
(ROUND_SEGMENTS); this script widens those in memory, for this process only, and renders each variant of each
spec (named <spec>_t<T>o<O>w<W>u<U>r<R>) with tools/render_variant.py.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from render_variant import render  # noqa: E402

from dgemm_cli.constraints import ConstraintGraph  # noqa: E402
from dgemm_cli.families import tcgemv  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402

graph_of = tcgemv.build_tiling_graph


def wider_graph(views, arch) -> ConstraintGraph:
    g = graph_of(views, arch)
    g.nodes = [replace(n, domain=(1, 2, 4)) if n.name == "octets" else n for n in g.nodes]
    return g


tcgemv.build_tiling_graph = wider_graph
out = Path(sys.argv[1])
spec = None
for arg in sys.argv[2:]:
    if arg.endswith(".yaml"):
        spec = load_spec(Path(arg))
        continue
    tokens, octets, warps, unroll, regs = map(int, arg.split(":"))
    tcgemv.MEASURED = {**tcgemv.MEASURED, tokens: ((octets, warps),)}
    tcgemv.REGS = {**tcgemv.REGS, (tokens, octets): regs}
    tcgemv.ROUND_SEGMENTS = unroll
    named = replace(spec, name=f"{spec.name}_t{tokens}o{octets}w{warps}u{unroll}r{regs}")
    plan = render(named, out, "tcgemv", {"tokens": tokens, "octets": octets, "k_warps": warps})
    print(f"{named.name}: {plan.summary}")
