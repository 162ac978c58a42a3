"""Rendering: every example spec renders, the files say what they are, nothing is left unused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dgemm_cli.arch import ARCHES, get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.constraints import decision_lines
from dgemm_cli.families import FAMILIES
from dgemm_cli.pipeline import generate
from dgemm_cli.plan import family_gates, make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import SPECS, pinned_elsewhere

FILES = {"{n}.cu", "{n}.h", "{n}_harness.cu", "Makefile", "CMakeLists.txt", "README.md", "plan.json", "dg_harness.cuh"}


def render(spec, arch="sm_90a"):
    views = analyse(spec)
    return render_sources(spec, views, make_plan(views, get_arch(arch)), plan_baseline(views), get_arch(arch))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", list(ARCHES))
def test_every_spec_renders(path, arch):
    spec = load_spec(path)
    if pinned_elsewhere(spec, arch):
        return
    files = render(spec, arch)
    shipped = {f for f in files if f.startswith("dg/")}
    assert set(files) - shipped == {f.format(n=spec.name) for f in FILES}
    cu = files[f"{spec.name}.cu"]
    # The folder ships exactly the device headers the .cu includes, and what they include in turn.
    included = set(re.findall(r'#include "(dg/\w+\.cuh)"', cu))
    for h in sorted(shipped):
        included |= {f"dg/{n}" for n in re.findall(r'#include "(\w+\.cuh)"', files[h])}
    assert included == shipped
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
    files = render(spec)
    cu = files["plain.cu"]
    assert "Gather" not in cu and "Run-time dispatch" not in cu and "if (aligned(" not in cu
    # No batch: the traits say so, no view has a batch segment, and dg/cta.cuh's batch offsets compile only with one.
    assert "static constexpr bool has_batch = false;" in cu and "move_to_batch" not in cu
    assert cu.count("dg::View<dg::Role<index_t>,") == 3  # A, B and C: the batch role empty
    cta = files["dg/cta.cuh"]
    assert "if constexpr (T::has_batch) {\n    const index_t batch = tile / tiles_m;" in cta
    # f32: the FFMA mainloop of dg/cta.cuh; ldmatrix and mma.sync are only in the MMA = true specialization.
    assert "static constexpr bool MMA = false;" in cu and "WARPS_M" not in cu
    ffma = cta.index("struct Math<T, false> {")
    assert "fmaf(a[i], b[j], acc[i][j])" in cta[ffma:] and "ldmatrix" not in cta[ffma:cta.index("struct Shape {")]
    assert cta.index("ldmatrix_x4<") > cta.index("struct Math<T, true> {")
    assert set(files) & {"dg/tcgemv.cuh", "dg/hopper_common.cuh", "dg/reduce.cuh", "dg/activations.cuh"} == set()
    # Every loader the traits name is one the launch instantiates, and cp.async is instantiated only at their widths.
    loaders = re.findall(r"^using (\w+) = dg::cta::(Load\w+)<Traits, dg::cta::Operand::\w, (\d+)>;", cu, re.MULTILINE)
    assert loaders and all(cu.count(name) == 2 for name, _, _ in loaders)
    launch = cu[cu.index("cudaError_t launch("):]
    assert launch.count("dg::cta::launch<Traits, ") == 1  # one instantiation: no run-time choice
    assert "cp_async<VEC * int(sizeof(E))>(" in cta and "template <int Bytes>" in files["dg/ptx.cuh"]


def test_offsets_applied_inside_and_segments_rendered():
    spec = load_spec(next(p for p in SPECS if p.stem == "conv1x1_nchw"))
    cu = render(spec)["conv1x1_nchw.cu"]
    # Two M segments of A (innermost first: hw, then the batch n), then K along c.
    assert "dg::Role<index_t, dg::Seg<3136, 1>, dg::Seg<8, 802816>>,\n" in cu
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
    assert {p.name for p in g.directory.iterdir()} == {f.format(n=spec.name) for f in FILES} | {"dg"}
    assert {p.name for p in (g.directory / "dg").iterdir()} >= {"view.cuh", "launch.cuh"}


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
    assert {f for f in one if not f.startswith("dg/")} == {f.format(n=first.name) for f in FILES}
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
    for init in (*(REPO / "dgemm_cli").rglob("__init__.py"), *(REPO / "deepgemm").rglob("__init__.py")):
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
    """The files of the hopper kernel of `spec`, the model's pick or its cheapest plan with `splits` blocks a
    cluster, and that plan."""
    from dataclasses import replace

    from dgemm_cli.families import hopper
    from dgemm_cli.families.solving import ranked

    views, arch = analyse(spec), get_arch("sm_90a")
    plan = make_plan(views, arch, "hopper")
    if splits is not None:
        primary = next(p for p in ranked(hopper.problem(views, arch), 2000) if p.k_splits == splits)
        plan = replace(plan, primary=primary)
    return render_sources(spec, views, plan, plan_baseline(views), arch), plan.primary


def _namespace(cu: str, name: str) -> str:
    """The traits and launch() of kernel namespace `name` of a generated .cu."""
    return cu[cu.index(f"\nnamespace {name} {{\n"):cu.index(f"\n}}  // namespace {name}\n")]


def _function(text: str, start: str) -> str:
    """A function of a shipped header, from `start` (its name and opening parenthesis) to its closing brace."""
    at = text.index(start)
    return text[at:text.index("\n}\n", at)]


def _assert_dependent_launches_wait(files: dict[str, str]) -> None:
    """dg/launch.cuh: a LaunchShape with `dependent` set is a programmatic dependent launch (the attribute), one with
    `cluster` > 1 a cluster launch; the kernels' wait is griddepcontrol.wait (dg/ptx.cuh)."""
    launch = _function(files["dg/launch.cuh"], "inline cudaError_t launch(")
    dependent = launch[launch.index("if (shape.dependent) {"):]
    assert dependent.index("cudaLaunchAttributeProgrammaticStreamSerialization") < dependent.index("++n;")
    assert f"attrs[n].val.{PDL_ATTRIBUTE};" in dependent[:dependent.index("++n;")]
    assert "attrs[n].val.clusterDim.x = shape.cluster;" in launch[launch.index("if (shape.cluster > 1) {"):]
    assert "cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...)" in launch
    assert 'void wait_for_predecessor() { asm volatile("griddepcontrol.wait;\\n"' in files["dg/ptx.cuh"]


