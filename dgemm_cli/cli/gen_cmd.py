"""`deepgemm gen`: plan and render each spec, then say what was written and what to run next."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dgemm_cli.arch import get_arch
from dgemm_cli.cli.common import ARCH_CHOICE, DEFAULT_OUT, disable_option, fail, tuning_db
from dgemm_cli.errors import DeepGemmError, PlanError, SpecError
from dgemm_cli.families import FAMILIES
from dgemm_cli.pipeline import Artifact, generate
from dgemm_cli.plan import BucketPlan, Plan, plan_buckets
from dgemm_cli.records import TunedSummary, TuningDb
from dgemm_cli.spec import load_spec
from dgemm_cli.toolchain import find_gpus
from dgemm_cli.tune import lookup, tuned_buckets, tuned_plan
from dgemm_cli.views import analyse


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Each spec goes to OUT/<name>/.")
@click.option("--arch", type=ARCH_CHOICE, help="Target arch; overrides the spec's `arch:`.")
@click.option("--family", type=click.Choice(list(FAMILIES)),
              help="Take this kernel family wherever its gates allow, instead of the cheapest by the cost model.")
@click.option("--db", "db_path", type=click.Path(path_type=Path),
              help="Tuning database to consult (default: $DEEPGEMM_TUNING_DB or the user cache dir).")
@click.option("--untuned", is_flag=True, help="Ignore the tuning database: plan by the cost model alone.")
@disable_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of the summary.")
def gen(specs: tuple[Path, ...], out: Path, arch: str | None, family: str | None, db_path: Path | None,
        untuned: bool, disabled: tuple[str, ...], as_json: bool) -> None:
    """Parse SPEC files, plan the tiling and render CUDA sources into OUT/<name>/.

    The plan picks a kernel family (`deepgemm explain SPEC` shows why the others lost), then that
    family's tiling; where the chosen family needs pointer alignment the spec does not promise, the
    cta family's kernel is generated beside it and taken at run time when the check fails. A spec
    that `deepgemm tune` measured renders its measured winner instead (--untuned: the model's pick;
    --family and --disable plan by the model too: the measured winner was measured without them)."""
    results, failed = [], 0
    try:
        db = TuningDb() if untuned or family or disabled else tuning_db(db_path)[1]
    except DeepGemmError as err:
        fail(err)
    gpus = find_gpus() if db.entries else []
    written_by: dict[str, Path] = {}  # spec name -> the spec file whose folder OUT/<name>/ this gen writes
    for path in specs:
        try:
            spec = load_spec(path)
            for note in spec.notes:  # before planning: they say how the spec was read, whatever follows
                click.echo(f"note: {path}: {note}", err=True)
            for warning in spec.warnings:
                click.echo(f"warning: {path}: {warning}", err=True)
            if spec.name in written_by:
                raise SpecError(str(path), "name", f"'{spec.name}' is also the name of {written_by[spec.name]} in "
                                f"this gen; both would write {out / spec.name}/",
                                "give each spec its own name (it names the folder and the C function)")
            written_by[spec.name] = path
            target = get_arch(arch or spec.arch)
            gpu = gpus[0].name if gpus else None
            views = analyse(spec)
            try:
                tuned = _tuned(db, spec, views, target, gpu) if db.entries else None
            except PlanError as err:  # a tuned plan this generator can no longer build: the model plans it
                click.echo(f"note: {path}: {err}; planned by the cost model instead (tune it again)", err=True)
                tuned = None
            g = generate(spec, target, out, family, plan=tuned, views=views, disabled=disabled)
        except DeepGemmError as err:
            click.echo(f"error: {err}", err=True)
            failed += 1
            continue
        results.append(g)
        if not as_json:
            click.echo(_gen_summary(g))
    if as_json:
        click.echo(json.dumps([{"name": g.name, "directory": str(g.directory), "arch": g.arch,
                                "header": str(g.header), "prototype": g.prototype,
                                "content_hash": g.content_hash, "notes": list(g.planned.spec.notes),
                                "warnings": list(g.planned.spec.warnings),
                                "plan": g.planned.plan.to_dict()} for g in results],
                              indent=2))
    elif results:
        click.echo(_gen_footer(results, out, failed))
    if failed:
        sys.exit(2)


def _gen_footer(results: list[Artifact], out: Path, failed: int) -> str:
    """What gen wrote, each folder's C entry point, and the command to run next."""
    arches = sorted({g.arch for g in results})
    lines = [f"\nwrote {len(results)} folder(s) for {', '.join(arches)} (`--arch` or the spec's `arch:` to change)"
             + (f"; {failed} spec(s) failed, see the errors above" if failed else "") + ":"]
    for g in results:
        lines.append(f"  {g.header}\n    {g.prototype};")
    where = "on a GPU" if any(g.arch != "cpu" for g in results) else "here, on the host"
    lines.append(f"next: deepgemm build {out}    (then, {where}: deepgemm verify {out} && deepgemm bench {out})")
    return "\n".join(lines)


