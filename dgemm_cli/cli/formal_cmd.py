"""`deepgemm verify --formal`: prove each kernel's index obligations with Coq, no GPU (formal/check.py)."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from dgemm_cli.arch import TARGETS
from dgemm_cli.build import read_plan
from dgemm_cli.cli.common import fail, generated_dirs
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, EXIT_UNPROVED, DeepGemmError, NotBuiltError, ToolchainError
from dgemm_cli.families import FAMILIES
from dgemm_cli.formal.check import (
    FAILED,
    PROVED,
    UNMODELED,
    KernelProof,
    ProvedLemmas,
    kernel_plans,
    models_of,
    prove_model,
)
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.pipeline import PlannedSpec, plan_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec


def planned_folder(d: Path) -> PlannedSpec:
    """The plan a generated folder was rendered from: its spec re-planned for its arch and family, checked against
    the folder's plan.json (the views and every kernel's plan), so that what is proved is what was rendered."""
    record = read_plan(d)
    spec = parse_spec(dict(record.spec), str(d / "plan.json"))
    written = json.loads((d / "plan.json").read_text())
    # The model's pick, else the family `gen --family` took (a bucket plan's families are joined by '+').
    families = [None] + ([record.family] if record.family in FAMILIES else [])
    for family in families:
        planned = plan_spec(spec, TARGETS[record.arch], family, disabled=record.disabled)
        files = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)
        rendered = json.loads(files["plan.json"])
        if all(rendered.get(key) == written.get(key) for key in ("generator", "views", "plan")):
            return planned
    raise NotBuiltError(f"{d}: its files are not what this deepgemm renders for its spec (another generator version, "
                        "or a tuned plan). Fix: prove the spec itself (`deepgemm verify --formal SPEC.yaml`), or "
                        "regenerate the folder with `deepgemm gen --untuned`")


def _inputs(paths: tuple[Path, ...], arch: str | None, family: str | None) -> list[tuple[PlannedSpec, Path]]:
    """(planned spec, where its scripts go) for each spec file (./build/verify/<name>/; `family`: that family's
    plan) and generated folder (<folder>/build/verify/)."""
    out = []
    specs = [p for p in paths if p.suffix in (".yaml", ".yml") and p.is_file()]
    folders = tuple(p for p in paths if p not in specs)
    for p in specs:
        spec = load_spec(p)
        target = TARGETS[arch] if arch else TARGETS[spec.arch]
        out.append((plan_spec(spec, target, family), Path("build") / "verify" / spec.name))
    if folders and family:
        raise DeepGemmError("--family: a generated folder is proved as it was planned; pass its spec file instead")
    if folders or not specs:
        for d in generated_dirs(folders):
            out.append((planned_folder(d), d / "build" / "verify"))
    return out


def verify_formal(paths: tuple[Path, ...], arch: str | None, family: str | None, jobs: int, as_json: bool,
                  whole: bool = False) -> None:
    if find_coqc() is None:
        fail(ToolchainError("coqc not found: `deepgemm verify --formal` proves with Coq. Fix: install it "
                            "(Debian/Ubuntu: apt-get install coq; or opam install coq)"))
    try:
        inputs = _inputs(paths, arch, family)
    except DeepGemmError as err:
        fail(err)
    work: list[tuple[int, PlannedSpec, Path, object]] = []
    results: list[tuple[int, KernelProof]] = []
    for planned, out_dir in inputs:
        out_dir.mkdir(parents=True, exist_ok=True)
        for label, views, family_plan in kernel_plans(planned.plan, planned.views):
            found = models_of(views, family_plan, label)
            if isinstance(found, str):
                results.append((len(work) + len(results), KernelProof(
                    views.spec.name, f"{views.spec.name} {label}".strip(), family_plan.family, UNMODELED,
                    reason=found)))
                continue
            for model in found:
                work.append((len(work) + len(results), views, out_dir, model))
    total = len(work) + len(results)
    for i, r in results:
        click.echo(_line(i + 1, total, r), err=as_json)

    proved = None if whole else ProvedLemmas()

    def one(item):
        i, views, out_dir, model = item
        return i, prove_model(views, model, out_dir, proved=proved)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for i, r in pool.map(one, work):
            results.append((i, r))
            click.echo(_line(i + 1, total, r), err=as_json)
    ordered = [r for _, r in sorted(results, key=lambda x: x[0])]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in ordered], indent=2))
    counts = {s: sum(r.status == s for r in ordered) for s in (PROVED, FAILED, UNMODELED)}
    summary = f"{counts[PROVED]}/{len(ordered)} proved"
    if counts[FAILED]:
        summary += f", {counts[FAILED]} failed"
    if counts[UNMODELED]:
        summary += f", {counts[UNMODELED]} not modeled yet (nothing proved for them)"
    click.echo(summary, err=as_json)
    sys.exit(EXIT_FAILED if counts[FAILED] else EXIT_UNPROVED if counts[UNMODELED] else EXIT_OK)


def _line(i: int, total: int, r: KernelProof) -> str:
    head = f"[{i}/{total}] {r.kernel}: "
    if r.status == PROVED:
        shared = f", {r.shared} proved already in this run" if r.shared else ""
        return head + f"Proof completed ({r.lemmas} lemmas{shared}, {r.seconds:.1f} s) -> {r.script}"
    if r.status == UNMODELED:
        return head + f"not proved: {r.reason}"
    lines = [head + f"FAILED at {r.failed or 'an unnamed lemma'} ({r.script})"]
    if r.obligation:
        lines.append(f"    {r.obligation}")
    lines.append(f"    counterexample: {r.counterexample}" if r.counterexample
                 else f"    no counterexample found by search; coqc: {r.reason}")
    return "\n".join(lines)
