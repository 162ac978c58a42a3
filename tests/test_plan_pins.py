"""A spec's `plan:` pins: decisions of the tiling graph the spec fixes, the planner choosing within them (pure)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import SpecError
from dgemm_cli.plan import BucketPlan, make_plan, plan_detail
from dgemm_cli.randspec import random_spec
from dgemm_cli.spec import parse_spec
from dgemm_cli.tune import candidates
from dgemm_cli.views import analyse

SM90 = get_arch("sm_90a")


def _spec(plan=None, **gemm) -> dict:
    """The weight as A (row-major, 4096 rows), 64 tokens as N: the shape of the hopper family's A multicast."""
    spec = {"name": "pinned", "dtype": "bf16", "gemm": {"m": 4096, "n": 64, "k": 4096, **gemm},
            "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}
    if plan is not None:
        spec["plan"] = plan
    return spec


def _plan(data: dict):
    return make_plan(analyse(parse_spec(data, "pinned.yaml")), SM90)


def _error(data: dict) -> SpecError:
    with pytest.raises(SpecError) as info:
        _plan(data)
    return info.value


def test_the_cost_model_alone_splits_k_and_the_pin_takes_the_multicast_kernel():
    assert _plan(_spec()).primary.a_multicast == 1
    plan = _plan(_spec({"family": "hopper", "a_multicast": 2}))
    assert plan.family == "hopper" and plan.primary.a_multicast == 2 and plan.primary.k_splits == 1
    decisions = {d.node: d.summary() for d in plan.primary.decisions}
    assert decisions["a_multicast"] == "a_multicast = 2 (forced by the spec's plan)"
    assert plan.family_decision.summary() == "family = hopper (forced by the spec's plan)"


def test_a_pinned_decision_rules_out_the_families_without_it():
    # N = 128: the splitk family (cta tiles, warps_m too) stays out past 64 rows.
    detail = plan_detail(analyse(parse_spec(_spec({"warps_m": 2}, n=128), "pinned.yaml")), SM90)
    assert detail.plan.family == "cta" and detail.plan.primary.warps_m == 2
    assert detail.family_plans["hopper"] is None  # ruled out: no decision warps_m
    reasons = [r.why for r in detail.plan.family_decision.rejected]
    assert any("hopper: no decision warps_m" in why or "no decision warps_m" in why for why in reasons), reasons


def test_values_are_read_as_the_spec_writes_them():
    assert _plan(_spec({"family": "cta", "stages": "3"})).primary.stages == 3
    assert _plan(_spec({"family": "Hopper"})).family == "hopper"


@pytest.mark.parametrize("plan,key,problem,fix", [
    ({"a_multicst": 2}, "plan.a_multicst", "no kernel family that can run this problem has a decision 'a_multicst'",
     "did you mean 'a_multicast'?"),
    ({"family": "hoper"}, "plan.family", "unknown kernel family 'hoper'", "did you mean 'hopper'?"),
    ({"family": "gemv"}, "plan.family", "the gemv family cannot run this problem", "drop `family:`"),
    ({"a_multicast": 3}, "plan", "a_multicast = 3 is not one of its values here (1, 2)", "drop or change"),
    ({"family": "hopper", "stages": 2}, "plan", "stages = 2 is not one of its values here", "drop or change"),
    ({"family": "hopper", "a_multicast": 2, "k_splits": 2}, "plan", "no kernel family can take the decisions",
     "drop or change"),
])
def test_a_pin_no_family_can_take_is_an_error_naming_the_key(plan, key, problem, fix):
    err = _error(_spec(plan))
    assert err.key == key and problem in err.problem and fix in err.fix, str(err)


@pytest.mark.parametrize("plan,problem", [(7, "expected a mapping of decisions"), ({}, "expected a mapping"),
                                          ({"stages": True}, "expected a number or a name"),
                                          ({"stages": [3]}, "expected a number or a name")])
def test_the_plan_key_is_a_mapping_of_scalars(plan, problem):
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(plan), "pinned.yaml")
    assert problem in info.value.problem


def test_pins_round_trip_and_key_the_tuning_database():
    from dgemm_cli.tune import spec_hash

    spec = parse_spec(_spec({"family": "hopper", "a_multicast": 2}), "pinned.yaml")
    again = parse_spec(spec.to_dict(), "again.yaml")
    assert again.pins == spec.pins == (("family", "hopper"), ("a_multicast", 2))
    assert spec_hash(spec) != spec_hash(parse_spec(_spec(), "pinned.yaml"))


def test_the_fallback_ignores_the_pins():
    data = _spec({"family": "hopper", "a_multicast": 2})
    data["operands"]["A"]["align"] = 2  # TMA needs 16 bytes: checked at run time, the cta kernel beside it
    plan = _plan(data)
    assert plan.primary.a_multicast == 2 and plan.fallback is not None and plan.fallback.family == "cta"


def test_gen_family_overrides_the_spec_family_and_keeps_only_its_own_pins():
    views = analyse(parse_spec(_spec({"family": "hopper"}), "pinned.yaml"))
    assert make_plan(views, SM90, "cta").family == "cta"
    views = analyse(parse_spec(_spec({"family": "hopper", "a_multicast": 2, "stages": 3}), "pinned.yaml"))
    plan = make_plan(views, SM90, "cta")
    assert plan.family == "cta" and plan.primary.stages == 3  # a_multicast is hopper's: dropped


def test_tune_measures_only_candidates_within_the_pins():
    views = analyse(parse_spec(_spec({"family": "hopper", "a_multicast": 2}), "pinned.yaml"))
    found = candidates(views, SM90, 1)
    assert found and all(c.family == "hopper" and c.plan.primary.a_multicast == 2 for c in found)


def test_every_bucket_of_a_run_time_spec_takes_the_pins():
    plan = _plan(_spec({"family": "cta", "stages": 3}, m={"min": 1, "max": 16}))
    assert isinstance(plan, BucketPlan)
    assert all(b.plan.family == "cta" and b.plan.primary.stages == 3 for b in plan.buckets)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6))
def test_every_multicast_draw_plans_the_multicast_kernel(seed):
    """random-specs' MULTICAST_SHARE: every draw plans the pinned kernel, its fallback where a pointer may be
    misaligned."""
    import random

    data = random_spec(random.Random(seed), f"rand_{seed}", multicast_share=1.0, epilogue_share=0.3)
    plan = _plan(data)
    assert data["plan"] == {"family": "hopper", "a_multicast": 2}
    assert plan.family == "hopper" and plan.primary.a_multicast == 2
