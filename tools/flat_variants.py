"""Render, for each spec given, its hopper plan at 128-row tiles where the tiles then run across the m loops
(flat rows), so that a random sweep reaches that path (the model picks 64-row tiles for most small specs).

    python tools/flat_variants.py OUT SPEC...
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's deepgemm, not an installed one

from render_variant import render_first  # noqa: E402  (tools/, beside this file)

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.families import hopper  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402


def main(out: str, *paths: str) -> None:
    arch = get_arch("sm_90a")
    for path in paths:
        spec = load_spec(Path(path))
        views = analyse(spec)
        if hopper.gates(views, arch) or not hopper.flat_rows(views, 128, 1):
            continue
        for bn, cons in ((64, 2), (128, 1)):
            a = {"block_m": 128, "block_n": bn, "consumers": cons, "ctas_per_sm": 1, "stages": 4}
            named = replace(spec, name=f"{spec.name}_flat{bn}")
            primary = render_first(named, Path(out), "hopper", [a])
            if primary is not None:
                print(f"{named.name}: flat rows {primary.flat_rows}, {primary.summary}")


if __name__ == "__main__":
    main(*sys.argv[1:])