@pytest.mark.parametrize("c", ["row", "col"])
def test_a_split_hopper_kernel_launches_clusters_and_sums_the_partial_tiles_in_rank_order(c):
    files, plan = _hopper_sources(_split_spec(c=c), splits=2)
    assert plan.k_splits == 2 and plan.kt_per_split == 32
    cu = files["ks.cu"]
    traits = _namespace(cu, "hopper")
    # The traits carry the plan's split and its partial tile's pitch; the launch takes the cluster kernel.
    assert f"static constexpr int SPLITS = 2, KT_PER_SPLIT = 32, RED_PITCH = {plan.red_pitch};" in traits
    assert f"static constexpr bool C_ALONG_M = {'true' if c == 'col' else 'false'};" in traits
    assert "return dg::hopper::launch_split<Traits>(A, B, C, 0, Traits::Epilogue{}, alpha, beta, stream);" in traits
    assert '#include "dg/hopper_split.cuh"' in cu and "dg/hopper_persistent.cuh" not in files
    header = files["dg/hopper_split.cuh"]
    assert "#include <cooperative_groups.h>" in header
    kernel = _function(header, "void split_body(")  # the kernel but for its consumers' slice: split_kernel's lambda
    wrapper = _function(header, "split_kernel(")
    # PDL: the kernel waits for its predecessor once its barriers are set up, before any memory access (no
    # prefetch: measured slower in the K-split kernel); the launch allows it.
    head = _before_wait(kernel)
    assert kernel.count("wait_for_predecessor();") == 1 and "prefetch" not in head.replace("prefetch_tensormap", "")
    assert head.rindex("__syncthreads();") > head.index("mbar_init") and "issue_stage" not in head
    assert "for (int kt = kt0; kt < kt_end; ++kt)" in kernel  # the producer: this block's K slice
    assert "slice(acc, full, empty, stages_a, stages_b, stage, phase, tile, kt0, kt_end, wg, warp, lane);" in kernel
    assert "stage, phase, kt0, kt_end, wg, lane);" in wrapper  # the consumers: the same slice (mma_tile)
    assert "kt > kt0 || kk > 0" in _function(files["dg/hopper_common.cuh"], "void mma_tile(")
    assert "for (int t = blockIdx.x; t < TILES" not in kernel  # one tile a cluster: the stages park its partial
    assert kernel.count("cluster.sync();") == 4  # twice in the producer warpgroup, twice in the consumers
    assert "for (int s = 0; s < SPLITS; ++s)" in kernel and "cluster.map_shared_rank(partial, s)" in kernel
    # The partial tile is parked along the output's contiguous role: the branch C_ALONG_M takes.
    along_m, along_n = kernel[kernel.index("if constexpr (T::C_ALONG_M) {  // [col][row]"):].split("} else {", 1)
    assert "partial[col * RED_PITCH + r] = acc" in along_m and "&partial[r * RED_PITCH + col]" in along_n[:200]
    launch = header[header.index("cudaError_t launch_split("):]
    assert ("const LaunchShape shape{unsigned(tiles_of<T>(m_inner) * T::SPLITS), unsigned(Config<T>::THREADS),\n"
            "                          unsigned(T::SMEM_BYTES), true, unsigned(T::SPLITS)};") in launch
    _assert_dependent_launches_wait(files)


