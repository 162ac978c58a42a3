"""cuBLASLt with a fused epilogue as the bench baseline (issue 8): which formulations cuBLASLt runs with the
spec's whole epilogue and why not otherwise (no GPU), the DgLtCall the harness gets, and the header
templates/dg_cublaslt.cuh: its self-test compiles (-Wall clean), alone and beside dg_harness.cuh, its copies
of cublasLt.h's values match a real cublasLt.h where one is installed, and on a GPU the self-test passes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from dgemm_cli.baseline import (
    EPILOGUES,
    formulation_letters,
    fused_epilogue,
    lt_alternative,
    lt_epilogue,
    lt_epilogues,
    plan_baseline,
)
from dgemm_cli.render import template_dir
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO

SELFTEST_DIR = REPO / "tests" / "lt_selftest"


def _spec(epilogue=None, gemm=None, dtype="bf16", **operands):
    doc = {"name": "lin", "dtype": dtype, "gemm": gemm or {"m": 64, "n": 96, "k": 80},
           "operands": {"B": {"layout": "col"}, **operands}}
    if epilogue is not None:
        doc["epilogue"] = epilogue
    return parse_spec(doc)


def _lts(spec):
    """cuBLASLt's verdict on every formulation the cuBLAS baseline plans for the spec."""
    return lt_epilogues(spec, plan_baseline(analyse(spec)).calls)


def _one(spec):
    """The single no-copy formulation of a plain GEMM layout, with its cuBLASLt verdict."""
    (lt,) = _lts(spec)
    return lt


BIAS_GELU = [{"bias": {"letters": "n"}}, {"activation": "gelu_tanh"}]


def test_linear_bias_gelu_tanh_runs_as_gelu_bias_on_the_swapped_call():
    """nn.Linear: A row-major [M, K], W [N, K], C row-major: C^T = W^T A, rows = n = the bias's letter."""
    lt = _one(_spec(BIAS_GELU, gemm={"m": 4096, "n": 14336, "k": 4096}))
    assert lt.available and lt.epilogue == "GELU_BIAS" and lt.epilogue_id == 36 and lt.kind == "cublasLt GELU_BIAS"
    assert lt.letters.rows == ("n",) and lt.letters.cols == ("m",) and lt.letters.batch == ()
    assert lt.call.swap and (lt.call.m, lt.call.n, lt.call.k) == (14336, 4096, 4096)
    assert (lt.ldd, lt.stride_d, lt.c_is_d, lt.bias, lt.bias_batch_stride) == (14336, 0, True, True, 0)
    assert lt.c_initializer() == (
        '{"C^T=B^TA m=n[14336] n=m[4096] k=k[4096]", 1, 1, 0, 14336LL, 4096LL, 4096LL, 4096LL, 4096LL, 14336LL, '
        '14336LL, 0LL, 0LL, 0LL, 0LL, 1LL, 2, 2, 2, DG_LT_EPILOGUE_GELU_BIAS, 0LL, 1, 0u}')


def test_the_selftests_linear_call_is_what_python_renders():
    """tests/lt_selftest/lt_selftest.cu's make_call() writes this formulation by hand: they must agree."""
    lt = _one(_spec([{"bias": {"letters": "n"}}], gemm={"m": 64, "n": 96, "k": 80}, dtype="f16"))
    f = lt.fields()
    assert {x: f[x] for x in ("swap", "trans_x", "trans_y", "m", "n", "k", "ldx", "ldy", "ldc", "ldd", "batch",
                              "c_is_d", "bias_batch_stride")} == {
        "swap": 1, "trans_x": 1, "trans_y": 0, "m": 96, "n": 64, "k": 80, "ldx": 80, "ldy": 80, "ldc": 96,
        "ldd": 96, "batch": 1, "c_is_d": 1, "bias_batch_stride": 0}
    assert (f["dtype_ab"], f["dtype_out"], f["dtype_bias"], f["epilogue"]) == (1, 1, 1, "DG_LT_EPILOGUE_BIAS")


