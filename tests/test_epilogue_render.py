"""Epilogue fusion (issue 8), kernel side: the views of D and the epilogue, every family's rendering of
the steps and the C API's argument order (tests/test_render_snapshots.py keeps specs without an epilogue as they
render). The GPU checks (verify, bench) run through the harness."""

from __future__ import annotations

import itertools
import os
import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .test_build import nvcc_or_skip


def _render(spec, family=None, arch="sm_90a"):
    views = analyse(spec)
    return render_sources(spec, views, make_plan(views, get_arch(arch), family), plan_baseline(views),
                          get_arch(arch))


# Every step, an output view D in another layout, a bias of another dtype, odd sizes: the families
# below each take it (hopper needs 16-byte k strides, so K = 264; gemv and splitk need few rows).
def _full_spec(m=301, n=520, k=264, **extra):
    doc = {"name": "ep_all", "dtype": "f16", "gemm": {"m": m, "n": n, "k": k}, "alpha": 0.75, "beta": 0.5,
           "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"},
                        "D": {"layout": "col"}},
           "epilogue": [{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}},
                        {"activation": "gelu_erf"}, {"residual": {"strides": [n, 1]}}, {"clamp": [-4.0, 4.0]}]}
    doc.update(extra)
    return parse_spec(doc)


FAMILY_SPECS = {"hopper": _full_spec(), "cta": _full_spec(), "splitk": _full_spec(m=24), "gemv": _full_spec(m=3)}


# The shipped header each family's launch instantiates, and the kernel there that hands C (C_param) to the store.
FAMILY_HEADERS = {"cta": "dg/cta.cuh", "splitk": "dg/splitk.cuh", "gemv": "dg/gemv.cuh",
                  "hopper": "dg/hopper_persistent.cuh"}


def _namespace(cu: str, name: str) -> str:
    """The traits and launch() of kernel namespace `name` of a generated .cu."""
    return cu[cu.index(f"\nnamespace {name} {{\n"):cu.index(f"\n}}  // namespace {name}\n")]


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_every_family_applies_the_steps_in_order_and_writes_d(family):
    spec = FAMILY_SPECS[family]
    files = _render(spec, family)
    cu = files["ep_all.cu"]
    assert f"family = {family}" in cu
    # The steps, in the spec's order, in each place of the traits that produces an output element.
    order = [r"t \*= __half2float\(ep\.scale\[", r"t \+= (ep\.bias\[|bias_v\[)", r"t = dg::gelu_erf<true>\(t\);",
             r"t \+= __half2float\((ep\.residual\[|residual_v\[)",
             r"t = dg::clamp\(t, -4\.0f, 4\.0f\);"]
    traits = _namespace(cu, family)
    blocks = re.findall(r"float t = alpha \* \(.*?\);\n(.*?)\n\s*([^\n]+?) = __float2half_rn\(t\);", traits, re.S)
    assert blocks, "no epilogue block"
    assert len(blocks) == traits.count("alpha * (")  # every output the traits produce goes through the steps
    for body, dst in blocks:
        where = [re.search(p, body) for p in order]
        assert all(where) and [w.start() for w in where] == sorted(w.start() for w in where), body
        # hopper's finish_vector converts into dst, which its store_vector stores
        assert "D" in dst or dst.startswith("p[") or (family == "hopper" and dst.startswith("dst["))
    if family == "hopper":
        assert "p[0] = dst[0];" in traits  # 1-element vectors: D is promised 2-byte alignment
    # C is only read, for beta; D is written (the hopper traits' output is D: Out_t).
    assert re.search(r"if \(beta != 0\.0f\) t = fmaf\(beta, __half2float\(C\[", traits)
    assert "using C_param = const C_t;" in traits
    assert "typename T::C_param* __restrict__ C" in files[FAMILY_HEADERS[family]]
    assert ("using Out_t = D_t;" in traits) == (family == "hopper")
    # Only the activations the spec uses are instantiated: the shipped header's templates, the exact GeLU's here.
    assert '#include "dg/activations.cuh"' in cu
    assert "float gelu_erf(float t) { return 0.5f * t * (1.0f + erff(t * 0.7071067811865476f)); }" in files[
        "dg/activations.cuh"]
    assert not re.search(r"dg::(relu|tanh|gelu_tanh|silu|sigmoid)\b", cu)


