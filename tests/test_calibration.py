"""The cost model against the measurements its fitted constants answer to (dgemm_cli/families/calibration.csv): in
every run of the table the model's cheapest plan is the measured fastest, runs checked by pairs order every two plans
measured more than 5% apart alike, each estimate it is held to lies within ESTIMATE_FACTOR of the measurement, and
over the runs of a "mean" source its picks lose at most MEAN_PICK_LOSS to each run's fastest on average."""

from __future__ import annotations

import pytest

from dgemm_cli.families.calibration import measurements, model_plan, runs
from dgemm_cli.families.cta import FFMA_UNROLLED_MAX

RUNS = runs(measurements())
DISTINCT = 1.05  # measured times closer than this are a tie: any order agrees
PICK_SLACK = 1.05  # the model's pick measures within this of the run's fastest
ESTIMATE_FACTOR = 2.5  # measured / estimated µs, either way: the model ranks, its scale is loose (f32 FFMA: 2.3)
# The hopper model's picks on the one-wave grid (21 small problems, 7-8 tilings each) lose 8.2% on average to each
# problem's fastest (16.5% before LATER_TILES_HIDE_US, 11.3% before the one-wave L2 share); on the 43 problems the
# L2-share settings moved (three more, whose times run 2.6-5.5x the model's estimate, are not in the table), 4.0%
# (5.6% with the old share).
MEAN_PICK_LOSS = 0.09


def _priced(run: tuple[str, str, str]) -> list[tuple[float, float]]:
    """(measured µs, the model's µs) of the run's plans the tiling graph still offers."""
    out = []
    for row in RUNS[run]:
        plan = model_plan(row)
        if plan is not None:
            out.append((row.us, plan.cost_us))
    return out


def _label(run: tuple[str, str, str]) -> str:
    return f"{run[0]} ({run[1]}, {run[2]})"


def test_the_table_names_known_families_checks_and_whole_runs():
    for run, rows in RUNS.items():
        assert {r.check for r in rows} in ({"pairs"}, {"pick"}, {"mean"}), run
        assert all(r.us > 0 and r.gpu and r.commit and r.date for r in rows), run


@pytest.mark.parametrize("run", sorted(r for r, rows in RUNS.items() if rows[0].check != "mean"), ids=_label)
def test_the_models_pick_is_the_measured_fastest(run):
    priced = _priced(run)
    if len(priced) < 2:
        pytest.skip("one plan of this run is still offered: nothing to rank")
    fastest = min(us for us, _ in priced)
    pick_us, pick_model = min(priced, key=lambda x: x[1])
    assert pick_us <= PICK_SLACK * fastest, priced
    assert 1 / ESTIMATE_FACTOR <= pick_us / pick_model <= ESTIMATE_FACTOR, priced


@pytest.mark.parametrize("run", sorted(r for r, rows in RUNS.items() if rows[0].check == "pairs"), ids=_label)
def test_the_model_orders_every_measured_pair(run):
    priced = _priced(run)
    for i, (us_a, model_a) in enumerate(priced):
        assert 1 / ESTIMATE_FACTOR <= us_a / model_a <= ESTIMATE_FACTOR, (us_a, model_a)
        for us_b, model_b in priced[i + 1:]:
            if max(us_a, us_b) > DISTINCT * min(us_a, us_b):
                assert (us_a < us_b) == (model_a < model_b), ((us_a, model_a), (us_b, model_b))


@pytest.mark.parametrize("source", sorted({run[1] for run, rows in RUNS.items() if rows[0].check == "mean"}))
def test_the_models_picks_lose_little_on_average(source):
    losses = []
    for run in (r for r, rows in RUNS.items() if r[1] == source):
        priced = _priced(run)
        pick_us, pick_model = min(priced, key=lambda x: x[1])
        losses.append(pick_us / min(us for us, _ in priced) - 1)
        assert 1 / ESTIMATE_FACTOR <= pick_us / pick_model <= ESTIMATE_FACTOR, (_label(run), priced)
    assert len(losses) > 1 and sum(losses) / len(losses) <= MEAN_PICK_LOSS, sorted(losses)


def test_a_plan_the_graph_rules_out_has_no_estimate():
    """Measurements that decided a constraint: the deeper rings of the 64x64 K split measured slower (hopper
    DEEP_STAGES), and FFMA k-tiles of 4096 unrolled FFMAs measured slower than half the block_k (cta
    FFMA_UNROLLED_MAX); the graph no longer offers either."""
    ruled_out = [r for rows in RUNS.values() for r in rows if model_plan(r) is None]
    deep_rings = [r for r in ruled_out if r.family == "hopper" and r.plan["stages"] > 8]
    long_loops = [r for r in ruled_out if r.family == "cta"
                  and r.plan["thread_m"] * r.plan["thread_n"] * r.plan["block_k"] > FFMA_UNROLLED_MAX]
    assert deep_rings and long_loops and len(deep_rings) + len(long_loops) == len(ruled_out)
    # Each run's fastest measured plan is one the graph still offers.
    for run in {r.run for r in long_loops}:
        fastest = min(RUNS[run], key=lambda r: r.us)
        assert model_plan(fastest) is not None
