"""Pictures of bench and tune results: `bench --plot` and `tune --plot` (matplotlib, the `plot` extra).

The data half is pure and needs no matplotlib: `roofline` turns bench results (typed, or `bench --json`'s list
through `bench_results`) into points and roofs, `tune_panel` one tuned problem into its candidates and the lines
they are read against. `draw_roofline` and `draw_tune` import matplotlib when called, and `require_matplotlib`
says how to install it before a run that would draw.

A problem's arithmetic intensity is its FLOP over the fewest bytes it can move (every input element read once, the
output written once: the harness's `gbps`), so one problem sits at one intensity whoever runs it, and ours and the
baseline are two points one above the other. The roofs come from the same run where it measured them: the
bandwidth roof is the harness's device-to-device copy (`copy_gbps`), the compute roof of a dtype the baseline
library's large square GEMM of that dtype (`roof_tflops`, timed with `bench --roof 1`, which `--plot` passes).
Where a run has neither, the arch table's nominal rate stands in, drawn dashed and labelled nominal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgemm_cli.arch import TARGETS, nominal_tflops
from dgemm_cli.errors import DeepGemmError
from dgemm_cli.records import BenchReport, BenchRow, TuningRecord

INSTALL = "pip install 'deepgemm[plot]' (from a checkout: pip install '.[plot]')"


class PlotError(DeepGemmError):
    """--plot cannot draw: matplotlib is missing, or the file's suffix names no format it writes."""


def require_matplotlib(path: Path) -> None:
    """Checks, before anything is measured, that matplotlib is there and writes `path`'s format."""
    _figure(path)


def _figure(path: Path) -> Any:
    """matplotlib's Figure class, once `path`'s suffix is a format it writes (no pyplot: no GUI backend, no state)."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(f"--plot {path}: drawing needs matplotlib, which is not installed. Fix: {INSTALL}") from None
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise PlotError(f"--plot {path}: '{path.suffix or '(no suffix)'}' names no format matplotlib writes. Fix: end "
                        f"the file name in one of {', '.join('.' + f for f in sorted(formats))}, e.g. .png")
    return Figure


# ------------------------------------------------------------------------------------------------ bench (pure)

@dataclass(frozen=True)
class BenchResult:
    """One kernel of a bench: the target it ran for (`sm_90a`, `cpu`) and the harness's report."""

    arch: str
    report: BenchReport


def bench_results(rows: Iterable[Mapping[str, Any]]) -> list[BenchResult]:
    """`deepgemm bench --json`'s list (one object a kernel) as typed results."""
    return [BenchResult(str(r.get("arch")), BenchReport.from_dict(r, f"bench result {r.get('name')}")) for r in rows]


@dataclass(frozen=True)
class Roof:
    """A roof of the plot: GB/s (`kind` "bandwidth") or TFLOP/s ("compute", of one dtype), on one device."""

    kind: str
    device: str
    value: float
    measured: bool  # False: the arch table's nominal rate (drawn dashed)
    what: str  # what set it: the copy, the GEMM the harness ran, or the part whose nominal rate it is
    dtype: str | None = None

    @property
    def label(self) -> str:
        unit = f"{self.value:.4g} GB/s" if self.kind == "bandwidth" else f"{self.value:.4g} TFLOP/s"
        head = f"{self.dtype} compute" if self.kind == "compute" else "bandwidth"
        how = "measured in this run" if self.measured else "NOMINAL, not measured"
        return f"{head} {unit} ({how}): {self.what}"


@dataclass(frozen=True)
class Side:
    """One side of a problem: its TFLOP/s (the mean of its passes' times) and each pass's."""

    tflops: float
    passes: tuple[float, ...]


@dataclass(frozen=True)
class ProblemPoint:
    label: str  # the spec's name, with the run-time size where it has one
    device: str
    dtype: str | None  # the dtype whose compute roof applies (on the host every dtype's is f32's)
    intensity: float  # FLOP per byte, the fewest bytes the problem moves
    ours: Side
    baseline: Side | None  # None where the bench had no baseline
    baseline_kind: str | None  # "cuBLAS", "cuBLASLt" or "numpy"


@dataclass(frozen=True)
class Roofline:
    device: str  # the devices' names, joined
    points: tuple[ProblemPoint, ...]
    roofs: tuple[Roof, ...]
    left_out: tuple[str, ...]  # kernels without numbers to draw (an error, no GB/s), with why


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0.0