def test_hopper_writes_d_through_its_own_vector_path():
    spec = _full_spec(operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "col"},
                                "D": {"layout": "row", "align": 16}})
    files = _render(spec, "hopper")
    traits = _namespace(files["ep_all.cu"], "hopper")
    # D is n-contiguous: 8-element vectors along n, each element through the steps, then one 16-byte store.
    assert "using Out_t = D_t;" in traits and "static constexpr int C_VEC = 8;" in traits
    assert "static constexpr bool C_ALONG_M = false;" in traits
    assert "static constexpr long long C_SM = 520, C_SN = 1;" in traits  # D's strides, not C's
    assert "(void)C;\n    return ep.D;" in traits[traits.index("Out_t* out("):]  # the output's first element: D
    assert "__stwb(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(dst));" in traits  # 16 bytes at once
    assert "C_t previous[" not in traits  # C is not the output: its old values are read element by element
    assert re.search(r"t \+= ep\.bias\[bias_at \+ e \* 1\]", traits)
    # dg/hopper_common.cuh: each vector's place in the output starts at Traits::out, strided by C_SM and C_SN.
    common = files["dg/hopper_common.cuh"]
    assert ("return T::out(C, ep) + c_tile + static_cast<long long>(gm) * T::C_SM + "
            "static_cast<long long>(gn) * T::C_SN;") in common
    assert ("T::finish_vector(out_at<T>(C, ep, c_tile, gm, gn), src, vals[i], gm, gn, blk, m_inner, C, ep, alpha, "
            "beta)") in common
    assert "T::store_vector(out_at<T>(C, ep, c_tile, gm, gn), vals[i], gm, gn, m_inner)" in common


# Row-major D and C, n = 520 (rows stay 16-byte aligned in f16 and f32): the store phase's vectors run
# along n, so C (for beta), the f32 bias and the f32 residual load vectors; the per-row scale does not.
VECTOR_SPEC = parse_spec({
    "name": "ep_vec", "dtype": "f16", "gemm": {"m": 256, "n": 520, "k": 128}, "beta": 0.5,
    "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}, "D": {"layout": "row"}},
    "epilogue": [{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}},
                 {"residual": {"dtype": "f32", "align": 16}}, {"activation": "silu"}]})


def test_hopper_loads_the_epilogue_views_as_vectors_where_they_allow():
    views = analyse(VECTOR_SPEC)
    plan = make_plan(views, get_arch("sm_90a"), "hopper").primary
    assert (plan.c_unit, plan.c_vec) == ("n", 8)
    # 8 f16 of C in one load; 8 f32 of bias and residual in two. The residual's 16 bytes are promised.
    assert plan.ep_vectors == (("C", 8, 16), ("bias", 4, 16), ("residual", 4, 0))
    assert {"C": 16, "bias": 16}.items() <= plan.runtime_align.items() and "residual" not in plan.runtime_align
    cu = _render(VECTOR_SPEC, "hopper")["ep_vec.cu"]
    assert "if (beta != 0.0f) *reinterpret_cast<uint4*>(c_v) = *reinterpret_cast<const uint4*>(C + c_at);" in cu
    assert "reinterpret_cast<uint4*>(bias_v)[h] = reinterpret_cast<const uint4*>(ep.bias + bias_at)[h];" in cu
    assert "t += bias_v[e];" in cu and "t += residual_v[e];" in cu and "fmaf(beta, __half2float(c_v[e]), t)" in cu
    assert "t *= __half2float(ep.scale[scale_at]);" in cu  # one element a vector: its stride along n is 0
    assert "t += ep.bias[bias_at + e * 1];" in cu  # the end of the n segment stays element by element
    # The launcher takes the hopper kernel only when the loaded views are aligned; the fallback otherwise.
    assert re.search(r"if \(aligned\(A, 16\) && .*aligned\(C, 16\) && aligned\(bias, 16\)\) return hopper::", cu)


