"""Session 12, call 4: gemv variants of a spec, as the model's gemv pick with some nodes overridden.

    python tools/session12/gemv_variants.py OUT SPEC 'JSON OVERRIDES' SUFFIX [SPEC 'JSON' SUFFIX ...]
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from render_variant import render  # noqa: E402

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.families import FAMILIES  # noqa: E402
from dgemm_cli.families.solving import best  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402

out = Path(sys.argv[1])
args = sys.argv[2:]
for i in range(0, len(args), 3):
    spec = load_spec(Path(args[i]))
    plan, _ = best(FAMILIES["gemv"].problem(analyse(spec), get_arch(spec.arch)))
    assignment = {**plan.assignment, **json.loads(args[i + 1])}
    named = replace(spec, name=spec.name + args[i + 2])
    print(f"{named.name}: {assignment}: {render(named, out, 'gemv', assignment).summary}")
