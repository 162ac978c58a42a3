"""The family registry and interface: every family is registered once with what planning needs and the renderer
that renders its plans, and every plan it makes over the example specs implements FamilyPlan."""

from __future__ import annotations

import importlib

import pytest

from dgemm_cli.arch import ARCHES, TARGETS
from dgemm_cli.families import FAMILIES, FamilyPlan, KernelFamily
from dgemm_cli.families.solving import best
from dgemm_cli.spec import load_spec
from dgemm_cli.views import analyse

from .conftest import REPO

# The example specs, the fixed decode benches, one full reduction (the dot family) and the FP8 specs (fp8_hopper).
EXAMPLES = (sorted((REPO / "specs").glob("*.yaml")) + sorted((REPO / "specs" / "bench").glob("decode_[0-9]*.yaml"))
            + [REPO / "specs" / "bench" / "fullred_dot_16M_f16.yaml"] + sorted((REPO / "specs" / "fp8").glob("*.yaml"))
            + sorted((REPO / "specs" / "weight_only").glob("*.yaml")))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_family_is_registered_with_its_renderer_and_templates(name):
    family = FAMILIES[name]
    assert isinstance(family, KernelFamily) and family.name == name and family.summary and family.plan_types
    assert callable(importlib.import_module(family.renderer).render_body)
    assert (REPO / "templates" / name).is_dir()


def test_every_plan_a_family_makes_is_a_family_plan_of_its_types():
    seen = set()
    for path in EXAMPLES:
        views = analyse(load_spec(path))
        for arch in (ARCHES["sm_90a"], ARCHES["sm_80"], TARGETS["cpu"]):
            for name, family in FAMILIES.items():
                if family.backend != arch.backend or family.gates(views, arch):
                    continue
                plan, _ = best(family.problem(views, arch))
                assert isinstance(plan, FamilyPlan) and isinstance(plan, family.plan_types), (name, path.name)
                assert plan.family == name and plan.arch_features <= arch.features
                seen.add(type(plan))
    assert seen == {t for f in FAMILIES.values() for t in f.plan_types}  # every plan type was made at least once
