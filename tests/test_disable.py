"""`--disable`: the options as constraints and gates (disable.py), the plans they make over specs/ (every
subfolder), their record in the .cu's header, plan.json and explain, the command line and the Python API; and
`deepgemm bisect` (its pure part here, its GPU run marked `gpu`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import deepgemm
from dgemm_cli import disable
from dgemm_cli.arch import get_arch
from dgemm_cli.bisect import StepResult, Variant, kernels_key, variants, verdict
from dgemm_cli.cli import main
from dgemm_cli.errors import EXIT_NO_GPU, DeepGemmError
from dgemm_cli.explain import explain_text
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.plan import BucketPlan, Plan, make_plan
from dgemm_cli.records import PlanRecord
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec
from dgemm_cli.views import analyse

from .conftest import REPO

ALL_SPECS = sorted((REPO / "specs").rglob("*.yaml"))


def _spec(name: str):
    return load_spec(next(p for p in ALL_SPECS if p.stem == name))


# A spec of specs/ (any subfolder) each option re-plans, chosen among those that plan fast; the slow test below
# re-plans and renders every spec with every option.
REPLANNED = {
    "vector-loads": "ein_abcd_ab_small_f16",  # cta: cp.async -> gathers
    "tma": "square_bf16",  # hopper ruled out
    "wgmma": "fp8_blocks_tails",  # fp8_hopper ruled out: fp8_cta
    "multicast": "decode_swapped_multicast",  # its pinned a_multicast = 2 overridden
    "ksplit": "ein_ab_bcd_to_ad_small_f16",  # splitk ruled out
    "dependent-launch": "decode_1x2048x512",  # gemv ruled out
    "pipeline": "square_bf16",  # hopper's ring at 3 stages
    "unroll": "ein_ab_ab_large_f16",  # dot's unroll = 1
}


def _plans(path: Path, option: str) -> tuple[Plan | BucketPlan, Plan | BucketPlan | None]:
    """The spec's plan as planned, and with `option` disabled (None where the planner cannot make it)."""
    spec = load_spec(path)
    views, arch = analyse(spec), get_arch(spec.arch)
    base = make_plan(views, arch)
    try:
        return base, make_plan(views, arch, disabled=(option,))
    except DeepGemmError:
        return base, None


def _named(plan: Plan | BucketPlan, option: str) -> bool:
    """Some decision of the plan (a kernel's, or the family's) names the switch."""
    switch = f"--disable {option}"
    plans = [b.plan for b in plan.buckets] if isinstance(plan, BucketPlan) else [plan]
    for p in plans:
        decisions = [p.family_decision, *(d for k in p.kernels for d in k.decisions)]
        if any(switch in d.summary() or any(switch in r.why for r in d.rejected) for d in decisions):
            return True
    return False


def _render(option: str | None, path: Path) -> dict[str, str]:
    spec = load_spec(path)
    planned = plan_spec(spec, get_arch(spec.arch), disabled=(option,) if option else ())
    return render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)


def test_every_option_has_a_replanned_spec():
    assert set(REPLANNED) == set(disable.OPTIONS)


@pytest.mark.parametrize("option", list(disable.OPTIONS))
def test_every_option_replans_a_spec_whose_decisions_name_the_switch_and_it_renders(option):
    path = next(p for p in ALL_SPECS if p.stem == REPLANNED[option])
    base, plan = _plans(path, option)
    assert plan is not None and kernels_key(plan) != kernels_key(base)
    assert _named(plan, option)
    assert plan.disabled == (option,)
    files = _render(option, path)
    name = load_spec(path).name
    assert f"// Built with --disable {option}:" in files[f"{name}.cu"]
    assert PlanRecord.from_dict(json.loads(files["plan.json"])).disabled == (option,)
    assert json.loads(files["plan.json"])["plan"]["disabled"] == [option]


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: p.stem)
def test_every_option_replans_every_spec_it_applies_to_into_a_plan_that_renders(path):
    """Every spec with every option: a plan that differs renders, and names the switch in its decisions or, where
    the family it restricted lost on cost (hopper at 3 stages against gemv), explain names what it restricted (the
    planner may refuse a spec whose pins no family keeps: that is a PlanError or SpecError, never another
    exception). Each spec is planned once as it is and once an option (the longest test of this file)."""
    spec = load_spec(path)
    arch = get_arch(spec.arch)
    views = analyse(spec)
    base = kernels_key(make_plan(views, arch))
    for option in disable.OPTIONS:
        try:
            planned = plan_spec(spec, arch, views=views, disabled=(option,))
        except DeepGemmError:
            continue
        if kernels_key(planned.plan) == base:
            continue
        if not _named(planned.plan, option):
            text = explain_text(spec, arch, disabled=(option,))
            said = [line for line in text.splitlines() if f"--disable {option}: " in line]
            assert any("no family here uses it" not in line for line in said), f"{path.stem}: {option}"
        files = render_sources(spec, planned.views, planned.plan, planned.baseline, planned.arch)
        assert f"{spec.name}.cu" in files


