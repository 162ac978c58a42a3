"""Rendering: every example spec renders, the files say what they are, nothing is left unused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dgemm_cli.arch import ARCHES, get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.pipeline import generate
from dgemm_cli.plan import family_gates, make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import SPECS

FILES = {"{n}.cu", "{n}.h", "{n}_harness.cu", "Makefile", "CMakeLists.txt", "README.md", "plan.json", "dg_harness.cuh"}


def render(spec, arch="sm_90a"):
    views = analyse(spec)
    return render_sources(spec, views, make_plan(views, get_arch(arch)), plan_baseline(views), get_arch(arch))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", list(ARCHES))
def test_every_spec_renders(path, arch):
    spec = load_spec(path)
    files = render(spec, arch)
    assert set(files) == {f.format(n=spec.name) for f in FILES}
    cu = files[f"{spec.name}.cu"]
    # The header comment carries the spec, the plan and the reasons.
    assert f"name: {spec.name}" in cu and f"Kernel family for {arch}" in cu
    assert "forced by" in cu or "cost model" in cu
    assert f'extern "C" cudaError_t {spec.name}(' in cu
    assert "{{" not in cu and "{%" not in cu
    plan = json.loads(files["plan.json"])
    assert plan["arch"] == arch and len(plan["content_hash"]) == 64
    assert plan["spec"]["name"] == spec.name
    header = files[f"{spec.name}.h"]
    assert f"cudaError_t {spec.name}(const " in header and "cudaStream_t stream" in header


def test_header_types_follow_dtypes():
    spec = parse_spec({"name": "mix", "dtype": "bf16", "gemm": {"m": 8, "n": 8, "k": 8},
                       "operands": {"C": {"dtype": "f32"}}})
    header = render(spec)["mix.h"]
    assert "const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, float alpha, float beta" in header
    assert "#include <cuda_bf16.h>" in header and "cuda_fp16.h" not in header


def test_no_dead_code_for_unused_features():
    # Dense, 16-byte aligned, no batch, f32: no ldmatrix, no gather, no batch offsets, no dispatch.
    spec = parse_spec({"name": "plain", "dtype": "f32", "gemm": {"m": 64, "n": 64, "k": 64},
                       "operands": {x: {"align": 16} for x in "ABC"}})
    cu = render(spec)["plain.cu"]
    assert "ldmatrix" not in cu and "Gather" not in cu and "batch_offset" not in cu
    assert "Run-time dispatch" not in cu
    assert "fmaf(a[i], b[j]" in cu
    # Every cp.async width defined is used.
    for width in re.findall(r"void cp_async(\d+)\(", cu):
        assert f"cp_async{width}(stage" in cu


def test_offsets_applied_inside_and_segments_rendered():
    spec = load_spec(next(p for p in SPECS if p.stem == "conv1x1_nchw"))
    cu = render(spec)["conv1x1_nchw.cu"]
    assert "(i % 3136) * 1" in cu and "i * 802816" in cu  # two M segments of A
    spec = parse_spec({"name": "off", "gemm": {"m": 8, "n": 8, "k": 8}, "operands": {"A": {"offset": 5}}})
    cu = render(spec)["off.cu"]
    assert "A += 5;" in cu


def test_large_view_uses_64_bit_index():
    spec = parse_spec({"name": "big", "gemm": {"m": 4, "n": 4, "k": 4}, "operands": {"A": {"strides": [2**30, 1]}}})
    assert "using index_t = long long;" in render(spec)["big.cu"]


def test_generate_writes_directory(tmp_path):
    spec = load_spec(SPECS[0])
    g = generate(spec, get_arch("sm_80"), tmp_path)
    assert g.directory == tmp_path / spec.name
    assert {p.name for p in g.directory.iterdir()} == {f.format(n=spec.name) for f in FILES}


def _tree(root):
    """Relative path -> bytes of every file under `root`."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_same_spec_anywhere_gives_byte_identical_files(path, tmp_path, monkeypatch):
    """Same spec, same generator -> the same bytes in every file (plan.json too), wherever the spec lives
    and however it is named on the command line (absolute, or relative to another working directory)."""
    here = tmp_path / "one" / path.name
    there = tmp_path / "two" / "deeper" / "still" / path.name
    for copy in (here, there):
        copy.parent.mkdir(parents=True)
        copy.write_bytes(path.read_bytes())
    first = generate(load_spec(here), get_arch("sm_90a"), tmp_path / "out_one")
    monkeypatch.chdir(tmp_path / "two")
    second = generate(load_spec(Path("deeper/still") / path.name), get_arch("sm_90a"), Path("out_two"))
    one, two = _tree(first.directory), _tree(tmp_path / "two" / second.directory)
    assert set(one) == {f.format(n=first.name) for f in FILES}
    assert set(one) == set(two)
    for name in one:
        assert one[name] == two[name], f"{name} differs between the two places"
    assert first.content_hash == second.content_hash


