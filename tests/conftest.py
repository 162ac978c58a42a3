"""Shared fixtures and the GPU marker: tests marked `gpu` skip cleanly where no GPU is visible."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SPECS = sorted((REPO / "specs").glob("*.yaml"))


def pinned_elsewhere(spec, arch: str) -> bool:
    """The spec's `plan:` pins a family `arch` lacks (specs/decode_swapped_multicast.yaml pins hopper): planning it
    for `arch` fails naming the key and the arch's reason, which this checks; the caller skips that arch."""
    from dgemm_cli.arch import get_arch
    from dgemm_cli.errors import SpecError
    from dgemm_cli.plan import make_plan
    from dgemm_cli.views import analyse

    if not spec.pins:
        return False
    try:
        make_plan(analyse(spec), get_arch(arch))
    except SpecError as err:
        assert err.key == "plan.family" and f"{arch} has no" in err.problem, str(err)
        return True
    return False


def assert_grouped_kernels_compile(specs, family: str, tmp_path) -> None:
    """Each spec plans `family` with K over groups, and its two kernels (the slices and the `finish` that adds the
    groups' partials) build for sm_90a without spills or stack."""
    from dgemm_cli.arch import get_arch
    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.plan import make_plan
    from dgemm_cli.toolchain import find_nvcc
    from dgemm_cli.views import analyse

    sm90, nvcc = get_arch("sm_90a"), find_nvcc()
    for spec in specs:
        plan = make_plan(analyse(spec), sm90)
        assert plan.family == family and plan.primary.groups > 1, spec.name
        report = build(generate(spec, sm90, tmp_path).directory, "sm_90a", nvcc)
        assert report.ok, report.error
        assert report.kernels and not any(k.spills or k.stack_bytes for k in report.kernels), report.kernels
        assert any("finish" in k.kernel for k in report.kernels)


def pytest_addoption(parser, pluginmanager):
    # pyproject's addopts pass `--dist worksteal` for pytest-xdist; without the plugin (not installed, or
    # `-p no:xdist`) the option is accepted and means nothing, so that plain `pytest` runs.
    if not pluginmanager.has_plugin("xdist"):
        parser.addoption("--dist", default="no", help="pytest-xdist's distribution mode (pytest-xdist is absent)")


_HARNESS_CACHE_MADE: list[str] = []


def pytest_configure(config):
    # The host harness's subprocesses run beside the other workers' tests: numpy's BLAS on one thread (OpenBLAS's
    # idle threads spin about 0.1 s after each call, taking a core from the other workers' tests) and the kernels'
    # OpenMP threads waiting passively at barriers (their team still has every core, so the threaded paths run).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    # One shared harness object folder for the whole run (every worker inherits it from the controller): the
    # builds of every test share each arch's dg_harness object, and none reads or fills the user's cache.
    if "DEEPGEMM_HARNESS_CACHE" not in os.environ:
        os.environ["DEEPGEMM_HARNESS_CACHE"] = tempfile.mkdtemp(prefix="deepgemm-test-harness-")
        _HARNESS_CACHE_MADE.append(os.environ["DEEPGEMM_HARNESS_CACHE"])


def pytest_unconfigure(config):
    for folder in _HARNESS_CACHE_MADE:
        shutil.rmtree(folder, ignore_errors=True)


def gpu_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and "GPU" in proc.stdout


def pytest_collection_modifyitems(config, items):
    # The slow tests (compilers, the host suite's chunks, the proof sweeps) first, the longest first: those that
    # say their minutes (`@pytest.mark.slow(minutes=N)`) by them, the others in their own order. Under pytest-xdist
    # (`--dist worksteal`, pyproject's addopts) each of W workers starts with one contiguous W-th of the items, and
    # an idle worker takes the later half of a busy one's queue: the items are dealt round the workers (item i to
    # the (i mod W)-th part), so that each part starts with its share of the longest ones and no worker holds them
    # all while the others run out of work.
    def minutes(item) -> float:
        marker = item.get_closest_marker("slow")
        return marker.kwargs.get("minutes", 0) if marker is not None else 0

    items.sort(key=lambda item: ("slow" not in item.keywords, -minutes(item)))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        items[:] = [item for part in range(workers) for item in items[part::workers]]
    if gpu_present():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible (nvidia-smi -L); run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_tuning_db(tmp_path_factory, monkeypatch):
    """Every test reads and writes its own tuning database: a developer's tuned plans must not change
    what gen renders in the tests."""
    monkeypatch.setenv("DEEPGEMM_TUNING_DB", str(tmp_path_factory.mktemp("tuning") / "tuning.json"))
