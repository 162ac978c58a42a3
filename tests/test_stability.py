"""Run-to-run stability of a bench row from its recorded passes: each pass's ratio, each side's spread, and the
warning past 3%; and tune's interleaved round order (pure, no GPU)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from dgemm_cli.records import BenchRow, MeasuredCandidate
from dgemm_cli.stability import UNSTABLE_ABOVE, passes_text, row_stability, spread, warning
from dgemm_cli.tune import pick, round_order, timing_rounds


def _row(ours: list[float], base: list[float]) -> BenchRow:
    us, bus = sum(ours) / len(ours), sum(base) / len(base) if base else None
    return BenchRow(us=us, us_passes=tuple(ours), baseline="cublas", baseline_us=bus, baseline_us_passes=tuple(base),
                    ratio=bus / us if bus else None)


def test_spread_is_the_slower_pass_over_the_faster():
    assert spread([100.0, 117.0]) == pytest.approx(0.17)
    assert spread([117.0, 100.0]) == pytest.approx(0.17)
    assert spread([50.0]) is None and spread([]) is None and spread([math.nan, 3.0]) is None


def test_each_pass_ratio_brackets_the_reported_ratio_and_a_steady_row_warns_nothing():
    row = _row([10.0, 10.2], [12.0, 12.1])
    s = row_stability(row)
    assert s.ratio_passes == (1.2, pytest.approx(12.1 / 10.2))
    assert min(s.ratio_passes) <= row.ratio <= max(s.ratio_passes)  # the mean over the mean is their mediant
    assert s.us_spread == pytest.approx(0.02) and s.moved == pytest.approx(0.02) and not s.unstable
    assert warning(s, row) is None and passes_text(s) == "1.2/1.19"
    assert s.to_dict() == {"ratio_passes": [1.2, 12.1 / 10.2], "us_spread": pytest.approx(0.02),
                           "baseline_us_spread": pytest.approx(0.1 / 12.0), "unstable": False}


def test_a_row_whose_passes_moved_past_3_percent_says_so_with_both_sides():
    """One large GEMM's passes 17% apart within a run (what issue 45 saw)."""
    row = _row([1500.0, 1755.0], [1600.0, 1610.0])
    s = row_stability(row)
    assert s.unstable and s.moved == pytest.approx(0.17)
    assert warning(s, row, "cuBLAS") == ("warning: clocks or power moved this row by 17.0% between its passes (ours "
                                         "1500/1755 µs, cuBLAS 1600/1610 µs): rerun or raise --reps")
    just_under = _row([100.0, 100.0 * (1 + UNSTABLE_ABOVE)], [50.0, 50.0])
    assert not row_stability(just_under).unstable  # more than 3% warns, 3% does not


def test_a_row_without_a_baseline_or_second_pass_has_no_ratio_passes():
    alone = _row([10.0], [])
    s = row_stability(alone)
    assert s.ratio_passes == () and s.moved is None and not s.unstable and passes_text(s) == "-"
    ours_only = _row([10.0, 11.0], [])  # its spread still shows
    assert row_stability(ours_only).us_spread == pytest.approx(0.1) and row_stability(ours_only).unstable


# ------------------------------------------------------------------------------------------------ tune's rounds

@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16])
def test_every_round_times_every_candidate_once_starting_somewhere_else(n):
    ids = [f"c{i}" for i in range(n)]
    rounds = [round_order(ids, r) for r in range(n)]
    assert all(sorted(order) == sorted(ids) for order in rounds)
    assert [order[0] for order in rounds] == ids  # each candidate starts one round in n
    if n % 2 == 0:  # an even count: every candidate takes every place once in n rounds
        for c in ids:
            assert sorted(order.index(c) for order in rounds) == list(range(n))


def test_consecutive_rounds_run_in_opposite_directions_so_predecessors_change():
    ids = ["a", "b", "c", "d", "e"]
    before = [dict(zip(order[1:], order[:-1])) for order in (round_order(ids, r) for r in range(4))]
    for r in range(3):
        assert all(before[r].get(c) != before[r + 1].get(c) for c in ids if c in before[r] and c in before[r + 1])
    assert round_order([], 3) == []


@pytest.mark.parametrize("gpus, rounds", [(1, 3), (2, 4), (3, 3), (4, 4), (8, 8)])
def test_rounds_are_at_least_three_and_as_many_on_every_gpu(gpus, rounds):
    total = timing_rounds(gpus)
    assert total == rounds and total % gpus == 0
    assert set(Counter(r % gpus for r in range(total)).values()) == {total // gpus}


def test_the_pick_is_made_on_the_medians_not_on_one_lucky_round():
    """A candidate that ran fast once (a cooler moment) loses to one that is faster in the middle of its rounds."""
    lucky = MeasuredCandidate("cta-00", "cta", 0, 1.0, {}, verified=True, us=176.6, us_rounds=(150.0, 176.6, 180.0))
    steady = MeasuredCandidate("hopper-00", "hopper", 0, 2.0, {}, verified=True, us=164.1,
                               us_rounds=(164.1, 163.0, 166.0))
    assert pick([lucky, steady]).id == "hopper-00"
