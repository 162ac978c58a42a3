"""The pipeline's steps and the typed artifacts between them: a spec is planned (`PlannedSpec`), then emitted as
a folder (`Artifact`), which `build` compiles and `run` verifies and benches. The command line and `tune` call
these steps; each stage module does only its own job (`render` renders, it does not plan or write)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dgemm_cli.arch import Arch
from dgemm_cli.baseline import CublasPlan, plan_baseline
from dgemm_cli.plan import BucketPlan, Plan, make_plan
from dgemm_cli.records import PlanRecord
from dgemm_cli.render import c_prototype, render_sources
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews, analyse


@dataclass(frozen=True)
class PlannedSpec:
    """A spec with its view analysis, its plan for one arch and the cuBLAS baseline the bench compares with."""

    spec: Spec
    views: ProblemViews
    arch: Arch
    plan: Plan | BucketPlan
    baseline: CublasPlan


@dataclass(frozen=True)
class Artifact:
    """A generated folder: what was planned, where it was written and what it declares."""

    planned: PlannedSpec
    directory: Path
    files: list[Path] = field(default_factory=list)
    content_hash: str = ""  # sha256 of every rendered file, as plan.json records it
    prototype: str = ""  # the C entry point, as <name>.h declares it

    @property
    def name(self) -> str:
        return self.planned.spec.name

    @property
    def arch(self) -> str:
        return self.planned.arch.name

    @property
    def header(self) -> Path:
        return self.directory / f"{self.name}.h"


def plan_spec(spec: Spec, arch: Arch, family: str | None = None, plan: Plan | BucketPlan | None = None,
              views: ProblemViews | None = None, disabled: tuple[str, ...] = ()) -> PlannedSpec:
    """Analyse and plan one spec. `family`: take this kernel family (a PlanError where its gates refuse the
    problem); `plan`: a plan made elsewhere (a tuned one, a tune candidate); `views`: the analysis, when the caller
    has it; `disabled`: optimizations forced off (disable.OPTIONS, checked by disable.parse_disable)."""
    views = views or analyse(spec)
    return PlannedSpec(spec, views, arch, plan or make_plan(views, arch, family, disabled), plan_baseline(views))


def emit(planned: PlannedSpec, directory: Path) -> Artifact:
    """Render a planned spec and write its folder."""
    spec = planned.spec
    files = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = directory / name  # a name may have a folder: dg/<header>.cuh
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return Artifact(planned, directory, written, PlanRecord.from_dict(json.loads(files["plan.json"])).content_hash,
                    c_prototype(spec, planned.views, planned.arch))


def generate(spec: Spec, arch: Arch, out_root: Path, family: str | None = None, plan: Plan | BucketPlan | None = None,
             directory: Path | None = None, views: ProblemViews | None = None,
             disabled: tuple[str, ...] = ()) -> Artifact:
    """plan_spec then emit, into `out_root/<name>/` unless `directory` is given."""
    return emit(plan_spec(spec, arch, family, plan, views, disabled), directory or out_root / spec.name)