def test_views_that_cannot_keep_vectors_aligned_load_element_by_element():
    # A bias 3 elements into its buffer, a residual with row stride 517: no vector stays aligned.
    spec = parse_spec({"name": "ep_odd", "dtype": "f16", "gemm": {"m": 256, "n": 512, "k": 128}, "beta": 0.5,
                       "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"},
                                    "D": {"layout": "row"}},
                       "epilogue": [{"bias": {"letters": "n", "offset": 3}},
                                    {"residual": {"strides": [517, 1]}}]})
    plan = make_plan(analyse(spec), get_arch("sm_90a"), "hopper").primary
    assert [x for x, _, _ in plan.ep_vectors] == ["C"]
    traits = _namespace(_render(spec, "hopper")["ep_odd.cu"], "hopper")
    assert "alignas(16) C_t c_v[8];" in traits  # C's vector
    assert "bias_v" not in traits and "residual_v" not in traits
    assert "t += __half2float(ep.bias[bias_at + e * 1]);" in traits
    assert "t += __half2float(ep.residual[residual_at + e * 1]);" in traits


def test_the_c_api_takes_the_extra_pointers_in_order():
    spec = _full_spec(gemm={"m": {"min": 1, "max": 64}, "n": 520, "k": 264},
                      operands={"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"},
                                "D": {"layout": "row"}})
    files = _render(spec)
    signature = ("cudaError_t ep_all(const __half* A, const __half* B, const __half* C, __half* D, const float* bias, "
                 "const __half* scale, const __half* residual, int64_t m, float alpha, float beta, "
                 "cudaStream_t stream);")
    assert signature in files["ep_all.h"]
    order = "Arguments in this order: A, B, C, then D, bias, scale, residual, m, alpha, beta, stream."
    assert order in files["ep_all.h"]
    cu = files["ep_all.cu"]
    assert "if (D == nullptr || bias == nullptr || scale == nullptr || residual == nullptr)" in cu
    assert "(C == nullptr && beta != 0.0f)" in cu  # C is only read: null is fine when beta is 0
    assert "!aligned(bias, 4)" in cu
    assert "const Epilogue ep{D, bias, scale, residual};" in cu
    assert "ep_all(A, B, C, D, bias, scale, residual, /*m=*/rows" in files["README.md"]


def test_without_d_the_output_is_c_in_place():
    spec = parse_spec({"name": "lin", "dtype": "bf16", "gemm": {"m": 64, "n": 256, "k": 128},
                       "operands": {"B": {"layout": "col"}},
                       "epilogue": [{"bias": {"letters": "n"}}, {"activation": "relu"}]})
    for family in ("cta", "splitk", "hopper"):
        files = _render(spec, family)
        cu = files["lin.cu"]
        traits = _namespace(cu, family)
        assert "using C_param = C_t;" in traits and "const C_t" not in cu  # C is written
        assert "t = dg::relu(t);" in traits
        assert "float relu(float t) { return t < 0.0f ? 0.0f : t; }" in files["dg/activations.cuh"]  # NaN stays NaN
        assert "D_t" not in cu and "ep.D" not in cu
        if family == "hopper":
            assert "using Out_t = C_t;" in traits and "(void)ep;\n    return C;" in traits


