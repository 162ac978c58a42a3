"""Run-to-run stability of a bench row (pure): what its two passes say about the clocks.

bench times each size in the order ours, the baseline, the baseline again, ours (docs/design/verify-and-bench.md,
"Bench"), and reports each side's mean. A pass's ratio is the baseline's pass over ours of the same pass: pass 1
pairs ours' first pass with the baseline's first, which ran right after it, and pass 2 the baseline's second with
ours' second, right after it. The ratio reported (the baseline's mean over ours') is the mediant of the two, so it
lies between them. A side's spread is how much longer its slower pass took than its faster one; a spread past
UNSTABLE_ABOVE on either side means the clock or power state moved during the row, by more than most of the
differences the bench is read for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dgemm_cli.records import BenchRow, json_number

UNSTABLE_ABOVE = 0.03  # a side whose two passes differ by more than this is reported as moved


def spread(passes: tuple[float, ...] | list[float]) -> float | None:
    """(slowest - fastest) / fastest over a side's passes; None with fewer than two finite positive passes."""
    usable = [p for p in passes if math.isfinite(p) and p > 0.0]
    if len(usable) < 2:
        return None
    return (max(usable) - min(usable)) / min(usable)


@dataclass(frozen=True)
class RowStability:
    """A row's pass-by-pass figures: the ratio of each pass, and each side's spread (None where a side ran once)."""

    ratio_passes: tuple[float, ...]  # baseline pass i / ours pass i; empty without two passes on both sides
    us_spread: float | None
    baseline_us_spread: float | None

    @property
    def moved(self) -> float | None:
        """The larger spread of the two sides: how much the clocks moved this row."""
        spreads = [s for s in (self.us_spread, self.baseline_us_spread) if s is not None]
        return max(spreads) if spreads else None

    @property
    def unstable(self) -> bool:
        return self.moved is not None and self.moved > UNSTABLE_ABOVE

    def to_dict(self) -> dict[str, Any]:
        """The fields `bench --json` adds to a row."""
        return {"ratio_passes": [json_number(r) for r in self.ratio_passes],
                "us_spread": json_number(self.us_spread), "baseline_us_spread": json_number(self.baseline_us_spread),
                "unstable": self.unstable}


def row_stability(row: BenchRow) -> RowStability:
    ours, base = row.us_passes, row.baseline_us_passes
    ratios = tuple(b / o for o, b in zip(ours, base) if o > 0.0) if len(ours) == len(base) >= 2 else ()
    return RowStability(ratios, spread(ours), spread(base))


def passes_text(s: RowStability) -> str:
    """The ratio of each pass for the table's column, e.g. "1.21/1.25"; "-" without them."""
    return "/".join(f"{r:.3g}" for r in s.ratio_passes) if s.ratio_passes else "-"


def warning(s: RowStability, row: BenchRow, baseline: str = "baseline") -> str | None:
    """The line bench prints under a row whose passes moved by more than UNSTABLE_ABOVE, else None."""
    if not s.unstable:
        return None
    sides = [f"{label} {'/'.join(_us(p) for p in passes)} µs" for label, passes in
             (("ours", row.us_passes), (baseline, row.baseline_us_passes)) if len(passes) >= 2]
    return (f"warning: clocks or power moved this row by {s.moved:.1%} between its passes ({', '.join(sides)}): "
            "rerun or raise --reps")


def _us(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"
