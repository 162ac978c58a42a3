"""`random-specs --perf`: realistic problems that parse and plan, the same for a seed, every class drawn, each
within the suite's bounds."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from dgemm_cli.arch import get_arch
from dgemm_cli.cli import main
from dgemm_cli.plan import make_plan
from dgemm_cli.randspec.perf import PERF_CLASSES, PERF_MAX_FLOPS, PERF_MIN_BYTES, _bytes, _flops, perf_specs
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse


def test_every_class_is_drawn_and_each_problem_is_within_the_bounds():
    specs = perf_specs(120, seed=3)
    classes = {s["name"][len("perf_"):].rsplit("_", 1)[0] for s in specs}
    assert classes == set(PERF_CLASSES)
    for s in specs:
        assert _flops(s) <= PERF_MAX_FLOPS and _bytes(s) >= PERF_MIN_BYTES, s["name"]


def test_the_same_seed_draws_the_same_problems():
    assert perf_specs(30, seed=7) == perf_specs(30, seed=7)
    assert perf_specs(30, seed=7) != perf_specs(30, seed=8)


def test_every_problem_parses_and_plans_for_the_h200():
    for s in perf_specs(60, seed=1):
        spec = parse_spec(s, s["name"])
        make_plan(analyse(spec), get_arch("sm_90a"))


def test_the_cli_writes_them(tmp_path):
    result = CliRunner().invoke(main, ["random-specs", "12", "--perf", "--seed", "2", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {f.stem: yaml.safe_load(f.read_text()) for f in tmp_path.glob("perf_*.yaml")}
    assert written == {s["name"]: s for s in perf_specs(12, seed=2)}
