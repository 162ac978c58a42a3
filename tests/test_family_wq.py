"""The `wq` family (integer weights, docs/design/weight-only.md): it alone takes weight-only specs, its plan, and the
index maps it renders, checked against the packed layouts' numpy definition (dgemm_cli/quant.py) by evaluating the
rendered Roles in Python (pure; the GPU tests verify the built kernels against the harness's reference)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from dgemm_cli import quant
from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.families import wqtc
from dgemm_cli.families.wq.render import context
from dgemm_cli.plan import make_plan
from dgemm_cli.render import base_context
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO

SPECS = sorted((REPO / "specs" / "weight_only").glob("*.yaml"))


def _spec(path):
    return parse_spec(yaml.safe_load(path.read_text()), str(path))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_every_weight_only_spec_plans_a_weight_only_family(path, arch):
    views = analyse(_spec(path))
    plan = make_plan(views, get_arch(arch))
    assert plan.kernels and all(kernel.family in ("wq", "wqtc") for kernel in plan.kernels)


def test_the_plan_covers_the_output_with_its_tiles():
    views = analyse(_spec(REPO / "specs/weight_only/w4_gptq_decode.yaml"))
    plan = make_plan(views, get_arch("sm_90a"), "wq").kernels[0]
    assert plan.cols * plan.tiles_n >= views.n > plan.cols * (plan.tiles_n - 1)
    assert plan.rows <= 16 and plan.ksplit * plan.cols == plan.threads
    assert plan.blocks == plan.tiles_n * -(-views.m // plan.rows)


_SEG = re.compile(r"dg::wq::Seg<(\d+), (\d+), (\d+)(, true)?>")


def _role(segs: list[str]):
    """A rendered dg::wq::Role as Python: flat index -> (offset, slot), dg/wq.cuh's Role::offset and ::slot."""
    parsed = [(int(a), int(b), int(c), bool(d)) for a, b, c, d in (_SEG.fullmatch(s).groups() for s in segs)]

    def at(i: int) -> tuple[int, int]:
        offset = slot = 0
        for j, (size, block, stride, packed) in enumerate(parsed):
            index = (i % size if j < len(parsed) - 1 else i) // block
            offset += (index // 8) * stride if packed else index * stride
            slot += index % 8 if packed else 0
            i //= size
        return offset, slot
    return at


def _weights_of(path, words: np.ndarray):
    """B's values at every (k, n) as the rendered traits index them (the 4-bit linear/awq and 8-bit paths)."""
    spec = _spec(path)
    views = analyse(spec)
    plan = make_plan(views, get_arch("sm_90a"), "wq").kernels[0]
    k = context(spec, views, plan, base_context(spec, views, plan_baseline(views), get_arch("sm_90a")))
    w = k["weights"]
    kr, nr = _role(w["k"]), _role(w["n"])
    out = np.zeros((views.k, views.n), dtype=np.int64)
    for kk in range(views.k):
        for nn in range(views.n):
            (ko, ks), (no, ns) = kr(kk), nr(nn)
            word = int(words[ko + no])
            if w["bits"] == 8:
                q = word if not w["signed"] else (word ^ 0x80) - 0x80
            else:
                v = ks + ns
                at = (v % 2) * 4 + v // 2 if w["order"] == "dg::wq::AWQ" else v
                q = (word >> (4 * at)) & 15
                q = (q ^ 8) - 8 if w["signed"] else q
            out[kk, nn] = q
    return out


@pytest.mark.parametrize("layout", ["gptq", "awq"])
def test_the_rendered_word_maps_read_the_checkpoint_layouts(tmp_path, layout):
    """A GPTQ (AWQ) qweight packed by quant.py is read back by the traits' Roles as the values packed."""
    k, n = 40, 24
    rng = np.random.default_rng(5)
    values = rng.integers(0, 16, size=(k, n), dtype=np.uint8)
    if layout == "gptq":
        words = quant.pack(values, axis=0, order="linear")  # [k/8, n]
    else:
        words = quant.pack(values, axis=1, order="awq")  # [k, n/8]
    doc = {"name": "w", "dtype": "f16", "gemm": {"m": 2, "n": n, "k": k},
           "operands": {"A": {"layout": "row"}, "B": {"dtype": "uint4", "packing": layout, "layout": "row"},
                        "C": {"layout": "row"}},
           "scales": {"B": {"block": {"k": 8}, "layout": "row"}}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert (_weights_of(path, words.reshape(-1)) == values).all()


def test_a_column_major_word_view_and_signed_values_read_back(tmp_path):
    k, n = 24, 10
    rng = np.random.default_rng(6)
    values = rng.integers(-8, 8, size=(k, n))
    words = quant.pack(quant.unsigned(values), axis=0, order="linear")  # [k/8, n]
    doc = {"name": "w", "contraction": "mk,kn->mn", "sizes": {"m": 3, "k": k, "n": n},
           "operands": {"A": {"strides": [k, 1], "dtype": "f16"},
                        "B": {"strides": [1, 3], "dtype": "int4", "packing": {"along": "k", "order": "linear"}},
                        "C": {"strides": [n, 1], "dtype": "f16"}},
           "scales": {"B": {"per": "channel", "dtype": "f16"}}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    column_major = np.ascontiguousarray(words.T).reshape(-1)  # word (k/8, n) at n * 3 + k/8
    assert (_weights_of(path, column_major) == values).all()


def test_the_dg_layout_is_indexed_by_the_header_not_by_strides():
    spec = _spec(REPO / "specs/weight_only/w4_dg_int4_channel.yaml")
    views = analyse(spec)
    plan = make_plan(views, get_arch("sm_90a"), "wq").kernels[0]
    k = context(spec, views, plan, base_context(spec, views, plan_baseline(views), get_arch("sm_90a")))
    assert k["weights"]["dg"] and k["weights"]["k_chunks"] == 16 and k["weights"]["signed"]


def test_int8_weights_read_bytes_through_their_strides(tmp_path):
    k, n = 12, 9
    values = np.random.default_rng(7).integers(-128, 128, size=(k, n))
    doc = {"name": "w", "dtype": "f16", "gemm": {"m": 2, "n": n, "k": k},
           "operands": {"A": {"layout": "row"}, "B": {"dtype": "int8", "layout": "col"}, "C": {"layout": "row"}},
           "scales": {"B": {"per": "channel"}}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    as_bytes = np.ascontiguousarray(values.T).reshape(-1) & 0xFF  # [n][k]
    assert (_weights_of(path, as_bytes) == values).all()


def test_random_weight_only_specs_all_plan_wq_or_wqtc():
    """`random-specs --wq-share 1` draws specs the spec reader takes and a weight-only family plans, on both archs:
    wqtc where its gates (the dg layout, GPTQ's words or k-contiguous bytes, up to 64 rows) allow and it costs
    less, else wq; the share pinned to wqtc reaches its three layouts."""
    from dgemm_cli.randspec import random_specs

    pinned = []
    for raw in random_specs(120, 42, wq_share=1.0):
        views = analyse(parse_spec(raw, raw["name"]))
        for arch in ("sm_80", "sm_90a"):
            assert all(kernel.family in ("wq", "wqtc") for kernel in make_plan(views, get_arch(arch)).kernels), \
                raw["name"]
        if raw.get("plan") == {"family": "wqtc"}:
            pinned.append(wqtc.layout_of(views))
    assert {"dg", "k_words", "k_bytes"} <= set(pinned)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_the_bench_baseline_of_integer_weights_is_the_dense_gemm(path):
    """No cuBLAS call takes packed weights: the baseline is cuBLASLt on the same shape with dense weights in A's
    dtype (dg_cublaslt.cuh's DgCublasLtDenseWeights), rendered into the harness as its alternative."""
    spec = _spec(path)
    bl = plan_baseline(analyse(spec))
    assert not bl.available and "cuBLAS has no" in bl.kind
    assert bl.alternative is not None and bl.alternative.cls.startswith("DgCublasLtDenseWeights<")
    assert bl.alternative.header == "dg_cublaslt.cuh" and spec.A.dtype in bl.alternative.why