def test_dtype_alias_gives_the_same_files_as_our_name(tmp_path):
    """A note is about how the spec was read, not part of it: `dtype: half` and `dtype: f16` generate the
    same bytes."""
    trees = []
    for dtype in ("half", "f16"):
        spec_file = tmp_path / dtype / "aliased.yaml"
        spec_file.parent.mkdir()
        spec_file.write_text(f"name: aliased\ndtype: {dtype}\ngemm: {{m: 8, n: 8, k: 8}}\n")
        trees.append(_tree(generate(load_spec(spec_file), get_arch("sm_80"), tmp_path / f"out_{dtype}").directory))
    assert trees[0] == trees[1]


def test_the_wheel_ships_every_template_and_subpackage():
    """pyproject lists the packages by hand (a new subpackage must be in them) and the templates by recursive globs,
    which setuptools expands as glob.glob(recursive=True) does."""
    import glob

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    from .conftest import REPO

    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(conf["packages"])
    for init in (REPO / "dgemm_cli").rglob("__init__.py"):
        assert ".".join(init.parent.relative_to(REPO).parts) in packages, init
    shipped = {p for g in conf["package-data"]["dgemm_cli.templates"]
               for p in glob.glob(g, root_dir=REPO / "templates", recursive=True)}
    for f in (REPO / "templates").rglob("*"):
        if f.is_file():
            assert f.relative_to(REPO / "templates").as_posix() in shipped, f


# ------------------------------------------------------------------------------------------------
# The hopper family's K split and A's cut box
# ------------------------------------------------------------------------------------------------

def _split_spec(m=8, n=14336, k=4096, c="row", **extra):
    return parse_spec({"name": "ks", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": m, "n": n, "k": k},
                       "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": c}}, **extra})


def _hopper_sources(spec, splits=None):
    """The hopper kernel of `spec`, the model's pick or its cheapest plan with `splits` blocks a cluster."""
    from dataclasses import replace

    from dgemm_cli.families import hopper
    from dgemm_cli.families.solving import ranked

    views, arch = analyse(spec), get_arch("sm_90a")
    plan = make_plan(views, arch, "hopper")
    if splits is not None:
        primary = next(p for p in ranked(hopper.problem(views, arch), 2000) if p.k_splits == splits)
        plan = replace(plan, primary=primary)
    return render_sources(spec, views, plan, plan_baseline(views), arch)[f"{spec.name}.cu"], plan.primary


@pytest.mark.parametrize("c", ["row", "col"])
def test_a_split_hopper_kernel_launches_clusters_and_sums_the_partial_tiles_in_rank_order(c):
    cu, plan = _hopper_sources(_split_spec(c=c), splits=2)
    assert plan.k_splits == 2 and plan.kt_per_split == 32
    assert "#include <cooperative_groups.h>" in cu
    assert "constexpr int SPLITS = 2, KT_PER_SPLIT = 32;" in cu
    kernel = cu[cu.index("__global__ void"):cu.index("// ---- Host side")]
    # PDL: the kernel waits for its predecessor once its barriers are set up, before any memory access (no
    # prefetch: measured slower in the K-split kernel); the launch allows it.
    head = _before_wait(kernel)
    assert kernel.count("griddepcontrol.wait") == 1 and "tma_prefetch_" not in cu
    assert head.rindex("__syncthreads();") > head.index("mbar_init") and "tma_load_" not in head
    assert "for (int kt = kt0; kt < kt_end; ++kt)" in kernel and "kt > kt0 || kk > 0" in kernel
    assert "for (int t = blockIdx.x; t < TILES" not in kernel  # one tile a cluster: the stages park its partial
    assert kernel.count("cluster.sync();") == 4  # twice in the producer warpgroup, twice in the consumers
    assert "for (int s = 0; s < SPLITS; ++s)" in kernel and "cluster.map_shared_rank(partial, s)" in kernel
    assert ("partial[col * RED_PITCH + r] = acc" if c == "col" else "&partial[r * RED_PITCH + col]") in kernel
    launch = cu[cu.index("cudaError_t launch("):]
    assert "attrs[1].val.clusterDim.x = SPLITS;" in launch and "TILES * SPLITS" in launch
    assert "programmaticStreamSerializationAllowed = 1" in launch