def test_an_unsplit_hopper_kernel_stays_persistent_and_has_no_cluster():
    files, plan = _hopper_sources(_split_spec(m=4096, n=4096, k=4096))
    assert plan.k_splits == 1
    cu = files["ks.cu"]
    traits = _namespace(cu, "hopper")
    assert f"static constexpr int SPLITS = 1, KT_PER_SPLIT = {plan.k_iters}, RED_PITCH = 0;" in traits
    assert PERSISTENT_LAUNCH in traits
    assert {"dg/hopper_split.cuh", "dg/hopper_multicast.cuh"} & set(files) == set()
    assert not any("cooperative_groups" in text for text in files.values()) and "clusterDim" not in cu
    # A's box is the whole tile's BM rows: nothing cut.
    assert f"BM = {plan.block_m}," in traits and f"static constexpr int A_BOX_ROWS = {plan.block_m};" in traits
    assert "A: a box of" not in cu
    header = files["dg/hopper_persistent.cuh"]
    assert "for (int t = blockIdx.x; t < TILES; t += gridDim.x)" in _function(header, "persistent_kernel(")
    assert "cluster" not in header and "unsigned(T::SMEM_BYTES), dependent, 1};" in header  # clusters of 1: none


PERSISTENT_LAUNCH = "return dg::hopper::launch_persistent<Traits>(A, B, C, 0, Traits::Epilogue{}, alpha, beta, stream);"


def _before_wait(kernel: str) -> str:
    return kernel[:kernel.index("wait_for_predecessor();")]


def _assert_only_prefetches_before_the_wait(kernel: str, common: str) -> None:
    """A dependent launch may not read or write memory the previous grid may use before its wait for it: before it,
    only L2 prefetches (which return nothing) of B's boxes (A's too measured slower), in dg/hopper_common.cuh's
    prefetch_first_stages."""
    assert kernel.count("wait_for_predecessor();") == 1
    head = _before_wait(kernel)
    assert "prefetch_first_stages<T>(" in head
    for access in ("issue_stage", "tma_load", "C[", "ld.global", "st.global", "__ldg", "mbar_wait", "epi[", "store"):
        assert access not in head, access
    assert head.index("__syncthreads();") > head.rindex("prefetch_first_stages")  # all threads wait after it
    prologue = _function(common, "void prefetch_first_stages(")
    assert "issue_stage<T, true>(" in prologue  # Prefetch: the boxes into L2 only
    stage = _function(common, "void issue_stage(")
    prefetch = stage[stage.index("if constexpr (Prefetch) {"):stage.index("mbar_wait")]
    assert "issue_operand<T, false, PREFETCH>(nullptr, map_b, " in prefetch  # B's boxes
    assert "issue_operand<T, true, PREFETCH>(nullptr, map_a, " in prefetch.split("else")[0]  # A's only if multicast
    assert "if constexpr (C::MULTICAST)" in prefetch.split("else")[0]
    box = _function(common, "void issue_box(")
    assert box.index("if constexpr (How == PREFETCH) {") < box.index("tma_prefetch(map, ") < box.index("} else if")