def _baseline_kind(row: BenchRow) -> str | None:
    if row.baseline_tflops is None or not math.isfinite(row.baseline_tflops):
        return None
    text = (row.baseline or "").lower()
    return "numpy" if text == "numpy" else "cuBLASLt" if "cublaslt" in text else "cuBLAS"


def _point(result: BenchResult, row: BenchRow) -> ProblemPoint:
    r = result.report
    label = r.name or "?"
    if r.dynamic is not None and row.m is not None:
        label += f" {r.dynamic.letter}={row.m}"
    ours = Side(row.tflops, tuple(row.tflops * row.us / p for p in row.us_passes if _finite(p)))
    kind = _baseline_kind(row)
    base = None
    if kind is not None:
        base = Side(row.baseline_tflops, tuple(row.baseline_tflops * row.baseline_us / p
                                               for p in row.baseline_us_passes if _finite(p)))
    return ProblemPoint(label, r.device or result.arch, _roof_dtype(result), 1e3 * row.tflops / row.gbps, ours,
                        base, kind)


def _roof_dtype(result: BenchResult) -> str | None:
    """The dtype of the compute roof a kernel is under: its inputs' on a GPU; f32 on the host, whose cpu family
    converts every dtype to f32 (and whose harness times an f32 roof whatever the kernel's dtype)."""
    arch = TARGETS.get(result.arch)
    return "f32" if arch is not None and arch.backend == "cpu" else result.report.dtype


def roofline(results: Sequence[BenchResult]) -> Roofline:
    """The points of every kernel (one a run-time size) and the roofs: a device's bandwidth roof, and a compute roof
    for each dtype of its points; measured in the run where it was, else nominal."""
    points, left_out = [], []
    for res in results:
        r = res.report
        if r.error is not None or not r.rows:
            left_out.append(f"{r.name}: {r.error or 'no times'}")
            continue
        for row in r.rows:
            if not (_finite(row.tflops) and _finite(row.gbps)):
                left_out.append(f"{r.name}: no TFLOP/s or GB/s")
                continue
            points.append(_point(res, row))
    roofs: list[Roof] = []
    devices = list(dict.fromkeys(p.device for p in points))
    for device in devices:
        mine = [res for res in results if (res.report.device or res.arch) == device and res.report.error is None]
        arch = TARGETS.get(mine[0].arch) if mine else None
        copies = [res.report.copy_gbps for res in mine if _finite(res.report.copy_gbps)]
        if copies:
            what = "a memory copy" if arch is not None and arch.backend == "cpu" else "a device-to-device copy"
            roofs.append(Roof("bandwidth", device, max(copies), True, what))
        elif arch is not None:
            roofs.append(Roof("bandwidth", device, arch.dram_gbps, False, f"the arch table's {arch.part}"))
        for dtype in dict.fromkeys(p.dtype for p in points if p.device == device and p.dtype):
            timed = [res.report for res in mine if _roof_dtype(res) == dtype and _finite(res.report.roof_tflops)]
            if timed:
                best = max(timed, key=lambda rep: rep.roof_tflops)
                roofs.append(Roof("compute", device, best.roof_tflops, True, best.roof_gemm or "a square GEMM",
                                  dtype))
            elif arch is not None:
                roofs.append(Roof("compute", device, nominal_tflops(arch, dtype), False,
                                  f"the arch table's {arch.part}", dtype))
    return Roofline(", ".join(devices), tuple(points), tuple(roofs), tuple(left_out))


# ------------------------------------------------------------------------------------------------ tune (pure)

@dataclass(frozen=True)
class TunedPoint:
    """A timed candidate: the median of its rounds (the number it was ranked on) and each round's time."""

    id: str
    family: str
    us: float
    rounds: tuple[float, ...]
    winner: bool
    model_pick: bool  # the cost model's first choice