@pytest.mark.parametrize("c_layout", ["row", "col"])
@pytest.mark.parametrize("letter", ["m", "n"])
def test_a_bias_runs_only_where_its_letter_is_the_rows(c_layout, letter):
    """cuBLASLt's bias is over the rows of its column-major output: C's m when C is column-major (no swap),
    C's n when C is row-major (the swap C^T = B^T A^T)."""
    spec = _spec([{"bias": {"letters": letter}}, {"activation": "relu"}], C={"layout": c_layout})
    lts = _lts(spec)
    assert lts
    for lt in lts:
        rows = formulation_letters(spec, lt.call).rows
        assert rows == (("n",) if c_layout == "row" else ("m",))
        assert lt.available == (rows == (letter,)), lt.why
        if not lt.available:
            assert "broadcast over its columns" in lt.why and f"varies along {letter}" in lt.why


@pytest.mark.parametrize("activation", ["silu", "gelu_erf", "sigmoid", "tanh"])
def test_activations_cublaslt_lacks_are_refused_with_the_name(activation):
    lt = _one(_spec([{"bias": {"letters": "n"}}, {"activation": activation}]))
    assert not lt.available and f"cuBLASLt has no {activation} epilogue (epilogue[1]" in lt.why


@pytest.mark.parametrize("epilogue, words", [
    ([{"bias": {"letters": "n"}}, {"activation": "relu"}, {"clamp": [0, 6]}], "no clamp epilogue step (epilogue[2])"),
    ([{"scale": {"letters": "n"}}], "no scale epilogue step (epilogue[0])"),
    ([{"bias": {"letters": "n"}}, {"scale": {"letters": "m"}}], "no scale epilogue step (epilogue[1])"),
    ([{"residual": {}}], "no residual epilogue step"),
    ([{"activation": "relu"}, {"bias": {"letters": "n"}}],
     "a bias, then one activation; this spec's steps are relu, bias"),
    ([{"activation": "relu"}, {"activation": "gelu_tanh"}], "this spec's steps are relu, gelu_tanh"),
])
def test_steps_cublaslt_cannot_fuse_are_refused(epilogue, words):
    lt = _one(_spec(epilogue))
    assert not lt.available and words in lt.why, lt.why


@pytest.mark.parametrize("epilogue, name", [
    ([], "DEFAULT"), ([{"bias": {"letters": "n"}}], "BIAS"),
    ([{"bias": {"letters": "n"}}, {"activation": "relu"}], "RELU_BIAS"), (BIAS_GELU, "GELU_BIAS"),
    ([{"activation": "relu"}], "RELU"), ([{"activation": "gelu_tanh"}], "GELU"),
])
def test_every_fused_form(epilogue, name):
    spec = _spec(epilogue)
    assert fused_epilogue(spec) == (name, "")
    lt = _one(spec)
    assert lt.available and lt.epilogue == name and lt.bias == ("BIAS" in name)
    assert f"DG_LT_EPILOGUE_{name}" in lt.c_initializer() and EPILOGUES[name] == lt.epilogue_id


def test_the_bias_dtype_is_the_outputs():
    lt = _one(_spec([{"bias": {"letters": "n", "dtype": "f32"}}]))
    assert not lt.available and "bias has the output's dtype (bf16); this bias is f32" in lt.why
    # f16 inputs, f32 output: an f32 bias is the output's dtype.
    lt = _one(_spec([{"bias": {"letters": "n", "dtype": "f32"}}], dtype="f16", C={"layout": "row", "dtype": "f32"}))
    assert lt.available and (lt.dtype_ab, lt.dtype_out, lt.dtype_bias) == ("f16", "f32", "f32")
    assert ", 1, 0, 0, DG_LT_EPILOGUE_BIAS," in lt.c_initializer()  # dtype ids f16 -> f32, bias f32


@pytest.mark.parametrize("bias, words", [
    ({"letters": "n", "strides": [0]}, "this bias is broadcast over n"),
    ({"letters": "n", "strides": [2]}, "packed (stride 1)"),
    ({"letters": "mn"}, "varies along m"),
])
def test_a_bias_that_is_not_a_packed_vector_over_the_rows_is_refused(bias, words):
    lt = _one(_spec([{"bias": bias}]))
    assert not lt.available and words in lt.why, lt.why


def test_a_bias_broadcast_over_the_columns_by_stride_0_is_fine():
    lt = _one(_spec([{"bias": {"letters": "mn", "strides": [0, 1]}}]))
    assert lt.available and lt.bias_batch_stride == 0


