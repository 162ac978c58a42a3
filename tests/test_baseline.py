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
    c = np.zeros(int(sum((s - 1) * st for s, st in zip(c_shape, c_strides))) + 1)
    _gemm_into(call, a, b, c)
    return c


def _gemm_into(call: CublasCall, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """One cuBLAS call in numpy on flat buffers, writing only the elements of C's matrices (beta = 0)."""
    xs, ys = (b, a) if call.swap else (a, b)
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


# ------------------------------------------------------------------------------- run-time row letter

def _dense_offsets(view) -> np.ndarray:
    """Element offsets of a StridedView in the row-major order of its dense temp (the harness's gather)."""
    idx = np.indices(view.size).reshape(len(view.size), -1) if view.size else np.zeros((0, 1), dtype=int)
    return np.asarray(view.stride, dtype=int) @ idx if view.size else np.zeros(1, dtype=int)


def _baseline_at(bl, m: int, hi: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """What the harness does for run-time size m (beta = 0): scale the plan made at hi, gather the copied
    inputs into dense temps, run the fastest-listed call, scatter a copied C back."""
    call = bl.calls[0].at_size(m, hi)
    views = [v.at_size(m, hi) for v in bl.views]
    bufs = [a, b, c]
    temps = [buf[_dense_offsets(v)] if copied else buf for buf, v, copied in zip(bufs, views, bl.copy)]
    if bl.copy[2]:
        temps[2] = np.zeros(len(_dense_offsets(views[2])))
    _gemm_into(call, temps[0], temps[1], temps[2])
    if bl.copy[2]:
        c[_dense_offsets(views[2])] = temps[2]


def _at(sizes: tuple[int, ...], letters: str, letter: str, m: int) -> tuple[int, ...]:
    return tuple(m if x == letter else n for x, n in zip(letters, sizes))


RUN_TIME_SPECS = {
    # decode: C row-major, so C^T = B^T A^T and the call's n is the run-time m
    "decode": {"name": "g", "gemm": {"m": {"min": 1, "max": 6}, "n": 5, "k": 4}, "operands": {"B": {"layout": "col"}}},
    # t merged with s into one m segment of t*s rows
    "merged": {"name": "g", "contraction": "tsk,kn->tsn", "sizes": {"t": {"min": 1, "max": 5}, "s": 3, "k": 4, "n": 2}},
    # a 1x1 convolution over NCHW with a run-time n: n goes into cuBLAS's batch
    "conv": {"name": "g", "contraction": "nchw,kc->nkhw",
             "sizes": {"n": {"min": 2, "max": 3}, "c": 3, "h": 2, "w": 3, "k": 4}},
    # k in two segments: dense temps of A and B, A's batch stride m * k
    "copy": {"name": "g", "contraction": "bmxy,bxyn->bmn", "sizes": {"b": 2, "m": {"min": 1, "max": 4}, "x": 2,
                                                                       "y": 3, "n": 5},
             "operands": {"A": {"strides": [2000, 100, 40, 4]}, "C": {"strides": [20, 5, 1]}}},
    # (b, t) chain into the batch only at t's max (C has no unit stride): dense temps, C's batch stride t * n
    "chain": {"name": "g", "contraction": "btk,bkn->btn", "sizes": {"b": 2, "t": {"min": 1, "max": 3}, "k": 4, "n": 5},
              "operands": {"A": {"strides": [12, 4, 1]}, "B": {"strides": [0, 5, 1]}, "C": {"strides": [30, 10, 2]}}},
}


@pytest.mark.parametrize("case", list(RUN_TIME_SPECS))
def test_the_plan_at_the_max_scaled_to_every_run_time_size_computes_the_product(case):
    """The harness's contract: the plan made at the run-time letter's max, with every `scaled` field set to
    value / max * m, computes the product at size m and writes no element of C outside its view (the rows
    past m stay as they were)."""
    s = parse_spec(RUN_TIME_SPECS[case])
    (letter, (lo, hi)), = s.dynamic.items()
    bl = plan_baseline(analyse(s))
    assert bl.available and any(c.scaled for c in bl.calls)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(s.A.span), rng.standard_normal(s.B.span)
    for m in range(lo, hi + 1):
        c = np.full(s.C.span, np.nan)
        _baseline_at(bl, m, hi, a, b, c)
        av = np.lib.stride_tricks.as_strided(a, _at(s.A.sizes, s.A.letters, letter, m), [x * 8 for x in s.A.strides])
        bv = np.lib.stride_tricks.as_strided(b, s.B.sizes, [x * 8 for x in s.B.strides])
        c_sizes = _at(s.C.sizes, s.C.letters, letter, m)
        got = np.lib.stride_tricks.as_strided(c, c_sizes, [x * 8 for x in s.C.strides])
        np.testing.assert_allclose(got, np.einsum(s.contraction, av, bv), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{case} at {letter} = {m}")
        written = np.zeros(s.C.span, dtype=bool)
        np.lib.stride_tricks.as_strided(written, c_sizes, list(s.C.strides))[...] = True
        assert np.isnan(c[~written]).all(), f"{case} at {letter} = {m} wrote outside C's view"


def test_what_scales_with_the_run_time_size():
    decode = plan_baseline(analyse(parse_spec(RUN_TIME_SPECS["decode"])))
    assert [c.scaled for c in decode.calls] == [("n",)]  # C^T = B^T A^T: C's rows are the call's columns
    assert decode.views[0].scaled == (0,) and decode.views[1].scaled == () and decode.views[2].scaled == (0,)
    conv = plan_baseline(analyse(parse_spec(RUN_TIME_SPECS["conv"])))
    assert {c.scaled for c in conv.calls} == {("batch",)}
    copy = plan_baseline(analyse(parse_spec(RUN_TIME_SPECS["copy"])))
    assert copy.kind == "copy+cublas" and copy.copy == (True, True, False)
    (call,) = copy.calls
    assert set(call.scaled) == {"n", "stride_y"}  # C^T = B^T A^T; A's dense temp is b x m x k
    assert call.at_size(2, 4).stride_y == 2 * 6 and call.at_size(2, 4).n == 2


def test_a_batch_chain_that_holds_only_at_the_max_is_not_a_formulation():
    fixed = dict(RUN_TIME_SPECS["chain"], sizes={"b": 2, "t": 3, "k": 4, "n": 5})
    assert plan_baseline(analyse(parse_spec(fixed))).kind == "cublas"  # (b, t) chains when t is 3
    run_time = plan_baseline(analyse(parse_spec(RUN_TIME_SPECS["chain"])))
    assert run_time.kind == "copy+cublas" and run_time.copy[2]
    assert "stride_c" in run_time.calls[0].scaled


def test_a_fixed_spec_scales_nothing():
    bl = plan_baseline(analyse(load_spec(REPO / "specs" / "conv1x1_nchw.yaml")))
    assert all(not c.scaled for c in bl.calls) and all(not v.scaled for v in bl.views)
