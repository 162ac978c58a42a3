"""The cuBLAS baseline planner: every no-copy formulation, copies only when none exists."""

from __future__ import annotations

import numpy as np
import pytest

from dgemm_cli.baseline import CublasCall, plan_baseline
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO


def _plan(spec: dict):
    return plan_baseline(analyse(parse_spec(spec)))


def _emulate(call: CublasCall, a: np.ndarray, b: np.ndarray, c_shape: tuple[int, ...], c_strides: tuple[int, ...]):
    """Run one cuBLAS call in numpy on flat buffers (element strides, column-major semantics) and
    return C's buffer: the independent check that a formulation computes the product."""
    xs, ys = (b, a) if call.swap else (a, b)
    c = np.zeros(int(sum((s - 1) * st for s, st in zip(c_shape, c_strides))) + 1)
    for p in range(call.batch):
        def mat(buf, ld, trans, rows, cols, off):
            # op(X) is rows x cols; stored column-major (ld) as X or, transposed, as X^T.
            if not trans:
                return np.array([[buf[off + i + j * ld] for j in range(cols)] for i in range(rows)])
            return np.array([[buf[off + j + i * ld] for j in range(cols)] for i in range(rows)])
        x = mat(xs, call.ldx, call.trans_x, call.m, call.k, p * call.stride_x)
        y = mat(ys, call.ldy, call.trans_y, call.k, call.n, p * call.stride_y)
        prod = x @ y
        for i in range(call.m):
            for j in range(call.n):
                c[p * call.stride_c + i + j * call.ldc] = prod[i, j]
    return c


def test_conv_nchw_gets_a_no_copy_batched_call():
    """The 1x1 convolution over NCHW: out[n] = W . X[n], batch over n, m = the merged hw segment."""
    bl = plan_baseline(analyse(load_spec(REPO / "specs" / "conv1x1_nchw.yaml")))
    assert bl.kind == "cublas" and bl.copy == (False, False, False)
    (call,) = bl.calls
    assert (call.batch, call.m, call.n, call.k) == (8, 3136, 512, 256)
    assert (call.stride_x, call.stride_y, call.stride_c) == (802816, 0, 512 * 3136)
    assert "batch=n[8]" in call.desc


@pytest.mark.parametrize("a_layout,b_layout,c_layout", [(a, b, c) for a in ("row", "col") for b in ("row", "col")
                                                         for c in ("row", "col")])
def test_every_gemm_layout_is_direct(a_layout, b_layout, c_layout):
    bl = _plan({"name": "g", "gemm": {"m": 64, "n": 48, "k": 32},
                "operands": {"A": {"layout": a_layout}, "B": {"layout": b_layout}, "C": {"layout": c_layout}}})
    assert bl.kind == "cublas" and bl.calls
    call = bl.calls[0]
    assert call.swap == (c_layout == "row")
    assert call.batch == 1


def test_broadcast_batch_is_stride_zero_not_a_copy():
    bl = _plan({"name": "g", "gemm": {"batch": 4, "m": 16, "n": 32, "k": 8},
                "operands": {"B": {"strides": [0, 32, 1]}}})
    assert bl.kind == "cublas"
    assert any(c.batch == 4 and 0 in (c.stride_x, c.stride_y) for c in bl.calls)


def test_two_k_segments_need_a_copy():
    # k = (a, b) does not chain in A (a's stride 40 != 3 * 4), so k has two segments: cuBLAS has one K.
    bl = _plan({"name": "g", "contraction": "mab,abn->mn", "sizes": {"m": 4, "a": 2, "b": 3, "n": 5},
                "operands": {"A": {"strides": [1, 40, 4]}}})
    assert bl.kind == "copy+cublas"
    assert bl.copy[:2] == (True, True) and len(bl.calls) == 1


def test_degenerate_gemv_batches_are_not_listed():
    """Moving a segment into the batch when nothing forces it would time a batch of GEMVs."""
    bl = plan_baseline(analyse(load_spec(REPO / "specs" / "square_bf16.yaml")))
    assert all(c.batch == 1 for c in bl.calls)


@pytest.mark.parametrize("spec", [
    {"name": "g", "gemm": {"m": 5, "n": 3, "k": 4}, "operands": {"A": {"layout": "col"}}},
    {"name": "g", "gemm": {"batch": 2, "m": 3, "n": 4, "k": 5}, "operands": {"B": {"strides": [0, 1, 5]}}},
    {"name": "g", "contraction": "nchw,kc->nkhw", "sizes": {"n": 2, "c": 3, "h": 2, "w": 3, "k": 4}},
    {"name": "g", "contraction": "nchw,ndhw->ncd", "sizes": {"n": 1, "c": 3, "h": 2, "w": 2, "d": 4}},
])
def test_every_formulation_computes_the_product(spec):
    """Each listed call, emulated in numpy, writes exactly the einsum into C's buffer."""
    s = parse_spec(spec)
    bl = plan_baseline(analyse(s))
    assert bl.kind == "cublas"
    rng = np.random.default_rng(0)
    a = rng.standard_normal(s.A.span)
    b = rng.standard_normal(s.B.span)
    av = np.lib.stride_tricks.as_strided(a, s.A.sizes, [x * 8 for x in s.A.strides])
    bv = np.lib.stride_tricks.as_strided(b, s.B.sizes, [x * 8 for x in s.B.strides])
    want = np.einsum(s.contraction, av, bv)
    for call in bl.calls:
        c = _emulate(call, a, b, s.C.sizes, s.C.strides)
        got = np.lib.stride_tricks.as_strided(c, s.C.sizes, [x * 8 for x in s.C.strides])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=call.desc)
