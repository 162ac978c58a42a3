"""Render one spec with a given tiling assignment of one family (for device experiments).

    python tools/render_variant.py SPEC OUT FAMILY 'JSON ASSIGNMENT' [NAME_SUFFIX]

The assignment names the family's tiling-graph nodes (`deepgemm explain SPEC` lists them); nodes left out
take their defaults. The generated directory is OUT/<name><suffix>/, as `deepgemm gen` writes it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's deepgemm, not an installed one

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.constraints import Decision  # noqa: E402
from dgemm_cli.errors import DeepGemmError  # noqa: E402
from dgemm_cli.families import FAMILIES  # noqa: E402
from dgemm_cli.families.solving import of_assignment  # noqa: E402
from dgemm_cli.plan import Plan, fallback_plan, needs_fallback  # noqa: E402
from dgemm_cli.render import generate  # noqa: E402
from dgemm_cli.spec import Spec, load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402


def render(spec: Spec, out: Path, family: str, assignment: dict) -> Any:
    """Generate `spec` into out/<spec.name>/ with `family` at `assignment`; the family's plan."""
    arch = get_arch(spec.arch)
    views = analyse(spec)
    primary = of_assignment(FAMILIES[family].problem(views, arch), assignment)
    fallback = fallback_plan(views, arch) if needs_fallback(primary) else None
    plan = Plan(primary, fallback, Decision("family", family, "the kernel family (tools/render_variant.py)", ()))
    generate(spec, arch, out, family, plan=plan, views=views)
    return primary


def render_first(spec: Spec, out: Path, family: str, assignments: list[dict]) -> Any | None:
    """Render `spec` at the first of `assignments` that fits (render); print why each one before it did not.
    The family's plan, or None when none fits."""
    for a in assignments:
        try:
            return render(spec, out, family, a)
        except DeepGemmError as err:
            print(f"{spec.name}: {a}: {err}")
    return None


def main(spec_path: str, out: str, family: str, assignment: str, suffix: str = "") -> None:
    spec = load_spec(Path(spec_path))
    if suffix:
        spec = replace(spec, name=spec.name + suffix)
    print(f"{spec.name}: {render(spec, Path(out), family, json.loads(assignment)).summary}")


if __name__ == "__main__":
    main(*sys.argv[1:])
