"""The cuBLAS baseline planner: every no-copy formulation; where none exists, dense temps, and pointer-array calls
beside them where only the batch does not chain."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import CublasCall, plan_baseline
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
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


def _batch_offsets(call: CublasCall) -> list[tuple[int, int, int]]:
    """Where each matrix of X, Y and C starts: batch strides, or for a pointer-array call what the harness puts
    in its arrays (each pointer dim's index times its strides, row-major over the dims)."""
    if not call.pointers:
        return [(p * call.stride_x, p * call.stride_y, p * call.stride_c) for p in range(call.batch)]
    idx = np.indices([d.size for d in call.pointers]).reshape(len(call.pointers), -1).T
    assert len(idx) == call.batch
    return [tuple(sum(int(i) * getattr(d, f) for i, d in zip(ix, call.pointers)) for f in ("stride_x", "stride_y",
                                                                                          "stride_c"))
            for ix in idx]


def _gemm_into(call: CublasCall, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """One cuBLAS call in numpy on flat buffers, writing only the elements of C's matrices (beta = 0)."""
    xs, ys = (b, a) if call.swap else (a, b)
    for ox, oy, oc in _batch_offsets(call):
        def mat(buf, ld, trans, rows, cols, off):
            # op(X) is rows x cols; stored column-major (ld) as X or, transposed, as X^T.
            if not trans:
                return np.array([[buf[off + i + j * ld] for j in range(cols)] for i in range(rows)])
            return np.array([[buf[off + j + i * ld] for j in range(cols)] for i in range(rows)])
        x = mat(xs, call.ldx, call.trans_x, call.m, call.k, ox)
        y = mat(ys, call.ldy, call.trans_y, call.k, call.n, oy)
        prod = x @ y
        for i in range(call.m):
            for j in range(call.n):
                c[oc + i + j * call.ldc] = prod[i, j]
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


# ------------------------------------------------------------------------------- batch letters that do not chain

ATTENTION = {"name": "att", "dtype": "bf16", "contraction": "bshd,bthd->bhst",
             "sizes": {"b": 8, "s": 1024, "t": 1024, "h": 16, "d": 128}}


def test_attention_scores_get_a_copy_and_a_pointer_array_candidate():
    """q and k as [b, s, h, d]: b and h chain into no one stride of either, so no strided-batched call takes the
    views. Candidates: q and k copied to [b, h, s, d] and [b, h, t, d] (d innermost, as they lie) + one strided
    call over the 128 (b, h), C in place; and a pointer-array call over b, h on the views as they are."""
    bl = _plan(ATTENTION)
    assert bl.kind == "multi-batch" and bl.copy == (True, True, False)
    copied, pointers = bl.calls
    assert copied.desc == "copy+strided-batched (dense A, B): C^T=B^TA m=t[1024] n=s[1024] k=d[128] batch=b[8]h[16]"
    assert not copied.pointers and (copied.batch, copied.m, copied.n, copied.k) == (128, 1024, 1024, 128)
    assert (copied.stride_x, copied.stride_y, copied.stride_c) == (1024 * 128, 1024 * 128, 1024 * 1024)
    # The gathers walk q and k in [b, h, s|t, d] order: d, stride 1, innermost.
    assert bl.views[0] == bl.views[1]
    assert bl.views[0].size == (8, 16, 1024, 128) and bl.views[0].stride == (1024 * 16 * 128, 128, 16 * 128, 1)
    assert pointers.desc == "pointer-array batched over b[8],h[16]: C^T=B^TA m=t[1024] n=s[1024] k=d[128]"
    assert pointers.batch == 128 and (pointers.stride_x, pointers.stride_y, pointers.stride_c) == (0, 0, 0)
    assert (pointers.ldx, pointers.ldy, pointers.ldc) == (16 * 128, 16 * 128, 1024)
    assert [(d.label, d.size, d.stride_x, d.stride_y, d.stride_c) for d in pointers.pointers] == [
        ("b[8]", 8, 1024 * 16 * 128, 1024 * 16 * 128, 16 * 1024 * 1024), ("h[16]", 16, 128, 128, 1024 * 1024)]


def test_the_bench_spec_is_the_attention_problem():
    spec = load_spec(REPO / "specs" / "bench" / "attention_scores_bshd.yaml")
    bl = plan_baseline(analyse(spec))
    assert spec.contraction == ATTENTION["contraction"] and spec.sizes == ATTENTION["sizes"]
    assert bl.kind == "multi-batch" and [bool(c.pointers) for c in bl.calls] == [False, True]


def test_batch_letters_that_chain_stay_one_strided_call():
    bl = _plan({**ATTENTION, "contraction": "bhsd,bhtd->bhst"})
    assert bl.kind == "cublas" and all(c.batch == 128 and not c.pointers for c in bl.calls)


MULTI_BATCH = {
    "scores": {"name": "g", "contraction": "bshd,bthd->bhst", "sizes": {"b": 2, "s": 3, "t": 4, "h": 3, "d": 5}},
    # P.V back into [b, s, h, d]: C's b and h do not chain either
    "values": {"name": "g", "contraction": "bhst,bthd->bshd", "sizes": {"b": 2, "s": 3, "t": 4, "h": 3, "d": 5}},
    # grouped-query: k shared by the heads (stride 0 along h)
    "shared_k": {"name": "g", "contraction": "bshd,bthd->bhst", "sizes": {"b": 2, "s": 3, "t": 4, "h": 3, "d": 5},
                 "operands": {"B": {"strides": [20, 5, 0, 1]}}},
    # three batch letters, in another order in B, and C padded
    "three": {"name": "g", "contraction": "xyzmk,zyxkn->xyzmn", "sizes": {"x": 2, "y": 3, "z": 2, "m": 3, "k": 4,
                                                                         "n": 2},
              "operands": {"C": {"strides": [3 * 2 * 8 * 3, 2 * 8 * 3, 8 * 3, 8, 1]}}},
    # m-contiguous A: its temp keeps m innermost
    "col_a": {"name": "g", "contraction": "bhmk,bkhn->bhmn", "sizes": {"b": 2, "h": 3, "m": 4, "k": 5, "n": 3},
              "operands": {"A": {"strides": [60, 4, 1, 12]}}},  # A as [b, k, h, m]
}


@pytest.mark.parametrize("case", list(MULTI_BATCH))
def test_every_multi_batch_candidate_computes_the_product(case):
    """Each call, run as the harness runs it (the copy plan's through its temps, a pointer-array call on the views
    as they are), writes exactly the einsum into C's view and nothing outside it."""
    s = parse_spec(MULTI_BATCH[case])
    bl = plan_baseline(analyse(s))
    assert bl.kind == "multi-batch" and any(c.pointers for c in bl.calls) and not bl.calls[0].pointers
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(s.A.span), rng.standard_normal(s.B.span)
    av = np.lib.stride_tricks.as_strided(a, s.A.sizes, [x * 8 for x in s.A.strides])
    bv = np.lib.stride_tricks.as_strided(b, s.B.sizes, [x * 8 for x in s.B.strides])
    written = np.zeros(s.C.span, dtype=bool)
    np.lib.stride_tricks.as_strided(written, s.C.sizes, list(s.C.strides))[...] = True
    for which, call in enumerate(bl.calls):
        c = np.full(s.C.span, np.nan)
        _baseline_at(bl, 1, 1, a, b, c, which)
        got = np.lib.stride_tricks.as_strided(c, s.C.sizes, [x * 8 for x in s.C.strides])
        np.testing.assert_allclose(got, np.einsum(s.contraction, av, bv), rtol=1e-12, atol=1e-12, err_msg=call.desc)
        assert np.isnan(c[~written]).all(), f"{call.desc} wrote outside C's view"


def test_a_copied_operand_is_gathered_along_its_contiguous_role():
    """The temp puts the operand's unit-stride role innermost, so that the gather reads memory in order; operands
    whose batch chains stay in place."""
    col_a = plan_baseline(analyse(parse_spec(MULTI_BATCH["col_a"])))
    assert col_a.copy == (True, True, False)
    assert col_a.views[0].size == (2, 3, 5, 4) and col_a.views[0].stride[-1] == 1  # [b, h, k, m]: m innermost
    assert col_a.views[1].stride[-1] == 1  # B [b, k, h, n]: n innermost
    three = plan_baseline(analyse(parse_spec(MULTI_BATCH["three"])))
    assert three.copy == (False, True, False)  # A and C chain x, y, z in their order; B runs z, y, x
    (batch,) = re.findall(r"batch=(\S+)", three.calls[0].desc)
    assert batch == "x[2]y[3]z[2]"


def test_a_multi_batch_epilogue_runs_the_elementwise_pass_after_every_candidate():
    """With D and a bias the candidates write D, then the harness's elementwise pass; cuBLASLt has no pointer-array
    or copy formulation here, so no fused alternative."""
    spec = parse_spec({**MULTI_BATCH["scores"], "dtype": "f16", "beta": 0.5, "operands": {"D": {}},
                       "epilogue": [{"bias": {"letters": "t"}}]})
    bl = plan_baseline(analyse(spec))
    assert bl.kind == "multi-batch" and bl.epilogue == "elementwise" and bl.alternative is None
    assert bl.calls[0].desc.startswith("copy+strided-batched (dense A, B): D^T=")
    assert bl.calls[1].desc.startswith("pointer-array batched over b[2],h[3]: D^T=")


def test_the_harness_gets_the_pointer_dims_and_plan_json_names_them():
    spec = parse_spec({**MULTI_BATCH["scores"], "dtype": "bf16"})
    views = analyse(spec)
    files = render_sources(spec, views, make_plan(views, get_arch("sm_90a")), plan_baseline(views),
                           get_arch("sm_90a"))
    harness = files["g_harness.cu"]
    assert '"multi-batch"' in harness
    # scaled 0u, then the dims b and h: size and strides in X (B, with C^T = B^T A), Y and C
    assert "0u, 2, { { 2LL, 60LL, 45LL, 36LL, 0 }, { 3LL, 5LL, 5LL, 12LL, 0 } }}," in harness
    calls = json.loads(files["plan.json"])["baseline"]["calls"]
    assert "pointers" not in calls[0] and [d["label"] for d in calls[1]["pointers"]] == ["b[2]", "h[3]"]


# ------------------------------------------------------------------------------- run-time row letter

def _dense_offsets(view) -> np.ndarray:
    """Element offsets of a StridedView in the row-major order of its dense temp (the harness's gather)."""
    idx = np.indices(view.size).reshape(len(view.size), -1) if view.size else np.zeros((0, 1), dtype=int)
    return np.asarray(view.stride, dtype=int) @ idx if view.size else np.zeros(1, dtype=int)


def _baseline_at(bl, m: int, hi: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, which: int = 0) -> None:
    """What the harness does for run-time size m (beta = 0) with call `which`: scale the plan made at hi; for a
    strided call gather the copied inputs into dense temps, run it, scatter a copied C back; a pointer-array
    call runs on the buffers as they are."""
    call = bl.calls[which].at_size(m, hi)
    views = [v.at_size(m, hi) for v in bl.views]
    bufs = [a, b, c]
    copy = (False, False, False) if call.pointers else bl.copy
    temps = [buf[_dense_offsets(v)] if copied else buf for buf, v, copied in zip(bufs, views, copy)]
    if copy[2]:
        temps[2] = np.zeros(len(_dense_offsets(views[2])))
    _gemm_into(call, temps[0], temps[1], temps[2])
    if copy[2]:
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
    # q [b, s, h, d] with s sized at run time: b and h chain in neither input (a pointer array, or q and k copied)
    "attention": {"name": "g", "contraction": "bshd,bthd->bhst",
                  "sizes": {"b": 2, "s": {"min": 1, "max": 3}, "t": 4, "h": 2, "d": 3},
                  "operands": {"A": {"strides": [18, 6, 3, 1]}, "C": {"strides": [24, 12, 4, 1]}}},
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
    for which, call in enumerate(bl.calls):
        for m in range(lo, hi + 1):
            c = np.full(s.C.span, np.nan)
            _baseline_at(bl, m, hi, a, b, c, which)
            av = np.lib.stride_tricks.as_strided(a, _at(s.A.sizes, s.A.letters, letter, m),
                                                 [x * 8 for x in s.A.strides])
            bv = np.lib.stride_tricks.as_strided(b, s.B.sizes, [x * 8 for x in s.B.strides])
            c_sizes = _at(s.C.sizes, s.C.letters, letter, m)
            got = np.lib.stride_tricks.as_strided(c, c_sizes, [x * 8 for x in s.C.strides])
            np.testing.assert_allclose(got, np.einsum(s.contraction, av, bv), rtol=1e-12, atol=1e-12,
                                       err_msg=f"{case} at {letter} = {m}: {call.desc}")
            written = np.zeros(s.C.span, dtype=bool)
            np.lib.stride_tricks.as_strided(written, c_sizes, list(s.C.strides))[...] = True
            assert np.isnan(c[~written]).all(), f"{case} at {letter} = {m} wrote outside C's view: {call.desc}"


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
    # At run time the batch (b, t) is a pointer array, t's dim scaled, beside C through a dense temp (and beside
    # the pointer array over (b, n), the other segment moved).
    assert run_time.kind == "multi-batch" and run_time.copy[2]
    copied, *arrays = run_time.calls
    assert "stride_c" in copied.scaled and not copied.pointers
    (pointers,) = [c for c in arrays if any(d.scaled for d in c.pointers)]
    assert [(d.label, d.scaled) for d in pointers.pointers] == [("b[2]", False), ("t[3]", True)]
    assert "batch" in pointers.scaled and pointers.at_size(2, 3).batch == 4
    assert [d.size for d in pointers.at_size(2, 3).pointers] == [2, 2]


def test_a_fixed_spec_scales_nothing():
    bl = plan_baseline(analyse(load_spec(REPO / "specs" / "conv1x1_nchw.yaml")))
    assert all(not c.scaled for c in bl.calls) and all(not v.scaled for v in bl.views)