def test_an_unsplit_hopper_kernel_stays_persistent_and_has_no_cluster():
    cu, plan = _hopper_sources(_split_spec(m=4096, n=4096, k=4096))
    assert plan.k_splits == 1
    assert "for (int t = blockIdx.x; t < TILES; t += gridDim.x)" in cu and "cooperative_groups" not in cu
    assert "SPLITS" not in cu and "clusterDim" not in cu and "A_BOX_ROWS" not in cu


def _before_wait(kernel: str) -> str:
    return kernel[:kernel.index("griddepcontrol.wait")]


def _assert_only_prefetches_before_the_wait(kernel: str) -> None:
    """A dependent launch may not read or write memory the previous grid may use before its griddepcontrol.wait:
    before it, only L2 prefetches (which return nothing) of B's boxes (A's too measured slower)."""
    assert kernel.count("griddepcontrol.wait") == 1
    head = _before_wait(kernel)
    assert "(&tmap_b, " in head and "(&tmap_a, " not in head
    for access in ("tma_load_", "C[", "ld.global", "st.global", "__ldg", "mbar_wait", "epi["):
        assert access not in head, access
    assert head.index("__syncthreads();") > head.rindex("tma_prefetch_")  # all threads wait after the barriers


def _family_sections(cu: str) -> list[tuple[str, str]]:
    """(family, text) of each family namespace of a generated .cu, in order (a run-time artifact has several)."""
    starts = list(re.finditer(r"namespace (?:m[0-9_]+_)?(gemv|tcgemv|splitk|hopper|cta) \{", cu))
    return [(m.group(1), cu[m.start():(starts[i + 1].start() if i + 1 < len(starts) else len(cu))])
            for i, m in enumerate(starts)]


@pytest.mark.parametrize("name, prefetching", [
    ("decode_8x4096x14336", 1), ("decode_8x4096x4096", 0), ("decode_16x4096x4096", 0), ("gqa_scores_b32_m8", 0),
    ("decode_1x4096x14336", 0), ("decode_dyn_1-64x4096x128", 0), ("decode_dyn_1-64x4096x14336", 4),
    ("fullred_dot_16M_f16", 0), ("skinny_4x16_k4M_f16", 0)])
def test_kernels_that_load_through_the_sms_prefetch_only_ahead_of_coherent_loads(name, prefetching):
    """Besides hopper (TMA loads), only tcgemv's register-stream kernel prefetches ahead of its wait, and only where
    a warp streams PREFETCH_MIN_ROUNDS rounds (16 a warp at [8,4096]x[4096,14336], its 4 buckets of 2..8 rows in the
    run-time artifact; not 4 or 8 rounds at N = 4096). A prefetching kernel's weight loads are coherent: with the
    first rounds prefetched into L2 before the wait, `.nc` loads can read the NaN image the harness's predecessor
    has since replaced. Before the wait it only prefetches; it lets the next grid
    in after its loads, and a kernel without the prefetch keeps its `.nc` loads and never triggers."""
    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "bench" / f"{name}.yaml")
    cu = render(spec)[f"{spec.name}.cu"]
    sections = [(family, text) for family, text in _family_sections(cu) if family in ("gemv", "tcgemv", "splitk")]
    assert sections
    with_prefetch = [(family, text) for family, text in sections if "prefetch" in text]
    assert len(with_prefetch) == prefetching and all(family == "tcgemv" for family, _ in with_prefetch)
    for family, text in sections:
        kernel = text[text.index("__global__ void"):]
        assert "griddepcontrol.wait" in kernel
        if "prefetch" not in text:
            assert "launch_dependents" not in kernel or family != "tcgemv"
            continue
        assert "ld.global.nc" not in text and "ld.global.L1::no_allocate.v4.u32" in text
        head = _before_wait(kernel)
        assert "prefetch_l2(even_row[o] + seg + even_chunk)" in head and "constexpr int PREFETCH_ROUNDS = 2;" in head
        for access in ("load_stream(", "C[", "st.global", "__ldg", "epi["):
            assert access not in head, access
        assert kernel.index("launch_dependents") > kernel.rindex("mma_round(")