@dataclass(frozen=True)
class TunePanel:
    """One tuned problem: its timed candidates, fastest first, and the lines they are read against, all in µs over
    the sizes the candidates were timed at (a range of run-time sizes: the mean of its two ends)."""

    name: str
    candidates: tuple[TunedPoint, ...]
    untimed: int  # candidates not timed: failed build or verify, or the budget spent
    baseline_us: float | None  # the baseline in the winner's final bench
    baseline_kind: str | None
    roof_us: float | None  # the least time the roofs allow: max(FLOP / compute roof, bytes / bandwidth roof)
    roof_bound: str | None  # which roof sets it: "compute" or "bandwidth"
    roofs: tuple[Roof, ...]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tune_panel(entry: TuningRecord, final: BenchReport, arch: str) -> TunePanel:
    """The panel of one tuned problem from its database entry and the winner's final bench (with the roofs)."""
    pick = entry.model_pick
    timed = sorted(entry.timed, key=lambda m: m.us)
    points = tuple(TunedPoint(m.id, m.family, m.us, m.us_rounds or (m.us,), m.id == entry.winner.id,
                              pick is not None and m.id == pick.id) for m in timed)
    rows = [row for row in final.rows if _finite(row.us)]
    line = roofline([BenchResult(arch, final)]) if final.error is None else Roofline("", (), (), ())
    bandwidth = next((r for r in line.roofs if r.kind == "bandwidth"), None)
    compute = next((r for r in line.roofs if r.kind == "compute"), None)
    roof_us, bound = None, None
    if rows and bandwidth is not None and compute is not None and all(_finite(r.tflops) and _finite(r.gbps)
                                                                       for r in rows):
        times = []
        for row in rows:
            flops, moved = row.tflops * 1e12 * row.us * 1e-6, row.gbps * 1e9 * row.us * 1e-6
            times.append((flops / (compute.value * 1e12) * 1e6, moved / (bandwidth.value * 1e9) * 1e6))
        compute_us, bandwidth_us = _mean([t[0] for t in times]), _mean([t[1] for t in times])
        roof_us, bound = max((compute_us, "compute"), (bandwidth_us, "bandwidth"))
    baselines = [row.baseline_us for row in rows if _finite(row.baseline_us)]
    return TunePanel(entry.name, points, len(entry.measured) - len(points),
                     _mean(baselines) if len(baselines) == len(rows) else None,
                     _baseline_kind(rows[-1]) if rows else None, roof_us, bound, line.roofs)


# ------------------------------------------------------------------------------------------------ drawing

NOTE = ("Each problem sits at its arithmetic intensity: FLOP over the fewest bytes it moves (each input element read "
        "once, the output written once).\nFilled: deepgemm; open: the baseline; the bars span the bench's two "
        "passes. Solid roofs were measured in this run; dashed ones are the arch table's nominal rates, not measured.")


def draw_roofline(line: Roofline, path: Path, title: str | None = None) -> None:
    """The roofline of a bench as one figure at `path` (its suffix picks the format)."""
    import numpy as np

    Figure = _figure(path)
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(11, 7.5), layout="constrained")
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    bandwidth = {r.device: r for r in line.roofs if r.kind == "bandwidth"}
    # Each compute roof with its ridge, the intensity where the bandwidth roof of its device reaches it.
    computes = [(r, r.value * 1e3 / bandwidth[r.device].value if r.device in bandwidth else None)
                for r in line.roofs if r.kind == "compute"]
    xs = [p.intensity for p in line.points] + [ridge for _, ridge in computes if ridge is not None]
    lo, hi = (min(xs) / 4, max(xs) * 4) if xs else (0.1, 1e4)
    handles = []
    for roof in bandwidth.values():
        end = max([ridge for c, ridge in computes if c.device == roof.device and ridge is not None] or [hi])
        x = np.geomspace(lo, end, 64)
        handles += ax.plot(x, roof.value * x / 1e3, color="black", lw=1.5, ls="-" if roof.measured else "--",
                           label=roof.label)
    greys = ("dimgray", "gray", "darkgray", "silver")
    for i, (roof, ridge) in enumerate(computes):
        handles += ax.plot([ridge or lo, hi], [roof.value, roof.value], color=greys[i % len(greys)], lw=1.5,
                           ls="-" if roof.measured else "--", label=roof.label)
    palette = colormaps["tab10" if len(line.points) <= 10 else "tab20"].colors
    colors = [palette[i % len(palette)] for i in range(len(line.points))]
    for p, color in zip(line.points, colors):
        ax.plot([p.intensity], [p.ours.tflops], "o", color=color, ms=7, zorder=3)
        if len(p.ours.passes) >= 2:
            ax.vlines(p.intensity, min(p.ours.passes), max(p.ours.passes), color=color, lw=2, zorder=2)
        if p.baseline is not None:
            ax.plot([p.intensity], [p.baseline.tflops], "s", mfc="none", mec=color, ms=8, mew=1.5, zorder=3)
            ax.plot([p.intensity, p.intensity], [p.ours.tflops, p.baseline.tflops], ":", color=color, lw=1)
            if len(p.baseline.passes) >= 2:
                ax.vlines(p.intensity * 1.04, min(p.baseline.passes), max(p.baseline.passes), color=color, lw=1)
        ax.annotate(p.label, (p.intensity, p.ours.tflops), textcoords="offset points", xytext=(5, 3), fontsize=7,
                    color=color)
    kinds = sorted({p.baseline_kind for p in line.points if p.baseline_kind})
    handles += [Line2D([], [], ls="none", marker="o", color="black", label="deepgemm"),
                Line2D([], [], ls="none", marker="s", mfc="none", mec="black",
                       label=f"baseline: {' / '.join(kinds) or 'none ran'}")]
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.set_title(title or f"deepgemm bench on {line.device or 'no device'}: TFLOP/s against arithmetic intensity")
    # Below the axes, where no point can hide under it (the layout makes room for it); the note is its title.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.08), fontsize=8, title=NOTE,
              title_fontsize=7, alignment="left", frameon=False)
    fig.savefig(path, dpi=150)