def _family_sections(cu: str) -> list[tuple[str, str]]:
    """(family, text) of each family namespace of a generated .cu, in order (a run-time artifact has several)."""
    starts = list(re.finditer(r"namespace (?:m[0-9_]+_)?(gemv|tcgemv|splitk|dot|hopper|cta) \{", cu))
    return [(m.group(1), cu[m.start():(starts[i + 1].start() if i + 1 < len(starts) else len(cu))])
            for i, m in enumerate(starts)]


def _kernels(section: str) -> int:
    """The buckets a family namespace serves: those of its name's range where it is a fold of one-size buckets
    (`template <int ROWS> struct Bucket`), else one."""
    if "template <int ROWS>" not in section:
        return 1
    lo, hi = re.match(r"namespace m(\d+)_(\d+)_", section).groups()
    return int(hi) - int(lo) + 1


def _int(traits: str, name: str) -> int:
    """An int member of rendered traits."""
    found = re.search(rf"\b{name} = (\d+)\b", traits)
    assert found, name
    return int(found.group(1))


def _flag(traits: str, name: str) -> bool:
    """A bool member of rendered traits."""
    found = re.search(rf"\b{name} = (true|false)\b", traits)
    assert found, name
    return found.group(1) == "true"


# The kernel of each small-M family's header, by the launcher the .cu calls.
SMALL_M_KERNELS = {"dg::gemv::launch<": "dg/gemv.cuh", "dg::tcgemv::launch<": "dg/tcgemv.cuh",
                   "dg::splitk::launch<": "dg/splitk.cuh", "dg::dot::launch<": "dg/dot.cuh"}


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
    in after its loads, and a kernel without the prefetch keeps its `.nc` loads and never triggers.
    The traits say how many rounds (PREFETCH_ROUNDS, the plan's); dg/tcgemv.cuh's kernel does the rest."""
    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "bench" / f"{name}.yaml")
    files = render(spec)
    cu = files[f"{spec.name}.cu"]
    sections = [(family, text) for family, text in _family_sections(cu)
                if family in ("gemv", "tcgemv", "splitk", "dot")]
    assert sections
    with_prefetch = [(family, text) for family, text in sections if "PREFETCH_ROUNDS" in text
                     and _int(text, "PREFETCH_ROUNDS") > 0]
    assert sum(_kernels(text) for _, text in with_prefetch) == prefetching
    assert all(family == "tcgemv" for family, _ in with_prefetch)
    for family, text in sections:
        # The kernel the launch instantiates waits for its predecessor (it is a dependent launch: the README tests).
        launcher = next(x for x in SMALL_M_KERNELS if x in text)
        header = files[SMALL_M_KERNELS[launcher]]
        kernel = _function(header, "    kernel(")
        if family == "gemv":
            assert _flag(text, "DEPENDENT_LAUNCH")
            assert "if constexpr (T::DEPENDENT_LAUNCH) wait_for_predecessor();" in kernel
        else:
            assert "  wait_for_predecessor();" in kernel
        if family != "tcgemv":
            assert "prefetch" not in header  # only tcgemv prefetches
            continue
        assert not _flag(text, "A_STAGED")  # the register-stream kernel, kernel<T>
        # dg/tcgemv.cuh: weight loads coherent exactly where the kernel prefetches; the prefetch, before the wait, is
        # all the kernel does there besides its pointer math, and the trigger after its last mma round is the
        # prefetching kernel's only.
        assert "constexpr bool COHERENT = T::PREFETCH_ROUNDS > 0;" in kernel
        assert kernel.count("load_stream<COHERENT>(") == 4 and "load_stream<false>" not in kernel
        stream = _function(header, "uint4 load_stream(")
        coherent, nc = stream[stream.index("if constexpr (Coherent) {"):].split("} else {", 1)
        assert "ld.global.L1::no_allocate.v4.u32" in coherent and "ld.global.nc" not in coherent
        assert "ld.global.nc.L1::no_allocate.v4.u32" in nc
        head = _before_wait(kernel)
        prefetch = head[head.index("if constexpr (T::PREFETCH_ROUNDS > 0) {"):]
        assert "for (int r = 0; r < T::PREFETCH_ROUNDS; ++r)" in prefetch
        assert "prefetch_l2(even_row[o] + seg + even_chunk)" in prefetch
        for access in ("load_stream(", "load_stream<", "C[", "st.global", "__ldg", "epi[", "store"):
            assert access not in head, access
        assert kernel.rindex("mma_round(") < kernel.index("if constexpr (T::PREFETCH_ROUNDS > 0) launch_dependents();")
        assert kernel.count("launch_dependents") == 1
        assert "prefetch.global.L2 [%0]" in _function(header, "void prefetch_l2(")
        if (family, text) in with_prefetch:
            assert _int(text, "PREFETCH_ROUNDS") == 2


def test_a_persistent_hopper_kernel_is_a_dependent_launch():
    """PDL: every thread waits for the previous grid after the barriers are set up and before any memory
    access but the first stages' L2 prefetch; the producer lets the next grid be scheduled once it has issued
    its last load."""
    files, plan = _hopper_sources(_split_spec(m=4096, n=4096, k=4096))
    traits = _namespace(files["ks.cu"], "hopper")
    assert "static constexpr int A_PARTS = 1;" in traits  # no multicast: B's boxes are the prefetched stream
    assert f"static constexpr int TILE_GROUPS = 1, TILES = {plan.tiles};" in traits
    assert PERSISTENT_LAUNCH in traits
    header, common = files["dg/hopper_persistent.cuh"], files["dg/hopper_common.cuh"]
    kernel = _function(header, "persistent_kernel(")
    _assert_only_prefetches_before_the_wait(kernel, common)
    # The block's first tile, its first STAGES k-iterations (no more than K has); one tile a block only.
    assert "prefetch_first_stages<T>(&tmap_a, &tmap_b, TILES, TILES_M, 0);" in kernel
    prologue = _function(common, "void prefetch_first_stages(")
    assert "if (int(blockIdx.x) < tiles && tiles <= int(gridDim.x)) {" in prologue
    assert "const TileOf<T> tile = tile_at<T>(int(blockIdx.x), tiles_m);" in prologue
    assert "for (int kt = 0; kt < (T::STAGES < T::K_ITERS ? T::STAGES : T::K_ITERS); ++kt)" in prologue
    wait = kernel.index("wait_for_predecessor();")
    assert kernel.index("__syncthreads();") < wait < kernel.index("issue_stage<T, false>(") < kernel.index(
        "launch_dependents();")
    assert kernel.index("launch_dependents();") < kernel.index("setmaxnreg.inc")  # the producer's branch
    launch = header[header.index("cudaError_t launch_persistent("):]
    # Dependent where the grid takes every block slot, or all but a sixteenth of them over one tile row (measured:
    # grids leaving more SMs idle run slower dependent).
    assert ("const bool dependent = grid == resident || (tiles == T::TILES_N && 16 * (resident - grid) <= resident);"
            in launch)
    assert "unsigned(T::SMEM_BYTES), dependent, 1};" in launch
    assert "return dg::launch(kernel, shape, stream, map_a, map_b, C, m_inner, ep, alpha, beta);" in launch
    _assert_dependent_launches_wait(files)


def test_a_box_of_few_rows_expects_only_its_bytes():
    files, plan = _hopper_sources(_split_spec(m=20))
    assert plan.a_box_rows == 24 and plan.block_m > 24
    traits = _namespace(files["ks.cu"], "hopper")
    assert f"BM = {plan.block_m}," in traits
    assert "static constexpr bool A_ROWS_FOLLOW_M = true;" in traits
    assert "static constexpr int A_BOX_ROWS = 24;" in traits
    assert "{ 20, 8192, 24, dg::hopper::AT_MN, 0 },  // m[20]" in traits  # A's map: 20 rows, boxes of 24
    common = files["dg/hopper_common.cuh"]
    # A stage expects A's box's bytes, not BM rows' (Config::STAGE_TX_BYTES), with fixed rows as here.
    assert ("(T::A_ROWS_FOLLOW_M && T::A_BOX_ROWS < T::BM ? T::A_BOX_ROWS * T::BK * int(sizeof(typename T::A_t))\n"
            "                                                   : A_STAGE_BYTES) + B_STAGE_BYTES;") in common
    assert re.search(r": unsigned\(Cfg::STAGE_TX_BYTES\);", _function(files["dg/hopper_persistent.cuh"],
                                                                    "persistent_kernel("))
    assert "mbar_expect_tx(&full[stage], tx_bytes);" in _function(common, "void issue_stage(")
    assert "box[d] = Op::DIMS[d].box != 0 ? Op::DIMS[d].box : " in _function(common, "bool encode(")
    assert "A: a box of 24 rows" in files["ks.cu"]  # the header comment says so


def test_run_time_rows_cut_a_s_box_when_the_map_is_encoded():
    spec = parse_spec(
        {"name": "rt", "arch": "sm_90a", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 64}, "n": 4096, "k": 4096},
         "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}})
    views = analyse(spec)
    files = render_sources(spec, views, make_plan(views, get_arch("sm_90a"), "hopper"), plan_baseline(views),
                           get_arch("sm_90a"))
    cu = files["rt.cu"]
    ranged = [text for family, text in _family_sections(cu)
              if family == "hopper" and "static constexpr bool rows_at_run_time = true;" in text]
    assert ranged, "a hopper kernel for a range of rows"
    traits = ranged[0]
    # A's map: its rows (size 0) and its box (0) are the launch's; the box rows follow them.
    assert re.search(r"\{ 0, 8192, 0, dg::hopper::AT_MN, 0 \},  // m\[64\]", traits)
    assert "static constexpr bool A_ROWS_FOLLOW_M = true;" in traits
    assert "static constexpr int A_BOX_ROWS = 0;" in traits
    variant = re.search(r"return dg::hopper::launch_(\w+)<Traits>\(A, B, C, m, ", traits).group(1)
    common = files["dg/hopper_common.cuh"]
    encode = _function(common, "bool encode(")
    assert "dims[d] = Op::DIMS[d].size != 0 ? Op::DIMS[d].size : m_inner;" in encode
    assert "box[d] = Op::DIMS[d].box != 0 ? Op::DIMS[d].box : cuuint32_t(a_box_rows<T>(int(m_inner)));" in encode
    assert "return m_inner < T::BM ? (m_inner + 7) / 8 * 8 : T::BM;" in _function(common, "constexpr int a_box_rows(")
    # Each stage expects the bytes of the box the map was encoded with, not STAGE_TX_BYTES (the split kernel's body
    # is split_body, which the hopper and fp8_hopper split kernels share).
    body = "void split_body(" if variant == "split" else f"{variant}_kernel("
    kernel = _function(files[f"dg/hopper_{variant}.cuh"], body)
    assert re.search(r"const unsigned tx_bytes = T::rows_at_run_time && T::A_ROWS_FOLLOW_M\s+"
                     r"\? unsigned\(a_box_rows<T>\(M_INNER\) \* T::BK \* int\(sizeof\(typename T::A_t\)\) \+\s+"
                     r"Cfg::B_STAGE_BYTES\)", kernel)
    assert "const int M_INNER = T::rows_at_run_time ? m_inner_arg : T::M_INNER;" in kernel
    assert "mbar_expect_tx(&full[stage], tx_bytes);" in _function(common, "void issue_stage(")


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
    files, plan = _hopper_sources(spec, splits=2)
    assert plan.k_splits == 2
    assert "return dg::hopper::launch_split<Traits>(" in files["ks.cu"]
    for name, text in files.items():  # the whole folder: the .cu includes its dg/ headers
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = subprocess.run([*nvcc.compile_prefix(), "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                          "-Xptxas", "-v", "-c", str(tmp_path / "ks.cu"), "-o", str(tmp_path / "ks.o")],
                         capture_output=True, text=True, env=nvcc.run_env(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warning" not in out.stderr.lower(), out.stderr[-3000:]
    assert "split_kernel" in out.stderr  # ptxas reports the cluster kernel
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
    barrier = 'if constexpr (T::CONSUMERS > 1) asm volatile("bar.sync 1, %0;\\n" ::"n"(T::CONSUMERS * 128) : "memory");'
    for consumers in (1, 2):
        primary = next(p for p in plans if p.k_splits == 2 and p.consumers == consumers)
        plan = replace(make_plan(views, arch, "hopper"), primary=primary)
        files = render_sources(spec, views, plan, plan_baseline(views), arch)
        traits = _namespace(files["ks.cu"], "hopper")
        assert f"static constexpr int CONSUMERS = {consumers}," in traits
        assert "return dg::hopper::launch_split<Traits>(" in traits
        # The barrier (the two warpgroups') is the one CONSUMERS > 1 compiles in: after each warpgroup's last wgmma
        # is done (mma_tile ends with wgmma_wait<0>), before the first write of the partial tile.
        kernel = _function(files["dg/hopper_split.cuh"], "void split_body(")
        assert kernel.index("slice(acc,") < kernel.index(barrier) < kernel.index("partial[")
        mma = _function(files["dg/hopper_common.cuh"], "void mma_tile(")
        assert mma.rindex("wgmma_wait<0>();") > mma.rindex("wgmma_commit();")


PDL_ATTRIBUTE = "programmaticStreamSerializationAllowed = 1"
DECODE_SPECS = sorted((SPECS[0].parent / "bench").glob("decode_[0-9]*.yaml"))  # fixed sizes: run-time ones are slow

# How each shipped launcher sets LaunchShape::dependent (dg/launch.cuh: a programmatic dependent launch where it is
# true), by the launcher the .cu calls: its header, the text there that decides it, and whether the traits let it
# be true (the hopper persistent and multicast launchers decide at run time, from the grid they take).
LAUNCHERS = {
    "dg::cta::launch<": ("dg/cta.cuh", "unsigned(T::THREADS), unsigned(T::SMEM_BYTES), false, 1};", lambda t: False),
    "dg::gemv::launch<": ("dg/gemv.cuh", "T::SPLITS > 1 || T::DEPENDENT_LAUNCH, unsigned(T::SPLITS)};",
                          lambda t: _int(t, "SPLITS") > 1 or _flag(t, "DEPENDENT_LAUNCH")),
    "dg::tcgemv::launch<": ("dg/tcgemv.cuh", "unsigned(T::BLOCKS), unsigned(T::THREADS), 0, true, 1};",
                            lambda t: not _flag(t, "A_STAGED")),
    "dg::splitk::launch<": ("dg/splitk.cuh", "unsigned(T::LAUNCH_SMEM_BYTES), true,\n", lambda t: True),
    "dg::dot::launch<": ("dg/dot.cuh", "unsigned(Grid<T>::BLOCKS), unsigned(T::THREADS), 0u, true, 1u};",
                         lambda t: True),
    "dg::hopper::launch_persistent<": ("dg/hopper_persistent.cuh", "unsigned(T::SMEM_BYTES), dependent, 1};",
                                       lambda t: True),
    "dg::hopper::launch_split<": ("dg/hopper_split.cuh", "unsigned(T::SMEM_BYTES), true, unsigned(T::SPLITS)};",
                                  lambda t: True),
    "dg::hopper::launch_multicast<": ("dg/hopper_multicast.cuh", "unsigned(T::SMEM_BYTES), dependent,\n",
                                      lambda t: True),
}


def _takes_dependent_launch(files: dict[str, str], cu: str) -> bool:
    """Whether any kernel of the .cu can be launched as a programmatic dependent launch: by its traits and the
    header its launch() instantiates, which must set LaunchShape::dependent as LAUNCHERS says."""
    dependent = False
    for _, text in _family_sections(cu):
        calls = set(re.findall(r"(dg::\w+::launch\w*<)Traits", text))
        assert len(calls) == 1 and calls <= set(LAUNCHERS), calls
        header, decides, when = LAUNCHERS[calls.pop()]
        assert decides in files[header], (header, decides)
        dependent |= when(text)
    tcgemv = files.get("dg/tcgemv.cuh")
    if tcgemv:  # the staged kernel is a plain launch, the register-stream one a dependent one
        launch = tcgemv[tcgemv.index("cudaError_t launch(const"):]
        assert (launch.index("if constexpr (T::A_STAGED) {") < launch.index("SMEM_BYTES), false, 1};")
                < launch.index("} else {") < launch.index("0, true, 1};"))
    if dependent:
        _assert_dependent_launches_wait(files)
    return dependent


def _readme_and_dependent(spec, views, arch, family=None):
    """Whether the README names a programmatic dependent launch, whether the .cu takes one, the plan, the README."""
    plan = make_plan(views, arch, family)
    files = render_sources(spec, views, plan, plan_baseline(views), arch)
    readme = files["README.md"]
    return ("Programmatic dependent launch" in readme, _takes_dependent_launch(files, files[f"{spec.name}.cu"]), plan,
            readme)


@pytest.mark.parametrize("path", DECODE_SPECS, ids=lambda p: p.stem)
def test_readme_says_when_the_launch_is_programmatically_dependent(path):
    """A programmatic dependent launch changes what the next kernel in the caller's stream may assume (it may start
    before this one completes), so the README says so exactly where the launcher can take one, in every family the
    decode shapes reach (each family preferred where its gates allow)."""
    spec = load_spec(path)
    views = analyse(spec)
    gated = family_gates(views, get_arch("sm_90a"))
    for family in FAMILIES:
        if gated[family]:  # --family refuses a family whose gates refuse the problem
            continue
        says, dependent, plan, _ = _readme_and_dependent(spec, views, get_arch("sm_90a"), family)
        assert says == dependent, plan.family


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_readme_and_launch_agree_on_every_example_spec(path):
    spec = load_spec(path)
    views = analyse(spec)
    for arch in ("sm_90a", "sm_80"):
        if pinned_elsewhere(spec, arch):
            continue
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


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_the_header_echoes_the_spec_it_was_generated_from(path):
    """The .cu's header holds the spec as YAML (an operand a line) that reads back as the spec itself."""
    from dgemm_cli.render import spec_yaml

    spec = load_spec(path)
    cu = render(spec)[f"{spec.name}.cu"]
    echoed = spec_yaml(spec.to_dict())
    assert "\n".join(f"//   {line}" for line in echoed.splitlines()) in cu
    assert yaml.safe_load(echoed) == spec.to_dict()


