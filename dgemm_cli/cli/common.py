"""What every command shares: the default folder, the arch choice, errors, the generated folders."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dgemm_cli.arch import TARGETS
from dgemm_cli.disable import help_text, parse_disable
from dgemm_cli.errors import DeepGemmError, NoGpuError, NotBuiltError
from dgemm_cli.records import TuningDb
from dgemm_cli.toolchain import find_gpus
from dgemm_cli.tune import default_db_path, load_db

DEFAULT_OUT = Path("generated")
ARCH_CHOICE = click.Choice(list(TARGETS), case_sensitive=False)  # `--arch SM_90A` reads as sm_90a; cpu: the host


def _parse_disable(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    try:
        return parse_disable(value)
    except DeepGemmError as err:
        fail(err)
        raise AssertionError("fail exits") from err


# `--disable OPT[,OPT...]` (gen, explain, tune): the options parsed once, an unknown one refused with its fix.
disable_option = click.option(
    "--disable", "disabled", metavar="OPT[,OPT...]", callback=_parse_disable, expose_value=True,
    help="Force these optimizations off in the constraint graphs and re-plan around them: " + help_text())


def require_gpu() -> None:
    """verify, bench and bisect of GPU folders: NoGpuError where no GPU is visible."""
    if not find_gpus():
        raise NoGpuError("no CUDA GPU visible (nvidia-smi lists none): verify and bench need one; "
                         "gen and build work without")


def fail(err: DeepGemmError) -> None:
    click.echo(f"error: {err}", err=True)
    sys.exit(err.exit_code)


def generated_dirs(dirs: tuple[Path, ...]) -> list[Path]:
    """The directories named, or every generated one under ./generated."""
    if dirs:
        found = []
        for d in dirs:
            if (d / "plan.json").is_file():
                found.append(d)
            elif d.is_dir() and any(d.glob("*/plan.json")):
                found.extend(sorted(p.parent for p in d.glob("*/plan.json")))
            else:
                raise NotBuiltError(f"{d}: not a generated directory (no plan.json); run `deepgemm gen` first")
        return found
    found = sorted(p.parent for p in DEFAULT_OUT.glob("*/plan.json"))
    if not found:
        raise NotBuiltError(f"nothing generated under {DEFAULT_OUT}/; run `deepgemm gen SPEC.yaml` first")
    return found


def fmt(x) -> str:
    if not isinstance(x, (int, float)):
        return str(x)
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"  # 3580, not 3.58e+03


def tuning_db(db_path: Path | None) -> tuple[Path, TuningDb]:
    path = db_path or default_db_path()
    return path, load_db(path)