def test_a_batched_epilogue_view_moves_with_the_batch():
    # A per-(batch, n) bias of a batched GEMM: the kernel moves ep.bias to the batch's first element.
    spec = parse_spec({"name": "bb", "dtype": "f16", "gemm": {"batch": 3, "m": 40, "n": 72, "k": 32},
                       "epilogue": [{"bias": {"letters": "bn"}}]})
    files = _render(spec, "cta")
    traits = _namespace(files["bb.cu"], "cta")
    assert "static constexpr bool has_batch = true;" in traits
    assert "ep.bias += bias_view::batch::offset(batch);" in traits and "bias_view::n::offset(gn)" in traits
    # broadcast over m: the bias's m role is empty, no index math for it
    assert ("using bias_view = dg::View<dg::Role<index_t, dg::Seg<3, 72>>,\n"
            "                             dg::Role<index_t>,\n") in traits
    assert "bias_view::m::" not in traits
    # dg/cta.cuh moves the views to the tile's batch product, the epilogue's through the traits.
    cta = files["dg/cta.cuh"]
    batch = cta[cta.index("if constexpr (T::has_batch) {"):]
    assert "T::move_to_batch(ep, batch);" in batch[:batch.index("}")]


def test_an_epilogue_view_that_breaks_a_merge_splits_the_segment():
    # C is NCHW-dense (h, w merge), the residual is NHWC: h and w stop chaining in it.
    spec = parse_spec({"name": "cv", "dtype": "bf16", "contraction": "nchw,kc->nkhw",
                       "sizes": {"n": 2, "c": 16, "h": 5, "w": 6, "k": 8},
                       "operands": {"A": {"strides": [480, 30, 6, 1]}},
                       "epilogue": [{"residual": {"letters": "nhwk"}}]})
    segments = [s.letters for s in analyse(spec).roles["m"].segments]
    assert segments == [("n",), ("h", "w")]  # h, w still chain in NHWC (h = w * 6 steps of k = 8)
    spec = parse_spec({"name": "cv", "dtype": "bf16", "contraction": "nchw,kc->nkhw",
                       "sizes": {"n": 2, "c": 16, "h": 5, "w": 6, "k": 8},
                       "operands": {"A": {"strides": [480, 30, 6, 1]}},
                       "epilogue": [{"residual": {"letters": "nwhk"}}]})
    segments = [s.letters for s in analyse(spec).roles["m"].segments]
    assert ("h",) in segments and ("w",) in segments  # transposed h, w: no merge


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_segments_address_every_epilogue_view_like_its_strides(data):
    """For any subset of C's letters in any order, with any strides, walking a role's merged segments gives
    each view the same element offset as summing its per-letter strides."""
    sizes = {"b": data.draw(st.integers(1, 3)), "h": data.draw(st.integers(1, 4)), "w": data.draw(st.integers(1, 4)),
             "n": data.draw(st.integers(1, 5)), "k": 3}
    letters = data.draw(st.lists(st.sampled_from("bhwn"), min_size=1, max_size=4, unique=True))
    strides = [data.draw(st.integers(0, 40)) for _ in letters]
    view = {"letters": "".join(letters), "strides": strides}
    spec = parse_spec({"name": "p", "dtype": "f32", "contraction": "bhwk,bkn->bhwn", "sizes": sizes,
                       "epilogue": [{"scale": view}]})
    views = analyse(spec)
    stride_of = dict(zip(letters, strides))
    c_letters = [x for x in "bhwn" if sizes[x] > 1]
    for idx in itertools.product(*(range(sizes[x]) for x in c_letters)):
        at = dict(zip(c_letters, idx))
        direct = sum(at[x] * stride_of.get(x, 0) for x in c_letters)
        walked = 0
        for rv in views.roles.values():
            for seg in rv.segments:
                if "scale" not in dict(seg.strides):
                    continue
                flat = 0
                for x in seg.letters:  # outer -> inner: the segment's index
                    flat = flat * sizes[x] + at[x]
                walked += flat * seg.stride("scale")
        assert walked == direct


