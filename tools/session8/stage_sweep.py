"""Session 8, call 3: hopper decode tilings at pipeline depths past the then-current 80 KB rule (an experiment;
the family's STAGES no longer holds 10 and 12, so this renders only at the code of that call, 452e4b2).

    python tools/session8/stage_sweep.py      # writes exp/st/<spec>_s<stages>/
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from render_variant import render  # noqa: E402

from dgemm_cli.families import hopper  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402

hopper.DEEP_STAGE_BYTES = 10**9  # the rule under test, lifted for this sweep
RUNS = [("specs/bench/decode_64x4096x4096.yaml", 64, 64, 2, (6, 8, 10, 12)),
        ("specs/bench/decode_16x4096x4096.yaml", 64, 64, 2, (8, 12)),
        ("specs/bench/decode_1x4096x14336.yaml", 64, 112, 1, (6, 8)),
        ("specs/bench/decode_16x4096x14336.yaml", 64, 112, 1, (6, 8)),
        ("specs/bench/decode_64x4096x14336.yaml", 64, 112, 1, (6, 8))]

for path, bm, bn, splits, depths in RUNS:
    spec = load_spec(ROOT / path)
    for stages in depths:
        a = {"block_m": bm, "block_n": bn, "consumers": 1, "ctas_per_sm": 1, "stages": stages, "k_splits": splits}
        print(render(replace(spec, name=f"{spec.name}_s{stages}"), ROOT / "exp" / "st", "hopper", a).summary)