@pytest.mark.parametrize("bias, stride", [
    ({"letters": "n"}, 0),                                   # one bias for the whole batch
    ({"letters": "bn"}, 96),                                 # one a matrix, dense
    ({"letters": "bn", "strides": [128, 1]}, 128),           # one a matrix, padded
    ({"letters": "nb", "strides": [1, 100]}, 100),           # the batch letter written second
])
def test_a_batched_bias_gets_its_batch_stride(bias, stride):
    lt = _one(_spec([{"bias": bias}, {"activation": "relu"}], gemm={"batch": 3, "m": 64, "n": 96, "k": 80}))
    assert lt.available and lt.letters.batch == ("b",) and lt.call.batch == 3
    assert lt.bias_batch_stride == stride


def test_a_bias_over_part_of_a_chained_batch_is_refused():
    """nc,kc->nkx style: two batch letters merged into one cuBLAS batch; a bias over one of them has no
    single batch stride."""
    spec = parse_spec({"name": "bb", "dtype": "f16", "contraction": "pqmk,pqkn->pqmn",
                       "sizes": {"p": 2, "q": 3, "m": 16, "n": 32, "k": 8},
                       "epilogue": [{"bias": {"letters": "qn"}}]})
    (lt,) = _lts(spec)
    assert formulation_letters(spec, lt.call).batch == ("p", "q")
    assert not lt.available and "do not chain into one batch stride" in lt.why
    whole = parse_spec({**spec.to_dict(), "epilogue": [{"bias": {"letters": "pqn"}}]})
    (lt,) = _lts(whole)
    assert lt.available and lt.bias_batch_stride == 32


def test_conv_per_channel_bias_is_not_cublaslts_but_a_per_pixel_one_is():
    """The NCHW 1x1 convolution runs as out[n] = X[n]^T-ish with rows = hw, cols = k: the per-channel bias
    (over k) is over cuBLAS's columns, so cuBLAS + an elementwise kernel is the baseline."""
    spec = load_spec(REPO / "specs" / "epilogue" / "conv_bias_relu.yaml")
    lts = _lts(spec)
    assert lts and not any(lt.available for lt in lts)
    assert all("varies along k" in lt.why for lt in lts)
    pixel = parse_spec({**spec.to_dict(), "epilogue": [{"bias": {"letters": "hw"}}, {"activation": "relu"}]})
    assert any(lt.available and lt.letters.rows == ("h", "w") for lt in _lts(pixel))


def test_decode_with_one_row_and_a_bias():
    """m = 1 drops out of the views: of the two calls (n as cuBLAS's rows or its columns), the bias runs
    where n is the rows."""
    lts = _lts(_spec(BIAS_GELU, gemm={"m": 1, "n": 14336, "k": 4096}))
    (lt,) = [x for x in lts if x.available]
    assert lt.letters.rows == ("n",) and lt.call.n == 1 and lt.ldd == 14336
    (other,) = [x for x in lts if not x.available]
    assert "over the rows (none)" in other.why


def test_a_run_time_row_count_scales_the_calls_columns():
    lt = _one(_spec(BIAS_GELU, gemm={"m": {"min": 1, "max": 64}, "n": 512, "k": 256}))
    assert lt.available and lt.scaled == ("n",) and lt.c_initializer().endswith(", 1, DG_LT_SCALE_N}")