def draw_tune(panels: Sequence[TunePanel], path: Path, rounds: int | None = None) -> None:
    """One panel a tuned problem, in one figure at `path`: each timed candidate's median µs, its rounds as a bar,
    the winner as a star and the cost model's pick ringed, against the baseline and the roofs' least time."""
    Figure = _figure(path)
    cols = 1 if len(panels) == 1 else 2
    rows = -(-len(panels) // cols) or 1
    fig = Figure(figsize=(8 * cols, 4.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    families: dict[str, str] = {}
    for ax, panel in zip(axes, panels):
        for i, c in enumerate(panel.candidates):
            color = families.setdefault(c.family, f"C{len(families) % 10}")
            ax.vlines(i, min(c.rounds), max(c.rounds), color=color, lw=2)
            ax.plot([i], [c.us], "*" if c.winner else "o", color=color, ms=14 if c.winner else 6, zorder=3,
                    mec="black" if c.model_pick else color, mew=1.5 if c.model_pick else 0.5)
        if panel.baseline_us is not None:
            ax.axhline(panel.baseline_us, color="gray", ls="--", lw=1,
                       label=f"{panel.baseline_kind or 'baseline'} {panel.baseline_us:.4g} µs (the winner's bench)")
        if panel.roof_us is not None:
            measured = all(r.measured for r in panel.roofs)
            ax.axhline(panel.roof_us, color="black", ls="-" if measured else "--", lw=1,
                       label=f"the roofs allow {panel.roof_us:.4g} µs ({panel.roof_bound} bound"
                             f"{'' if measured else ', a nominal roof'})")
        ids = [c.id for c in panel.candidates]
        ax.set_xticks(range(len(ids)), ids if len(ids) <= 48 else [""] * len(ids), rotation=90, fontsize=7)
        ax.set_ylabel("µs (median of the rounds)")
        timed = f"{len(panel.candidates)} timed" + (f", {panel.untimed} not" if panel.untimed else "")
        ax.set_title(f"{panel.name}: {timed}" + (f", {rounds} rounds" if rounds else ""), fontsize=10)
        ax.grid(True, axis="y", lw=0.3, alpha=0.5)
        if panel.baseline_us is not None or panel.roof_us is not None:
            ax.legend(loc="upper left", fontsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    from matplotlib.lines import Line2D

    keys = [Line2D([], [], ls="none", marker="o", color=c, label=f) for f, c in families.items()]
    keys += [Line2D([], [], ls="none", marker="*", color="black", ms=12, label="the winner"),
             Line2D([], [], ls="none", marker="o", mfc="white", mec="black", mew=1.5, label="the cost model's pick")]
    fig.legend(handles=keys, loc="outside lower center", ncols=min(len(keys), 8), fontsize=8)
    fig.suptitle("deepgemm tune: each candidate's median time over interleaved rounds (bars: the rounds' range)")
    fig.savefig(path, dpi=150)