def test_a_folder_generated_without_the_switch_records_none():
    files = _render(None, next(p for p in ALL_SPECS if p.stem == "odd_tails"))
    assert "--disable" not in files["odd_tails.cu"]
    assert "disabled" not in json.loads(files["plan.json"])["plan"]
    assert PlanRecord.from_dict(json.loads(files["plan.json"])).disabled == ()


def test_plan_record_round_trips_the_switches():
    files = _render("tma", next(p for p in ALL_SPECS if p.stem == "square_bf16"))
    record = PlanRecord.from_dict(json.loads(files["plan.json"]))
    assert record.disabled == ("tma",)
    assert PlanRecord.from_dict(record.to_dict()) == record


def test_vector_loads_force_gathers_in_the_cta_family():
    spec = _spec("ein_abcd_ab_small_f16")
    plan = make_plan(analyse(spec), get_arch(spec.arch), disabled=("vector-loads",))
    assert plan.family == "cta"
    assert plan.primary.a.kind == plan.primary.b.kind == "gather"
    summaries = [d.summary() for d in plan.primary.decisions]
    assert "loader_a = gather (forced by --disable vector-loads)" in summaries


def test_pipeline_takes_the_shallowest_ring_each_family_allows():
    spec = _spec("square_bf16")
    views, arch = analyse(spec), get_arch(spec.arch)
    assert make_plan(views, arch, disabled=("pipeline",)).primary.stages == 3  # hopper's TMA ring
    assert make_plan(views, arch, "cta", disabled=("pipeline",)).primary.stages == 2


def test_a_family_that_cannot_run_without_it_is_ruled_out_with_the_switch():
    spec = _spec("square_bf16")
    plan = make_plan(analyse(spec), get_arch(spec.arch), disabled=("wgmma",))
    assert plan.family != "hopper"
    hopper = next(r for r in plan.family_decision.rejected if r.value == "hopper")
    assert hopper.why.startswith("hopper: --disable wgmma: ")


def test_family_that_the_switch_rules_out_is_refused_by_family():
    spec = _spec("square_bf16")
    with pytest.raises(DeepGemmError, match="--family hopper cannot run this problem.*--disable tma"):
        make_plan(analyse(spec), get_arch(spec.arch), "hopper", disabled=("tma",))


def test_unknown_option_suggests_the_nearest_and_lists_them():
    with pytest.raises(disable.DisableError) as err:
        disable.parse_disable("vector-load")
    text = str(err.value)
    assert "--disable vector-load: no such option" in text and "did you mean 'vector-loads'?" in text
    assert ", ".join(disable.OPTIONS) in text
    assert isinstance(err.value, DeepGemmError)


@pytest.mark.parametrize("refused", list(disable.REFUSED))
def test_an_optimization_that_cannot_be_disabled_says_why(refused):
    with pytest.raises(disable.DisableError, match=f"--disable {refused}: cannot be disabled"):
        disable.parse_disable(refused)


def test_options_parse_in_their_order_and_once():
    assert disable.parse_disable("tma, Vector-Loads,tma") == ("vector-loads", "tma")
    assert disable.parse_disable(None) == ()


def test_explain_names_the_switch_and_what_no_family_here_uses():
    spec = _spec("ein_abcd_ab_small_f16")
    text = explain_text(spec, get_arch(spec.arch), disabled=disable.parse_disable("tma,vector-loads"))
    assert "built with --disable vector-loads,tma" in text
    assert "--disable tma: no family here uses it" in text
    assert "loader_a = gather (forced by --disable vector-loads)" in text


def test_explain_of_a_run_time_spec_names_the_buckets_a_switch_touches():
    spec = _spec("decode_dynamic")
    text = explain_text(spec, get_arch(spec.arch), disabled=("ksplit",))
    assert "--disable ksplit: splitk ruled out" in text