def test_a_persistent_hopper_kernel_is_a_dependent_launch():
    """PDL: every thread waits for the previous grid after the barriers are set up and before any memory
    access but the first stages' L2 prefetch; the producer lets the next grid be scheduled once it has issued
    its last load."""
    cu, _ = _hopper_sources(_split_spec(m=4096, n=4096, k=4096))
    kernel = cu[cu.index("__global__ void"):cu.index("// ---- Host side")]
    _assert_only_prefetches_before_the_wait(kernel)
    head = _before_wait(kernel)
    # The block's first tile, its first STAGES k-iterations (no more than K has).
    assert "if (int(blockIdx.x) < TILES && TILES <= int(gridDim.x)) {" in head  # one tile a block only
    assert "const Tile tile = tile_at(int(blockIdx.x));" in head
    assert "for (int kt = 0; kt < (STAGES < K_ITERS ? STAGES : K_ITERS); ++kt)" in head
    wait = kernel.index("griddepcontrol.wait")
    assert kernel.index("__syncthreads();") < wait < kernel.index("tma_load_") < kernel.index("launch_dependents")
    assert kernel.index("launch_dependents") < kernel.index("setmaxnreg.inc")  # the producer's branch
    launch = cu[cu.index("cudaError_t launch("):]
    assert "programmaticStreamSerializationAllowed = 1" in launch
    # Dependent where the grid takes every block slot, or all but a sixteenth of them over one tile row (measured:
    # grids leaving more SMs idle run slower dependent).
    assert ("const bool dependent = grid == resident || (TILES == TILES_N && 16 * (resident - grid) <= resident);"
            in launch)
    assert "config.numAttrs = (dependent) ? 1 : 0;" in launch
    assert "cudaLaunchKernelEx(&config, ks_kernel, map_a, map_b, C, alpha, beta)" in launch


def test_a_box_of_few_rows_expects_only_its_bytes():
    cu, plan = _hopper_sources(_split_spec(m=20))
    assert plan.a_box_rows == 24
    assert "constexpr int A_BOX_ROWS = 24;" in cu
    assert "constexpr int STAGE_TX_BYTES = A_BOX_ROWS * BK * 2 + B_STAGE_BYTES;" in cu
    assert re.search(r"const cuuint32_t box\[2\] = \{ 64, 24 \};", cu)
    assert "A: a box of 24 rows" in cu  # the header comment says so


def test_run_time_rows_cut_a_s_box_when_the_map_is_encoded():
    spec = parse_spec(
        {"name": "rt", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 64}, "n": 4096, "k": 4096},
         "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}})
    views = analyse(spec)
    files = render_sources(spec, views, make_plan(views, get_arch("sm_90a"), "hopper"), plan_baseline(views),
                           get_arch("sm_90a"))
    cu = files["rt.cu"]
    ranged = [b for b in re.split(r"\nnamespace \w+ \{", cu)[1:] if "a_box_rows(int m_inner)" in b]
    assert ranged, "a hopper kernel for a range of rows"
    body = ranged[0]
    assert "const cuuint32_t box[2] = { 64, a_box_rows(int(m_inner)) };" in body
    assert "const unsigned stage_tx_bytes = unsigned(a_box_rows(M_INNER) * BK * 2 + B_STAGE_BYTES);" in body
    assert "mbar_expect_tx(&full[stage], stage_tx_bytes);" in body and "STAGE_TX_BYTES" not in body


