"""Issue 44's random sweep: 200 random specs drawn to reach every GPU family and its variants (decode shapes, rows
sized at run time, flat rows, vector loads of A, the wide small-M shapes, multicast, dot products, FP8 with scale
views, integer weights), each kernel proved by Coq as `gen` plans it, through `deepgemm verify --formal` as a user
runs it. Marked slow (about 15 minutes on 2 cores, docs/RESULTS.md "Verification") so that it starts first."""

from __future__ import annotations

import json

import pytest

from dgemm_cli.families import FAMILIES
from dgemm_cli.randspec import random_specs

from .formal_support import needs_coq, prove_every_kernel

COUNT, SEED = 200, 71
# Each share draws its kind of spec among the 200 (randspec's options of the same names): together they reach
# every cuda family and the variants the random suites verify on the GPU.
SHARES = dict(small_m_share=0.3, dynamic_share=0.05, row_blocks_share=0.05, a_vectors_share=0.1,
              wide_decode_share=0.3, wide_batch_share=0.05, wide_short_k_share=0.05, wide_staged_share=0.05,
              multicast_share=0.05, dot_share=0.04, fp8_share=0.1, fp8_views_share=0.05, wq_share=0.1)


@pytest.mark.slow(minutes=15)
@needs_coq
def test_every_kernel_of_200_random_specs_proves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = []
    for spec in random_specs(COUNT, SEED, **SHARES):
        path = tmp_path / f"{spec['name']}.yaml"
        path.write_text(json.dumps(spec))  # JSON is YAML
        paths.append(path)
    rows = prove_every_kernel(paths)
    assert {x["family"] for x in rows} == {name for name, f in FAMILIES.items() if f.backend == "cuda"}
    # Rows sized at run time are among them: a kernel a bucket of rows ("s 12..40").
    assert any(".." in x["kernel"] for x in rows)