def _tuned(db: TuningDb, spec, views, target, gpu: str | None) -> Plan | BucketPlan | None:
    """The measured plan of a spec from the tuning database, if `tune` measured it; for a run-time spec,
    its buckets' measured plans (the cost model plans the buckets not measured)."""
    if not spec.dynamic:
        entry = lookup(db, spec, target.name, gpu)
        return tuned_plan(views, target, entry) if entry else None
    tuned = tuned_buckets(db, spec, target, gpu)
    return plan_buckets(views, target, tuned=tuned) if tuned else None


def _gen_summary(g: Artifact) -> str:
    v, p = g.planned.views, g.planned.plan
    lines = [f"{g.name}: {g.planned.spec.contraction}  batch={v.batch} M={v.m} N={v.n} K={v.k}  -> {g.directory}/"]
    for r in ("batch", "m", "n", "k"):
        rv = v.roles[r]
        if rv.segments:
            segs = " ".join(s.label for s in rv.segments)
            lines.append(f"  {r:<5} {''.join(rv.letters):<6} {len(rv.segments)} segment(s): {segs}")
    if isinstance(p, BucketPlan):
        if p.disabled:
            lines.append(f"  built with --disable {','.join(p.disabled)}")
        lines.append(f"  {p.why}")
        for b in p.buckets:
            lines.append(f"  {b.sizes(p.letter)}: {b.plan.family}: {b.plan.primary.summary}")
            if b.plan.tuned:
                lines.append(f"    {_tuned_line(TunedSummary.from_dict(b.plan.tuned))}")
            lines.extend(_fallback_lines(b.plan, "    "))
        return "\n".join(lines)
    if p.disabled:
        lines.append(f"  built with --disable {','.join(p.disabled)}")
    lines.append(f"  {p.family_decision.summary()}")
    lines.append(f"  {p.primary.family}: {p.primary.summary}")
    if p.tuned:  # the tiling is the measured winner: the model's reasons for each value do not apply
        lines.append(f"    {_tuned_line(TunedSummary.from_dict(p.tuned))}")
    else:
        lines.extend(f"    {d.summary()}" for d in p.primary.decisions)
    lines.extend(_fallback_lines(p, "  "))
    return "\n".join(lines)


def _tuned_line(t: TunedSummary) -> str:
    """A tuned plan in one line (plan.json's `tuned`)."""
    ratio = f", {t.ratio:.2f}x cuBLAS" if t.ratio is not None else ""
    return (f"tuned: candidate {t.candidate}, the fastest of {t.timed} timed of {t.measured} by "
            f"deepgemm tune (level {t.level}, {t.gpu}, {t.date[:10]}): {t.us:.4g} µs{ratio}")


def _fallback_lines(p: Plan, indent: str) -> list[str]:
    if p.fallback is None:
        return []
    checks = " or ".join(f"{x} is not {n}-byte aligned" for x, n in p.primary.runtime_align.items())
    return [f"{indent}run-time fallback where {checks} at the call: {p.fallback.family}: {p.fallback.summary}"]