# Fixed-size specs whose kernels cover every family: the examples, a decode bench a small-M family takes, the f32
# skinny product (splitk over FFMA tiles with run-time loader dispatch), and a full reduction (dot).
HEADER_SPECS = [p for p in SPECS if not load_spec(p).dynamic] + [
    SPECS[0].parent / "bench" / "decode_8x4096x4096.yaml", SPECS[0].parent / "f32" / "f32_skinny.yaml",
    SPECS[0].parent / "bench" / "fullred_dot_16M_f16.yaml"]


@pytest.mark.parametrize("path", HEADER_SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("family", [None, "splitk", "cta"])
def test_the_header_states_each_kernels_plan_as_explain_does(path, family):
    """A plan's sentences are written once: its decisions grouped by what decided them (constraints.decision_lines,
    from the Decisions `explain` prints one a line) and every line of the plan's detail_lines() (what `explain` prints
    below the decisions) are lines of the .cu's header comment, for the primary kernel and its run-time fallback, in
    every family."""
    spec = load_spec(path)
    views = analyse(spec)
    arch = get_arch("sm_90a")
    if family is not None and family_gates(views, arch)[family]:
        return
    plan = make_plan(views, arch, family)
    cu = render_sources(spec, views, plan, plan_baseline(views), arch)[f"{spec.name}.cu"]
    header = cu[:cu.index("#include")].splitlines()
    for kernel in plan.kernels:
        for line in decision_lines(kernel.decisions) + kernel.detail_lines():
            assert f"//   {line}" in header, (kernel.family, line)