def test_a_separate_output_view_d():
    # beta == 0: C is not read, D (rows padded to 112) is the output and serves for C.
    lt = _one(_spec(BIAS_GELU, D={"strides": [112, 1]}))
    assert lt.available and lt.c_is_d and (lt.ldd, lt.ldc) == (112, 112)
    # beta != 0: C is read in its own layout.
    spec = parse_spec({**_spec(BIAS_GELU, D={"strides": [112, 1]}).to_dict(), "beta": 0.5})
    (lt,) = _lts(spec)
    assert lt.available and not lt.c_is_d and (lt.ldc, lt.ldd) == (96, 112)
    assert ", 96LL, 112LL, " in lt.c_initializer()
    # ... and must have D's dtype then, but not when beta == 0.
    f32 = {**spec.to_dict()["operands"], "D": {"strides": [112, 1], "dtype": "f32"}}
    (lt,) = _lts(parse_spec({**spec.to_dict(), "operands": f32}))
    assert not lt.available and "C is bf16, D f32" in lt.why
    (lt,) = _lts(parse_spec({**spec.to_dict(), "operands": f32, "beta": 0.0}))
    assert not lt.available and "bias has the output's dtype (f32); this bias is bf16" in lt.why  # C's by default
    f32_bias = [{"bias": {"letters": "n", "dtype": "f32"}}, {"activation": "gelu_tanh"}]
    (lt,) = _lts(parse_spec({**spec.to_dict(), "operands": f32, "beta": 0.0, "epilogue": f32_bias}))
    assert lt.available and (lt.dtype_out, lt.dtype_bias, lt.c_is_d) == ("f32", "f32", True)
    # A column-major D (row-major C): with beta == 0 only D's layout counts, the bias over n is then over the
    # columns; over m it runs. With beta != 0, C must fit the same formulation, and row-major C does not.
    assert not _one(_spec(BIAS_GELU, D={"strides": [1, 64]})).available
    lt = _one(_spec([{"bias": {"letters": "m"}}], D={"strides": [1, 64]}))
    assert lt.available and lt.letters.rows == ("m",) and (lt.ldd, lt.c_is_d) == (64, True)
    spec = parse_spec({**_spec([{"bias": {"letters": "m"}}], D={"strides": [1, 64]}).to_dict(), "beta": 1.0})
    (lt,) = _lts(spec)
    assert not lt.available and "C is not column-major over m" in lt.why


def test_formulations_of_the_spec_itself_are_recognised_too():
    """Calls planned on the spec's own views (C as cuBLAS's output) are matched as well as those planned on the
    product into the output view."""
    from dgemm_cli.baseline import formulations

    spec = _spec(BIAS_GELU, D={"strides": [112, 1]})
    own = formulations(analyse(spec))
    assert own and all(formulation_letters(spec, c) is not None for c in own)
    assert all(lt.available for lt in lt_epilogues(spec, own))


def test_a_copy_plans_call_is_not_a_formulation():
    """A view no formulation takes (C's rows interleaved) gets a dense-temp plan; cuBLASLt is not offered it."""
    spec = parse_spec({"name": "cp", "dtype": "f16", "contraction": "mk,kn->mn", "sizes": {"m": 8, "n": 6, "k": 4},
                       "operands": {"A": {"strides": [1, 0]}}, "epilogue": [{"bias": {"letters": "n"}}]})
    bl = plan_baseline(analyse(spec))
    assert bl.kind == "copy+cublas"
    lt = lt_epilogue(spec, bl.calls[0])
    assert not lt.available and "not a no-copy formulation" in lt.why


@pytest.mark.parametrize("path", sorted(p for p in (REPO / "specs").rglob("*.yaml")), ids=lambda p: p.stem)
def test_every_no_copy_call_of_every_spec_maps_back_to_its_letters(path):
    """formulation_letters recomputes baseline.formulations' assignment: each no-copy call's rows, cols and
    batch are found, the desc names the same letters, and every letter of C of size > 1 is in one of them."""
    spec = load_spec(path)
    bl = plan_baseline(analyse(spec))
    if bl.kind != "cublas":
        return
    for call in bl.calls:
        got = formulation_letters(spec, call)
        assert got is not None, call.desc
        desc = dict(part.split("=") for part in call.desc.split()[1:])
        for dim, letters in (("m", got.rows), ("n", got.cols), ("batch", got.batch)):
            named = "".join(re.findall(r"([A-Za-z]+)\[\d+\]", desc.get(dim, "")))
            assert named == "".join(letters), (call.desc, got)
        assert set("".join(got.rows + got.cols + got.batch)) == {x for x in spec.C.letters if spec.sizes[x] > 1}


@pytest.mark.parametrize("path, epilogue", [
    ("linear_bias_gelu", "GELU_BIAS"), ("conv_bias_relu", None), ("decode_bias_silu", None),
    ("residual_scale_clamp_d", None),
])
def test_the_epilogue_specs(path, epilogue):
    """specs/epilogue: the linear layer runs as cuBLASLt's GELU_BIAS; the conv's per-channel bias is over
    cuBLAS's columns, SiLU and the scale / clamp / residual steps are not cuBLASLt's."""
    spec = load_spec(REPO / "specs" / "epilogue" / f"{path}.yaml")
    alt = lt_alternative(spec, plan_baseline(analyse(spec)).calls)
    assert (alt is not None) == (epilogue is not None)
    if alt:
        assert alt.header == "dg_cublaslt.cuh" and alt.cls == "DgCublasLtAlternative<DgAltBaseline, DgProblem>"
        assert alt.ctor_args.startswith('({{"C^T=B^TA m=n[14336] n=m[4096] k=k[4096]", 1, 1, 0, 14336LL, ')
        assert alt.ctor_args.endswith(f"DG_LT_EPILOGUE_{epilogue}, 0LL, 1, 0u}}}}, 0LL)")