@pytest.mark.slow
@pytest.mark.parametrize("case", ["rows", "cols", "scalar-epilogue"])
def test_split_hopper_kernels_compile_without_spills(case, tmp_path):
    """C row-major (vectors along n), column-major (along m), and C strided both ways (scalar stores) with
    every epilogue step and a separate D: the reduction's store is the store phase's, under a cluster."""
    import os
    import subprocess

    from .test_build import nvcc_or_skip

    nvcc = nvcc_or_skip()
    if case == "scalar-epilogue":
        spec = parse_spec({"name": "ks", "arch": "sm_90a", "dtype": "f16", "gemm": {"m": 40, "n": 520, "k": 2048},
                           "beta": 0.5, "operands": {"A": {"layout": "row"}, "B": {"layout": "row"},
                                                     "C": {"strides": [3, 130]}, "D": {"strides": [1, 41]}},
                           "epilogue": [{"scale": {"letters": "m"}}, {"bias": {"letters": "n", "dtype": "f32"}},
                                        {"residual": {"strides": [1, 40]}}, {"activation": "gelu_tanh"},
                                        {"clamp": [-2.0, 2.0]}]})
    else:
        spec = _split_spec(m=24, n=1000, k=4104, c="row" if case == "rows" else "col", beta=0.5)
    cu, plan = _hopper_sources(spec, splits=2)
    assert plan.k_splits == 2
    (tmp_path / "ks.cu").write_text(cu)
    (tmp_path / "ks.h").write_text(render_sources(spec, analyse(spec), make_plan(analyse(spec), get_arch("sm_90a"),
                                                                                 "hopper"),
                                                  plan_baseline(analyse(spec)), get_arch("sm_90a"))["ks.h"])
    out = subprocess.run([*nvcc.compile_prefix(), "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                          "-Xptxas", "-v", "-c", str(tmp_path / "ks.cu"), "-o", str(tmp_path / "ks.o")],
                         capture_output=True, text=True, env=nvcc.run_env(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warning" not in out.stderr.lower(), out.stderr[-3000:]
    spills = re.findall(r"(\d+) bytes spill stores", out.stderr)
    assert spills and all(s == "0" for s in spills), out.stderr[-2000:]


def test_two_consumer_warpgroups_meet_before_the_partial_tile_goes_over_the_stages():
    """One warpgroup's last wgmma can still read a stage while the other parks its rows there (a 128-row split tile
    changed bits between repeats until the two met at a barrier first)."""
    from dataclasses import replace

    from dgemm_cli.families import hopper
    from dgemm_cli.families.solving import ranked

    spec = _split_spec(m=128, n=4096, k=4096)
    views, arch = analyse(spec), get_arch("sm_90a")
    plans = ranked(hopper.problem(views, arch), 3000)
    for consumers in (1, 2):
        primary = next(p for p in plans if p.k_splits == 2 and p.consumers == consumers)
        plan = replace(make_plan(views, arch, "hopper"), primary=primary)
        cu = render_sources(spec, views, plan, plan_baseline(views), arch)["ks.cu"]
        kernel = cu[cu.index("__global__ void"):cu.index("// ---- Host side")]
        barrier = 'asm volatile("bar.sync 1, %0;\\n" ::"n"(CONSUMERS * 128) : "memory");'
        assert (barrier in kernel) == (consumers == 2)
        if consumers == 2:
            assert kernel.index("wgmma_wait<0>();") < kernel.index(barrier) < kernel.index("partial[")



PDL_ATTRIBUTE = "programmaticStreamSerializationAllowed = 1"
DECODE_SPECS = sorted((SPECS[0].parent / "bench").glob("decode_[0-9]*.yaml"))  # fixed sizes: run-time ones are slow


def _readme_and_dependent(spec, views, arch, family=None):
    """Whether the README names a programmatic dependent launch, whether the .cu takes one, the plan, the README."""
    plan = make_plan(views, arch, family)
    files = render_sources(spec, views, plan, plan_baseline(views), arch)
    readme = files["README.md"]
    return "Programmatic dependent launch" in readme, PDL_ATTRIBUTE in files[f"{spec.name}.cu"], plan, readme


@pytest.mark.parametrize("path", DECODE_SPECS, ids=lambda p: p.stem)
def test_readme_says_when_the_launch_is_programmatically_dependent(path):
    """A programmatic dependent launch changes what the next kernel in the caller's stream may assume (it may start
    before this one completes), so the README says so exactly where the launcher can take one, in every family the
    decode shapes reach (each family preferred where its gates allow)."""
    spec = load_spec(path)
    views = analyse(spec)
    gated = family_gates(views, get_arch("sm_90a"))
    for family in ("hopper", "tcgemv", "gemv", "splitk", "cta"):
        if gated[family]:  # --family refuses a family whose gates refuse the problem
            continue
        says, dependent, plan, _ = _readme_and_dependent(spec, views, get_arch("sm_90a"), family)
        assert says == dependent, plan.family


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_readme_and_launch_agree_on_every_example_spec(path):
    spec = load_spec(path)
    views = analyse(spec)
    for arch in ("sm_90a", "sm_80"):
        says, dependent, plan, _ = _readme_and_dependent(spec, views, get_arch(arch))
        assert says == dependent, (arch, plan.family)
        assert not (arch == "sm_80" and dependent)  # griddepcontrol is sm_90 PTX


def test_readme_states_the_hopper_launch_rule_and_a_plain_cta_kernel_says_nothing():
    spec = load_spec(SPECS[0].parent / "bench" / "decode_16x4096x14336.yaml")
    views = analyse(spec)
    says, dependent, plan, readme = _readme_and_dependent(spec, views, get_arch("sm_90a"), "hopper")
    assert plan.family == "hopper" and says and dependent
    assert "where the grid takes every block slot" in readme and "cudaGridDependencySynchronize()" in readme
    says, dependent, plan, _ = _readme_and_dependent(spec, views, get_arch("sm_90a"), "cta")
    assert plan.family == "cta" and not says and not dependent