def test_gen_cli_writes_the_switch_and_explain_cli_prints_it(tmp_path):
    spec = next(p for p in ALL_SPECS if p.stem == "square_bf16")
    runner = CliRunner()
    res = runner.invoke(main, ["gen", str(spec), "-o", str(tmp_path), "--disable", "tma,multicast"])
    assert res.exit_code == 0, res.output
    assert "built with --disable tma,multicast" in res.output
    cu = (tmp_path / "square_bf16" / "square_bf16.cu").read_text()
    assert "// Built with --disable tma,multicast:" in cu
    assert PlanRecord.load(tmp_path / "square_bf16").disabled == ("tma", "multicast")
    res = runner.invoke(main, ["explain", str(spec), "--disable", "multicast"])
    assert res.exit_code == 0 and "--disable multicast: hopper: a_multicast = 1" in res.output


def test_gen_cli_refuses_an_unknown_option():
    spec = next(p for p in ALL_SPECS if p.stem == "square_bf16")
    res = CliRunner().invoke(main, ["gen", str(spec), "--disable", "tmaa"])
    assert res.exit_code == 2 and "did you mean 'tma'?" in res.output


def test_help_lists_every_option_with_its_meaning():
    res = CliRunner().invoke(main, ["gen", "--help"], terminal_width=400)
    for option in disable.OPTIONS.values():
        assert f"{option.name}: {option.help}" in " ".join(res.output.split())


def test_python_api_generate_takes_disable(tmp_path):
    spec = _spec("ein_abcd_ab_small_f16")
    g = deepgemm.generate(spec, tmp_path, disable="vector-loads")
    assert PlanRecord.load(g.directory).disabled == ("vector-loads",)
    with pytest.raises(disable.DisableError):
        deepgemm.generate(spec, tmp_path, disable=["warp-specialization"])


# ---------------------------------------------------------------------------------------------------- bisect

def test_bisect_variants_build_only_what_an_option_changes():
    spec = _spec("ein_abcd_ab_small_f16")
    steps = {v.label: v for v in variants(analyse(spec), get_arch(spec.arch))}
    assert steps["baseline"].changed and steps["baseline"].option is None
    assert steps["vector-loads"].changed
    assert not steps["tma"].changed and "no family here changes" in steps["tma"].why


def test_bisect_verdict():
    def result(option, passed):
        return StepResult(Variant(option, None, True), passed)
    v = verdict([result(None, False), result("vector-loads", True), result("tma", False), result("unroll", None)])
    assert (v.suspects, v.still_failing, v.not_run) == (("vector-loads",), ("tma",), ("unroll",))
    assert "suspect vector-loads" in v.summary()
    assert verdict([result(None, True)]).summary() == "the baseline passes verify: nothing to bisect"


def test_bisect_without_a_gpu_fails_as_verify_does(monkeypatch):
    from dgemm_cli.cli import common
    monkeypatch.setattr(common, "find_gpus", lambda: [])
    spec = next(p for p in ALL_SPECS if p.stem == "odd_tails")
    res = CliRunner().invoke(main, ["bisect", str(spec)])
    assert res.exit_code == EXIT_NO_GPU
    assert "no CUDA GPU visible (nvidia-smi lists none): verify and bench need one" in res.output


@pytest.mark.gpu
@pytest.mark.slow
def test_bisect_finds_a_seeded_vector_guard_fault(tmp_path, monkeypatch):
    """The cta loaders' run-time guard made wrong on purpose (the renderer patched to check the promised alignment):
    the harness's shifted pointers take the wide cp.async path and verify fails; with vector loads disabled the
    loaders gather and pass."""
    from dgemm_cli.families.cta import render as cta_render

    right = cta_render.context

    def wrong_guard(spec, views, plan, base):
        k = right(spec, views, plan, base)
        if k["dispatch"]:
            k["dispatch_cond"] = " && ".join(f"aligned({ld.operand}, {ld.promised_align})"
                                             for ld in (plan.a, plan.b) if ld.runtime_align)
        return k

    monkeypatch.setattr(cta_render, "context", wrong_guard)
    spec = next(p for p in ALL_SPECS if p.stem == "f32_nchw")
    res = CliRunner().invoke(main, ["bisect", str(spec), "-o", str(tmp_path), "--json"])
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert not report["baseline_passed"] and "vector-loads" in report["suspects"]


def test_the_seeded_fault_spec_has_a_guard_to_break():
    spec = _spec("f32_nchw")
    plan = make_plan(analyse(spec), get_arch(spec.arch))
    assert plan.family == "cta" and (plan.primary.a.runtime_align or plan.primary.b.runtime_align)
