"""Rendered sources of a few specs, kept as files under tests/snapshots/render/: one spec per family and shape
(hopper, cta with mma.sync and with FFMA, gemv, a run-time size over several families, splitk with one group, dot
with groups and its run-time pointer check). A change to them is a change to every generated kernel like them:
review it with `git diff tests/snapshots`, and when it is meant, write the files anew with

    DEEPGEMM_UPDATE_SNAPSHOTS=1 python -m pytest -q tests/test_render_snapshots.py
"""

from __future__ import annotations

import difflib
import os

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec
from dgemm_cli.views import analyse

from .conftest import REPO

SNAPSHOTS = REPO / "tests" / "snapshots" / "render"
UPDATE = os.environ.get("DEEPGEMM_UPDATE_SNAPSHOTS") == "1"

# (spec under specs/, family forced or None for the model's pick) -> the files kept
CASES = {
    ("square_bf16", None): (".cu", ".h"),
    ("odd_tails", None): (".cu", ".h"),
    ("nhwc_padded_f32", None): (".cu", ".h"),
    ("decode_qk", None): (".cu", ".h"),
    ("decode_dynamic", None): (".cu", ".h"),
    ("conv1x1_nchw", None): (".cu", ".h"),
    ("bench/decode_8x4096x4096", "splitk"): (".cu",),
    ("bench/decode_16x4096x4096", "splitk"): (".cu",),
    ("bench/decode_1x4096x128", "splitk"): (".cu",),
    ("f32/f32_skinny", None): (".cu",),
    ("epilogue/decode_bias_silu", "splitk"): (".cu",),
    ("bench/fullred_dot_16M_f16", None): (".cu",),
}


def _case_dir(path: str, family: str | None) -> str:
    return path.replace("/", "_") + (f"-{family}" if family else "")


@pytest.mark.parametrize("path, family", sorted(CASES, key=str), ids=lambda x: str(x))
def test_rendered_sources_match_their_snapshot(path, family):
    spec = load_spec(REPO / "specs" / f"{path}.yaml")
    views = analyse(spec)
    arch = get_arch("sm_90a")
    files = render_sources(spec, views, make_plan(views, arch, family), plan_baseline(views), arch)
    folder = SNAPSHOTS / _case_dir(path, family)
    for suffix in CASES[(path, family)]:
        name = f"{spec.name}{suffix}"
        kept = folder / name
        if UPDATE:
            folder.mkdir(parents=True, exist_ok=True)
            kept.write_text(files[name])
            continue
        assert kept.is_file(), f"no snapshot {kept}; write it with DEEPGEMM_UPDATE_SNAPSHOTS=1 (module docstring)"
        expected = kept.read_text()
        if files[name] != expected:
            diff = difflib.unified_diff(expected.splitlines(), files[name].splitlines(), str(kept), "rendered",
                                        lineterm="", n=2)
            shown = "\n".join(list(diff)[:80])
            pytest.fail(f"{name} differs from its snapshot (refresh on purpose: see the module docstring):\n{shown}")
