"""The README and the tool agree: every option of every command is in the README's command table and every
option there exists; the nn.Linear example plans and its C prototype is the one gen writes."""

from __future__ import annotations

import re

import pytest
import yaml

from dgemm_cli.cli import main
from dgemm_cli.render import c_prototype
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO

README = (REPO / "README.md").read_text()


def _table_rows() -> dict[str, str]:
    """command -> the first cells of its rows in the README's command table (`verify` has two: on the GPU and
    --formal)."""
    rows: dict[str, str] = {}
    for line in README.splitlines():
        if m := re.match(r"\| `deepgemm ([a-z-]+)([^`]*)` \|", line):
            rows[m.group(1)] = rows.get(m.group(1), "") + m.group(2)
    return rows


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_option_is_in_the_readme_and_every_readme_option_exists(name):
    rows = _table_rows()
    assert name in rows, f"README's command table has no row for `deepgemm {name}`"
    options = [p for p in main.commands[name].params if p.param_type_name == "option"]
    written = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", rows[name]))
    known = {o for p in options for o in p.opts}
    assert written <= known, f"README lists {sorted(written - known)} for `{name}`, which it lacks"
    missing = [p.opts[-1] for p in options if not set(p.opts) & written]
    assert not missing, f"README's `deepgemm {name}` row lacks {missing}"


def test_every_option_has_help():
    for name, command in main.commands.items():
        for p in command.params:
            if p.param_type_name == "option":
                assert p.help, f"`deepgemm {name} {p.opts[-1]}` has no --help text"


def test_the_nvcc_search_order_is_the_same_everywhere():
    order = "$DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, PATH"
    assert "`$DEEPGEMM_NVCC`,\n`$CUDA_HOME`, `$CUDA_PATH`, the pip CUDA wheels, `PATH`" in README
    for name, command in main.commands.items():
        for p in command.params:
            if p.name == "nvcc_path":
                assert order in p.help, f"`deepgemm {name} --nvcc` gives another order"


def test_the_nn_linear_example_plans_and_has_the_prototype_gen_writes():
    text = re.search(r"### nn.Linear.*?```yaml\n(.*?)```(.*?)\n\n", README, re.S)
    spec = parse_spec(yaml.safe_load(text.group(1)), "README.md")
    written = " ".join(text.group(2).split())
    assert c_prototype(spec, analyse(spec)) in written
    assert spec.B.stride_of("i") == 1 and spec.B.stride_of("o") == spec.sizes["i"]  # W [out, in], row-major


@pytest.mark.slow
def test_the_from_pytorch_example_runs_as_written(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    code = re.search(r"## From PyTorch.*?```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.setenv("DEEPGEMM_CACHE", str(tmp_path))
    exec(compile(code, "README.md", "exec"), {})
