#!/usr/bin/env python3
"""Fits the cost models' constants to the measurements in dgemm_cli/families/calibration.csv and reports how the
current constants rank them. Per family, the launch constant (LAUNCH_US, additive in every estimate) and the
model's scale are linear: measured = scale * (estimate - LAUNCH_US) + launch, fitted by least squares (numpy) over
the family's rows the model still prices. The other fitted constants enter non-linearly (shares, latencies behind a
max): for them it prints the ranking error of today's constants, per run of the table: pairs measured more than 5%
apart that the model orders the other way, and what the model's pick loses to the run's fastest.
    python3 tools/fit_calibration.py [TABLE]
Run from a checkout (no GPU needed); tests/test_calibration.py checks the same ranking."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dgemm_cli.families import cta, dot, gemv, hopper, splitk, tcgemv  # noqa: E402
from dgemm_cli.families.calibration import TABLE, measurements, model_plan, runs  # noqa: E402

# fp8_hopper prices with the hopper family's model (plus its promotions), launch constant included.
LAUNCH = {"cta": cta.LAUNCH_US, "dot": dot.LAUNCH_US, "fp8_hopper": hopper.LAUNCH_US, "gemv": gemv.LAUNCH_US,
          "hopper": hopper.LAUNCH_US, "splitk": splitk.LAUNCH_US, "tcgemv": tcgemv.LAUNCH_US}


def main(argv: list[str]) -> None:
    table = Path(argv[0]) if argv else TABLE
    rows = measurements(table)
    priced = [(r, p.cost_us) for r in rows if (p := model_plan(r)) is not None]
    print(f"{table}: {len(rows)} measurements, {len(priced)} priced ({len(rows) - len(priced)} ruled out by the "
          "tiling graphs)\n")
    print("launch and scale (measured = scale * (estimate - LAUNCH_US) + launch, least squares):")
    for family in sorted({r.family for r, _ in priced}):
        xs = np.array([est - LAUNCH[family] for r, est in priced if r.family == family])
        ys = np.array([r.us for r, _ in priced if r.family == family])
        if len(xs) < 3:
            print(f"  {family:7s} {len(xs)} row(s): too few to fit (LAUNCH_US = {LAUNCH[family]})")
            continue
        (scale, launch), *_ = np.linalg.lstsq(np.stack([xs, np.ones_like(xs)], axis=1), ys, rcond=None)
        log_rms = float(np.sqrt(np.mean(np.log(ys / (xs + LAUNCH[family])) ** 2)))
        print(f"  {family:7s} {len(xs):3d} rows: launch {launch:6.2f} µs (LAUNCH_US = {LAUNCH[family]}), scale "
              f"{scale:5.2f}; today's log RMS error {log_rms:.2f}")
    print("\nranking of today's constants, per run (pairs > 5% apart ordered otherwise; the pick's loss):")
    for run, members in runs(rows).items():
        est = [(r.us, p.cost_us) for r in members if (p := model_plan(r)) is not None]
        pairs = [(a, b) for i, a in enumerate(est) for b in est[i + 1:] if max(a[0], b[0]) > 1.05 * min(a[0], b[0])]
        wrong = sum((a[0] < b[0]) != (a[1] < b[1]) for a, b in pairs)
        loss = min(est, key=lambda x: x[1])[0] / min(us for us, _ in est) - 1 if est else 0.0
        print(f"  {run[0]} [{run[1]}, {run[2]}; checks {members[0].check}]: {wrong} of {len(pairs)} pairs "
              f"misordered, pick {100 * loss:+.1f}% against the fastest")


if __name__ == "__main__":
    main(sys.argv[1:])
