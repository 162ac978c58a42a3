"""The host backend's planning and rendering (no compiler): the cpu family's gates and graph, that a target sees
only its backend's families, the spec's pins on the host, a run-time spec's one kernel, and the folder's files."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import PlanError, SpecError
from dgemm_cli.explain import explain_text
from dgemm_cli.families import FAMILIES
from dgemm_cli.families.cpu import MAX_SEGMENTS, CpuPlan
from dgemm_cli.families.cpu.cost import MICRO_TILES
from dgemm_cli.pipeline import plan_spec
from dgemm_cli.plan import BucketPlan, family_gates, make_plan
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import c_prototype, render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import ROLES, analyse

from .conftest import REPO

CPU, SM90 = get_arch("cpu"), get_arch("sm_90a")
ALL_SPECS = sorted((REPO / "specs").rglob("*.yaml"))


def _spec(**raw):
    return parse_spec({"name": "h", **raw})


def _gemm(**extra):
    return _spec(dtype="f32", arch="cpu", gemm={"m": 64, "n": 48, "k": 40}, **extra)


def _files(spec):
    planned = plan_spec(spec, CPU)
    return render_sources(spec, planned.views, planned.plan, planned.baseline, CPU)


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(REPO / "specs")))
def test_every_spec_plans_on_the_host_or_says_why(path):
    spec = load_spec(path)
    views = analyse(spec)
    if spec.inputs == "e4m3":  # the host has no FP8 kernel, and the one reason says where e4m3 runs
        with pytest.raises(PlanError, match=r"e4m3 inputs: no e4m3 kernel in this family \(fp8_hopper and fp8_cta "
                                            r"run e4m3 on CUDA targets\)\)$"):
            make_plan(views, CPU)
        return
    if spec.inputs == "weight-only":  # likewise integer weights, which the wq families run on CUDA targets
        with pytest.raises(PlanError, match=r"integer weights: no integer weights kernel in this family \(wqtc and wq "
                                            r"run integer weights on CUDA targets\)\)$"):
            make_plan(views, CPU)
        return
    plan = make_plan(views, CPU)
    assert plan.family == "cpu"
    assert all(isinstance(k, CpuPlan) for k in plan.kernels)


def test_a_target_sees_only_its_backends_families():
    views = analyse(_gemm())
    on_host, on_gpu = family_gates(views, CPU), family_gates(views, SM90)
    for name, family in FAMILIES.items():
        if family.backend == "cpu":
            assert on_host[name] == [] and on_gpu[name][0][0] == "backend"
        else:
            assert on_host[name] == [("backend", f"{name} renders CUDA kernels, and cpu is the host")]
    plan = make_plan(views, CPU)
    assert plan.family_decision.value == "cpu"
    assert not plan.family_decision.rejected  # the CUDA families are not the host's candidates


def test_the_gpu_plan_never_names_the_host_family():
    plan = make_plan(analyse(_gemm()), SM90)
    assert plan.family != "cpu"
    assert all("cpu" not in r.value for r in plan.family_decision.rejected)


def test_family_cpu_on_a_gpu_arch_says_why():
    with pytest.raises(PlanError, match="--family cpu cannot run this problem .*backend"):
        make_plan(analyse(_gemm()), SM90, "cpu")


def test_a_role_with_more_segments_than_the_engine_holds_is_refused():
    letters = "abcdefghij"  # ten m letters that do not merge: each one's stride skips a gap
    sizes = {x: 2 for x in letters} | {"k": 3, "n": 2}
    strides, step = [], 1
    for _ in letters:
        strides.insert(0, step)
        step *= 3
    spec = _spec(dtype="f32", contraction=f"{letters}k,kn->{letters}n", sizes=sizes,
                 operands={"A": {"strides": [s * 3 for s in strides] + [1]}})
    views = analyse(spec)
    assert len(views.roles["m"].segments) > MAX_SEGMENTS
    assert ("segments", f"m has {len(views.roles['m'].segments)} (size, stride) segments, more than the engine's "
                        f"{MAX_SEGMENTS} (dg::cpu::kMaxSegs)") in family_gates(views, CPU)["cpu"]


def test_blocks_default_to_the_hosts_caches_and_pins_fix_them():
    plan = make_plan(analyse(_gemm()), CPU).primary
    assert (plan.kc, plan.mc, plan.nc) == (0, 0, 0)
    pinned = make_plan(analyse(_gemm(plan={"kc": 256, "mc": 96})), CPU).primary
    assert (pinned.kc, pinned.mc, pinned.nc) == (256, 96, 0)
    assert "kc = 256 (forced by the spec's plan)" in explain_text(_gemm(plan={"kc": 256}), CPU)


def test_a_pin_past_the_caches_is_refused_with_the_cache():
    with pytest.raises(SpecError, match=r"cpu: .*blocks fit the caches"):
        make_plan(analyse(_gemm(plan={"kc": 1024, "mc": 768})), CPU)


def test_a_gpu_specs_pins_do_not_reach_the_host():
    spec = load_spec(REPO / "specs" / "decode_swapped_multicast.yaml")
    assert dict(spec.pins)["family"] == "hopper"
    assert make_plan(analyse(spec), CPU).family == "cpu"


def test_a_run_time_spec_is_one_host_kernel_for_its_whole_range():
    spec = load_spec(REPO / "specs" / "decode_dynamic.yaml")
    plan = make_plan(analyse(spec), CPU)
    x, lo, hi = spec.run_time_letter
    assert isinstance(plan, BucketPlan) and [(b.lo, b.hi) for b in plan.buckets] == [(lo, hi)]
    files = _files(spec)
    cpp = files[f"{spec.name}.cpp"]
    assert f"if (m < {lo} || m > {hi}) return EINVAL;" in cpp
    assert "int64_t m, float alpha, float beta, int threads" in files[f"{spec.name}.h"]


def test_the_folder_is_cpp_with_the_c_api_and_the_engine():
    spec = load_spec(REPO / "specs" / "conv1x1_nchw.yaml")
    files = _files(spec)
    name = spec.name
    assert set(files) == {f"{name}.cpp", f"{name}.h", "Makefile", "CMakeLists.txt", "README.md", "plan.json",
                          "dg/cpu_gemm.hpp", "dg/cpu_types.hpp"}
    assert not any(f.endswith((".cu", ".cuh")) for f in files)
    header = files[f"{name}.h"]
    proto = c_prototype(spec, analyse(spec), CPU)
    assert proto == (f"int {name}(const dg_bf16* A, const dg_bf16* B, dg_bf16* C, float alpha, float beta, "
                     "int threads)")
    assert proto + ";" in header and "cuda" not in header.lower()
    assert "typedef struct { unsigned short bits; } dg_bf16;" in header
    cpp = files[f"{name}.cpp"]
    assert "dg::cpu::gemm<Traits>(args);" in cpp and "if (A == nullptr || B == nullptr || C == nullptr)" in cpp
    assert "-march=$(MARCH)" in files["Makefile"] and "OpenMP::OpenMP_CXX" in files["CMakeLists.txt"]


def _shape_segments(cpp: str, role: str) -> list[tuple[int, list[int]]]:
    """The (size, strides) pairs of `role` in the rendered kShape."""
    line = re.search(rf"/\* {role} \*/ (.*),\n", cpp).group(1)
    return [(int(size), [int(s) for s in strides.split(", ")])
            for size, strides in re.findall(r"\{(\d+), \{([\d, ]+)\}\}", line)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000))
def test_the_traits_hold_every_roles_segments_with_each_slots_stride(seed):
    spec = parse_spec(random_spec(random.Random(seed), "r", dynamic_share=0.3, epilogue_share=0.5))
    if spec.scales:
        return
    views = analyse(spec)
    cpp = _files(spec)[f"{spec.name}.cpp"]
    slots = ("A", "B", "C", "D", "bias", "scale", "residual")
    for role in ROLES:
        got = _shape_segments(cpp, role)
        want = [(seg.size, [dict(seg.strides).get(x, 0) for x in slots]) for seg in views.roles[role].segments]
        assert got == want, role
    offsets = re.search(r"/\* offset \*/ \{ ([\d, ]+) \}", cpp).group(1)
    assert [int(o) for o in offsets.split(", ")] == [spec.operand(x).offset if x in views.operands else 0
                                                      for x in slots]


def test_the_epilogue_is_finish_run():
    spec = next(load_spec(p) for p in sorted((REPO / "specs" / "epilogue").glob("*.yaml"))
                if load_spec(p).D is not None and any(st.activation for st in load_spec(p).epilogue))
    cpp = _files(spec)[f"{spec.name}.cpp"]
    begin = cpp.index("static inline void finish_run")
    finish = cpp[begin:cpp.index("\n  }\n", begin)]
    assert "if (a.beta != 0.0f)" in finish
    assert "dg::cpu::store_run<" in finish and "start[dg::cpu::kD]" in finish  # the output is D
    for step in spec.epilogue:
        if step.activation:
            assert f"dg::cpu::{step.activation}(t[q])" in finish


def test_the_plan_states_the_micro_tile_the_header_asserts():
    cpp = _files(_gemm())["h.cpp"]
    for isa, (mr, nr) in MICRO_TILES.items():
        assert f"static_assert(dg::cpu::kMR == {mr} && dg::cpu::kNR == {nr}, \"the plan's {isa} micro-tile" in cpp
        assert f"{isa}: {mr} x {nr}" in cpp


def _paths_traits(spec) -> tuple[int, int]:
    cpp = next(text for name, text in _files(spec).items() if name.endswith(".cpp"))
    found = re.search(r"kSmallRows = 0x([0-9a-f]+), kBlocked = (\d)", cpp)
    assert found, cpp
    return int(found.group(1), 16), int(found.group(2))


def test_the_traits_instantiate_the_paths_the_engine_takes_at_the_specs_rows():
    """kSmallRows (bit m - 1: the small-M path at m rows) and kBlocked (bit 0 A B, bit 1 C^T = B^T A^T): what the
    engine chooses at every row extent the spec allows, and the blocked path as A B where it chooses none."""
    row = {"A": {"layout": "row"}, "B": {"layout": "row"}, "C": {"layout": "row"}}
    assert _paths_traits(_gemm()) == (0, 1)  # 64 rows: blocked
    ccol = {**row, "C": {"layout": "col"}}
    assert _paths_traits(_gemm(operands=ccol)) == (0, 2)  # C contiguous along m: transposed
    decode = dict(dtype="f16", arch="cpu", operands=row)
    assert _paths_traits(_spec(gemm={"m": 3, "n": 64, "k": 40}, **decode)) == (0b100, 1)  # small-M alone
    assert _paths_traits(_spec(gemm={"m": {"min": 2, "max": 9}, "n": 64, "k": 40}, **decode)) == (0b1110, 1)
    gather = {**row, "B": {"strides": [3 * 64, 3]}}  # B steps by 3 along n and 192 along k: never small-M
    assert _paths_traits(_spec(gemm={"m": 3, "n": 64, "k": 40}, dtype="f32", arch="cpu", operands=gather)) == (0, 1)
    # rows 1..9 of a column-major C: A B at one row, transposed from two on
    assert _paths_traits(_spec(gemm={"m": {"min": 1, "max": 9}, "n": 64, "k": 40}, dtype="f32", arch="cpu",
                               operands={**gather, "C": {"strides": [1, 9]}})) == (0, 3)