@pytest.mark.slow
@pytest.mark.parametrize("family", [*sorted(FAMILY_SPECS), "hopper-vectors"])
def test_every_family_compiles_with_the_epilogue_without_spills(family, tmp_path):
    nvcc = nvcc_or_skip()
    src = tmp_path / "ep_all.cu"
    spec = VECTOR_SPEC if family == "hopper-vectors" else FAMILY_SPECS[family]
    files = _render(spec, family.removesuffix("-vectors"))
    files = {name.replace(spec.name, "ep_all"): text.replace(f'"{spec.name}.h"', '"ep_all.h"')
             for name, text in files.items()}
    assert "dg/activations.cuh" in files or family == "hopper-vectors"
    for name, text in files.items():  # the whole folder: the .cu includes its dg/ headers
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = subprocess.run([*nvcc.compile_prefix(), "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                          "-Xptxas", "-v", "-c", str(src), "-o", str(tmp_path / "ep_all.o")],
                         capture_output=True, text=True, env=nvcc.run_env(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warning" not in out.stderr.lower()
    spills = re.findall(r"(\d+) bytes spill stores", out.stderr)
    assert spills and all(s == "0" for s in spills), out.stderr[-2000:]


def test_random_epilogues_leave_the_products_alone_and_every_one_plans():
    from dgemm_cli.randspec import random_specs

    with_ep = random_specs(60, 3, small_m_share=0.2, dynamic_share=0.3, epilogue_share=1.0)
    without = random_specs(60, 3, small_m_share=0.2, dynamic_share=0.3, epilogue_share=0.0)
    kinds, outputs = set(), 0
    for a, b in zip(with_ep, without):
        d = a["operands"].pop("D", None)
        outputs += d is not None
        steps = a.pop("epilogue")
        assert a == b  # the share never changes the product
        spec = parse_spec({**a, "epilogue": steps, "operands": {**a["operands"], **({"D": d} if d else {})}})
        kinds |= {st.kind for st in spec.epilogue}
        views = analyse(spec)
        if not spec.dynamic:
            assert make_plan(views, get_arch("sm_90a")).kernels
    assert kinds == {"bias", "scale", "activation", "clamp", "residual"} and outputs >= 5


@pytest.mark.parametrize("family, m", [("cta", 96), ("splitk", 24), ("gemv", 2), ("hopper", 256)])
def test_steps_without_views_are_applied_too(family, m):
    """An epilogue of activations and clamps only takes no pointers (no `ep` argument), but every family
    still applies it: the first GPU run found cta kernels that stored alpha * acc + beta * C unchanged."""
    spec = parse_spec({"name": "nv", "dtype": "bf16", "gemm": {"m": m, "n": 256, "k": 128}, "beta": 0.5,
                       "operands": {"B": {"layout": "col"}},
                       "epilogue": [{"clamp": [-0.4, 0.2]}, {"activation": "sigmoid"}]})
    cu = _render(spec, family)["nv.cu"]
    assert f"family = {family}" in cu
    traits = _namespace(cu, family)
    clamp, sigmoid = "t = dg::clamp(t, -0.4f, 0.2f);", "t = dg::sigmoid<true>(t);"
    assert clamp in traits and sigmoid in traits and traits.index(clamp) < traits.index(sigmoid)
    # Every output element the traits produce (and hopper's packed store's pointwise) takes both steps.
    outputs = traits.count("float t = alpha * (") + traits.count("float pointwise(float t)")
    assert outputs and traits.count(clamp) == traits.count(sigmoid) == outputs
    assert "float out = alpha" not in cu  # no output element skips the steps
    # No pointers: no Epilogue argument, only the traits' empty one.
    assert "struct Epilogue {\n" not in cu and "Epilogue ep" not in cu
    assert "struct Epilogue {};" in traits and "Traits::Epilogue{}" in traits[traits.index("cudaError_t launch("):]
