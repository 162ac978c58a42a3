"""The host backend end to end, as CI runs it: every spec of specs/ (all folders) the cpu family accepts, and 200
random specs, generated for `--arch cpu`, built with the host compiler and verified numerically on this machine by
the host harness (one seed each). The specs are cut into chunks so that pytest-xdist spreads them over the cores;
each chunk runs the three commands a user runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dgemm_cli.randspec import random_specs
from dgemm_cli.spec import load_spec
from dgemm_cli.views import analyse

from .conftest import REPO

SPEC_CHUNKS = 12
RANDOM_COUNT, RANDOM_SEED, RANDOM_CHUNKS = 200, 46, 10
HOST_SPECS = [p for p in sorted((REPO / "specs").rglob("*.yaml")) if not load_spec(p).scales]  # e4m3: refused


def _balanced_chunks(paths: list[Path], count: int) -> list[list[Path]]:
    """`paths` dealt into `count` chunks of about equal work, the host kernel's multiply-adds (the largest first, each
    to the chunk with the least so far): two 8192-cubed squares hold 44% of specs/' work, and a chunk holding both
    ran alone for minutes after every other test had finished."""
    def work(path: Path) -> int:
        views = analyse(load_spec(path))
        return views.batch * views.m * views.n * views.k

    chunks: list[list[Path]] = [[] for _ in range(count)]
    load = [0] * count
    for macs, path in sorted(((work(p), p) for p in paths), key=lambda x: x[0], reverse=True):
        i = load.index(min(load))
        chunks[i].append(path)
        load[i] += macs
    return chunks


HOST_CHUNKS = _balanced_chunks(HOST_SPECS, SPEC_CHUNKS)


def _dg(*args, cwd: Path = REPO, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, check=False)


def _gen_build_verify(specs: list[Path], out: Path) -> None:
    gen = _dg("gen", *specs, "--arch", "cpu", "-o", out)
    assert gen.returncode == 0, gen.stderr
    build = _dg("build", out, "-j", "1")
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    verify = _dg("verify", out, "--seeds", "1", "--json")
    rows = json.loads(verify.stdout)
    failed = [r for r in rows if not r["passed"]]
    assert len(rows) == len(specs) and not failed, json.dumps(failed, indent=1)[:6000]
    assert verify.returncode == 0


@pytest.mark.slow(minutes=3)
@pytest.mark.parametrize("chunk", range(SPEC_CHUNKS))
def test_specs_verify_on_the_host(chunk, tmp_path):
    _gen_build_verify(HOST_CHUNKS[chunk], tmp_path / "gen")


@pytest.mark.slow(minutes=3)
@pytest.mark.parametrize("chunk", range(RANDOM_CHUNKS))
def test_random_specs_verify_on_the_host(chunk, tmp_path):
    specs = random_specs(RANDOM_COUNT, RANDOM_SEED, dynamic_share=0.2, small_m_share=0.2)[chunk::RANDOM_CHUNKS]
    paths = []
    for spec in specs:
        path = tmp_path / f"{spec['name']}.yaml"
        path.write_text(json.dumps(spec))  # JSON is YAML
        paths.append(path)
    _gen_build_verify(paths, tmp_path / "gen")


def test_the_chunks_hold_every_host_spec_once():
    dealt = [p for chunk in HOST_CHUNKS for p in chunk]
    assert sorted(dealt) == sorted(HOST_SPECS) and len(HOST_CHUNKS) == SPEC_CHUNKS and all(HOST_CHUNKS)


def test_the_e4m3_and_weight_only_specs_are_the_only_ones_left_out():
    left = sorted(p.relative_to(REPO / "specs") for p in (REPO / "specs").rglob("*.yaml") if load_spec(p).scales)
    assert left and all(p.parts[0] in ("fp8", "weight_only") or p.name.startswith(("fp8_", "w4_", "w8_")) for p in left)


def test_a_folder_not_built_fails_alone_and_the_others_run(tmp_path):
    """verify and bench over several folders where one build failed (or never ran): that folder is one failed row
    naming the fix, the built ones still run, and the exit code is 1; a lone unbuilt folder is the error itself."""
    out = tmp_path / "gen"
    assert _dg("gen", REPO / "specs/odd_tails.yaml", REPO / "specs/square_bf16.yaml", "--arch", "cpu", "-o",
               out).returncode == 0
    assert _dg("build", out / "odd_tails", "-j", "1").returncode == 0
    verify = _dg("verify", out, "--seeds", "1", "--json")
    rows = {r["name"]: r for r in json.loads(verify.stdout)}
    assert rows["odd_tails"]["passed"] and not rows["square_bf16"]["passed"]
    assert "not built; run `deepgemm build" in rows["square_bf16"]["error"] and verify.returncode == 1
    bench = _dg("bench", out, "--reps", "5")
    assert bench.returncode == 1 and "square_bf16" in bench.stdout and "not built" in bench.stdout
    alone = _dg("verify", out / "square_bf16", "--seeds", "1")
    assert alone.returncode == 4 and "not built" in alone.stderr
