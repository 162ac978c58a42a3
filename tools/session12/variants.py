"""Session 12: variants of specs, each the model's best plan of one family with some nodes overridden.

    python tools/session12/variants.py OUT FAMILY SPEC 'JSON OVERRIDES' SUFFIX [FAMILY SPEC 'JSON' SUFFIX ...]
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
for i in range(0, len(args), 4):
    family, spec = args[i], load_spec(Path(args[i + 1]))
    plan, _ = best(FAMILIES[family].problem(analyse(spec), get_arch(spec.arch)))
    assignment = {**plan.assignment, **json.loads(args[i + 2])}
    named = replace(spec, name=spec.name + args[i + 3])
    print(f"{named.name}: {assignment}: {render(named, out, family, assignment).summary}")