def test_the_alternative_of_a_run_time_sized_spec_names_its_largest_size():
    spec = _spec(BIAS_GELU, gemm={"m": {"min": 1, "max": 64}, "n": 512, "k": 256})
    alt = lt_alternative(spec, plan_baseline(analyse(spec)).calls)
    assert alt.ctor_args.endswith(", 1, DG_LT_SCALE_N}}, 64LL)") and "1 formulation(s)" in alt.why


# --- the header: compile checks (nvcc, no GPU) and the GPU self-test ---------------------------------------


def _nvcc():
    from dgemm_cli.errors import ToolchainError
    from dgemm_cli.toolchain import find_nvcc

    try:
        return find_nvcc()
    except ToolchainError as err:  # CI installs the wheels, so this only skips on a bare machine
        pytest.skip(str(err))


def _nvcc_run(nvcc, args: list[str]) -> subprocess.CompletedProcess:
    cmd = [*nvcc.compile_prefix(), "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler",
           "-Wall", "-I", str(template_dir()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=nvcc.run_env(os.environ), check=False)


def _compile_clean(nvcc, args: list[str]) -> None:
    proc = _nvcc_run(nvcc, args)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


@pytest.mark.slow
def test_the_header_and_its_selftest_compile_alone(tmp_path):
    """dg_cublaslt.cuh needs no cuBLAS header or library to build: the self-test links with -ldl only."""
    _compile_clean(_nvcc(), [str(SELFTEST_DIR / "lt_selftest.cu"), "-o", str(tmp_path / "lt_selftest"), "-ldl"])


@pytest.mark.slow
def test_the_header_builds_beside_dg_harness(tmp_path):
    """One translation unit with dg_harness.cuh: no clashing names, and the dtype ids and scale bits agree."""
    _compile_clean(_nvcc(), ["-c", str(SELFTEST_DIR / "with_harness.cu"), "-o", str(tmp_path / "with_harness.o")])


def _cublaslt_include() -> Path | None:
    """A directory holding cublasLt.h: $DEEPGEMM_CUBLASLT_INCLUDE, the nvidia-cublas wheel's, or a toolkit's."""
    import importlib.util

    candidates = [os.environ.get("DEEPGEMM_CUBLASLT_INCLUDE", "")]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += [str(Path(root) / sub / "include") for sub in ("cu13", "cu12", "cublas")]
    candidates += ["/usr/local/cuda/include", *sorted(str(p) for p in Path("/usr/local").glob("cuda-*/include"))]
    return next((Path(c) for c in candidates if c and (Path(c) / "cublasLt.h").is_file()), None)


@pytest.mark.slow
def test_the_headers_cublaslt_values_match_a_real_cublaslt_h(tmp_path):
    include = _cublaslt_include()
    if include is None:
        pytest.skip("no cublasLt.h here (pip install nvidia-cublas, or set DEEPGEMM_CUBLASLT_INCLUDE)")
    _compile_clean(_nvcc(), ["-I", str(include), "-c", str(SELFTEST_DIR / "abi_check.cu"),
                             "-o", str(tmp_path / "abi_check.o")])


@pytest.mark.gpu
@pytest.mark.slow
def test_the_cublaslt_selftest_passes_on_a_gpu(tmp_path):
    exe = tmp_path / "lt_selftest"
    _compile_clean(_nvcc(), [str(SELFTEST_DIR / "lt_selftest.cu"), "-o", str(exe), "-ldl"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=False, timeout=600)
    (line,) = proc.stdout.splitlines()
    report = json.loads(line)
    if proc.returncode == 2:
        pytest.skip(f"no cuBLASLt: {report['error']}")
    assert proc.returncode == 0 and report["passed"], proc.stderr
    assert report["gelu"] == "tanh", report
