"""Render, for each spec given, its hopper plan at tile widths that are not powers of two (96, 112, 160, 192,
224: the widths hopper.BLOCK_N added so that a tile count can fill the SMs), so that a random sweep reaches
them whatever the model picks. Each spec takes two widths in turn (by its position), at its model's other
choices where they still fit, else at 64 rows, one consumer, 4 stages.

    python tools/width_variants.py OUT SPEC...
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's deepgemm, not an installed one

from render_variant import render_first  # noqa: E402  (tools/, beside this file)

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.families import hopper  # noqa: E402
from dgemm_cli.families.solving import ranked  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402

WIDTHS = tuple(bn for bn in hopper.BLOCK_N if bn & (bn - 1))


def main(out: str, *paths: str) -> None:
    arch = get_arch("sm_90a")
    for i, path in enumerate(paths):
        spec = load_spec(Path(path))
        views = analyse(spec)
        if hopper.gates(views, arch):
            continue
        problem = hopper.problem(views, arch)
        pick = ranked(problem, 1)[0].assignment
        for bn in (WIDTHS[i % len(WIDTHS)], WIDTHS[(i + 2) % len(WIDTHS)]):
            named = replace(spec, name=f"{spec.name}_w{bn}")
            primary = render_first(named, Path(out), "hopper", [
                {**pick, "block_n": bn},
                {"block_m": 64, "block_n": bn, "consumers": 1, "ctas_per_sm": 1, "stages": 4, "k_splits": 1}])
            if primary is not None:
                print(f"{named.name}: {primary.summary}; packed store {primary.packed_store}")


if __name__ == "__main__":
    main(*sys.argv[1:])
