"""Session 13: each spec as planned, and again with every tcgemv kernel's register bound raised (same tilings).

    python tools/session13/regs_variants.py OUT REGS SPEC [SPEC ...]

OUT/<name>/ is `deepgemm gen --untuned`'s output; OUT/<name>_r<REGS>/ the same plan with tcgemv's `regs` (the
launch bound: 65536 / (threads x regs) blocks an SM) set to REGS, for timing what the spills at 128 cost.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.families import tcgemv  # noqa: E402
from dgemm_cli.render import generate  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402

out, regs = Path(sys.argv[1]), int(sys.argv[2])
plan_of = tcgemv._plan
for path in sys.argv[3:]:
    spec = load_spec(Path(path))
    tcgemv._plan = plan_of
    generate(spec, get_arch(spec.arch), out)  # the cost model's plan (no tuning database)
    tcgemv._plan = lambda *a, **kw: replace(plan_of(*a, **kw), regs=regs)
    named = replace(spec, name=f"{spec.name}_r{regs}")
    generate(named, get_arch(spec.arch), out)
    print(named.name)
