"""The Python API (`import deepgemm`): specs from dicts and builders read as the YAML path reads them, the kernel
cache's key, and the cache under concurrent processes and threads. Only the two `slow` tests compile; the others
replace the cache's build step (and the library loader) with fakes, so they need neither nvcc nor a GPU."""

from __future__ import annotations

import ctypes
import functools
import json
import multiprocessing
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

import deepgemm
import deepgemm.cache as cache
import deepgemm.kernel as kernel_module
from deepgemm.kernel import Kernel, parse_prototype
from dgemm_cli.cli import main
from dgemm_cli.spec import load_spec

from .conftest import REPO, SPECS

FAKE_NVCC = "13.0.fake"
FAKE_GENERATOR = "0.0.0+test"
SMALL = {"name": "small", "dtype": "f32", "gemm": {"m": 64, "n": 48, "k": 32},
         "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}


# --------------------------------------------------------------------------------------------------- specs


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_a_dict_reads_as_its_yaml_file(path):
    assert deepgemm.spec_from_dict(yaml.safe_load(path.read_text())) == load_spec(path)
    assert deepgemm.spec_from_yaml(path) == load_spec(path)


BAD = [
    ({**SMALL, "operands": {"A": {"layuot": "row"}}}, "operands.A.layuot"),
    ({k: v for k, v in SMALL.items() if k != "name"}, "name"),
    ({**SMALL, "dtype": "f64"}, "dtype"),
    ({**SMALL, "gemm": {"m": 64, "n": 48}}, "gemm.k"),
    ({**SMALL, "gemm": {"m": 64, "n": 48, "k": 32}, "contraction": "mk,kn->mn"}, "gemm/contraction"),
    ({"name": "c", "contraction": "ab,bc,cd->ad", "sizes": {"a": 2, "b": 2, "c": 2, "d": 2}}, "contraction"),
]


@pytest.mark.parametrize(("data", "key"), BAD, ids=[key for _, key in BAD])
def test_a_bad_dict_raises_the_error_gen_prints_for_its_yaml(tmp_path, data, key):
    with pytest.raises(deepgemm.SpecError) as from_dict:
        deepgemm.spec_from_dict(data)
    err = from_dict.value
    assert err.key == key and err.path == "<dict>"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out = CliRunner().invoke(main, ["gen", str(path), "-o", str(tmp_path / "out"), "--untuned"])
    assert out.exit_code == 2
    assert out.stderr.strip() == f"error: {path}: {err.key}: {err.problem}. Fix: {err.fix}"


def _yaml_spec(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def test_gemm_is_the_yaml_gemm(tmp_path):
    expected = _yaml_spec(tmp_path, "name: g\narch: sm_90a\ndtype: bf16\ngemm: {m: 64, n: 128, k: 32}\n"
                                    "operands: {A: {layout: row}, B: {layout: col}, C: {layout: row}}\n")
    assert deepgemm.gemm(64, 128, 32, name="g") == expected
    assert deepgemm.gemm(np.int64(64), 128, 32, name="g") == expected  # numpy sizes read as ints
    dynamic = _yaml_spec(tmp_path, "name: g\narch: sm_80\ndtype: f16\ngemm: {m: {min: 1, max: 64}, n: 128, k: 32}\n"
                                   "operands: {A: {layout: row}, B: {strides: [1, 32]}, C: {layout: row, align: 16}}\n"
                                   "beta: 1.0\n")
    built = deepgemm.gemm((1, 64), 128, 32, name="g", arch="sm_80", dtype="f16", B=deepgemm.view([1, 32]),
                          C=deepgemm.view(align=16), beta=1.0)
    assert built == dynamic and built.dynamic == {"m": (1, 64)}
    batched = _yaml_spec(tmp_path, "name: g\narch: sm_90a\ndtype: bf16\ngemm: {m: 64, n: 128, k: 32, batch: 4}\n"
                                   "operands: {A: {layout: row}, B: {layout: col}, C: {layout: col}}\n")
    assert deepgemm.gemm(64, 128, 32, batch=4, name="g", c_layout="col") == batched


def test_contraction_is_the_yaml_contraction(tmp_path):
    expected = _yaml_spec(tmp_path, "name: conv\ndtype: bf16\ncontraction: \"nchw,kc->nkhw\"\n"
                                    "sizes: {n: 8, c: 256, h: 56, w: 56, k: 512}\n"
                                    "operands: {A: {strides: [802816, 3136, 56, 1]}, B: {byte_strides: [512, 2]}}\n"
                                    "epilogue:\n  - bias: {letters: k}\n  - activation: relu\n")
    spec = deepgemm.contraction("nchw,kc->nkhw", sizes={"n": 8, "c": 256, "h": 56, "w": 56, "k": 512},
                                A=deepgemm.view([802816, 3136, 56, 1]), B={"byte_strides": (512, 2)}, name="conv",
                                epilogue=[{"bias": {"letters": "k"}}, {"activation": "relu"}])
    assert spec == expected


def test_builders_name_specs_by_shape_and_content_and_report_bad_sizes_by_key():
    a, b = deepgemm.gemm(64, 128, 32), deepgemm.gemm(64, 128, 32, b_layout="row")
    assert a.name.startswith("gemm_64x128x32_") and b.name.startswith("gemm_64x128x32_") and a.name != b.name
    assert deepgemm.gemm(64, 128, 32).name == a.name  # a name is a function of the content
    assert deepgemm.gemm((1, 256), 8, 8).name.startswith("gemm_1to256x8x8_")
    with pytest.raises(deepgemm.SpecError) as err:
        deepgemm.gemm("big", 128, 32)
    assert err.value.key == "gemm.m"
    with pytest.raises(deepgemm.SpecError) as err:
        deepgemm.contraction("mk,kn->mn", sizes={"m": 4, "k": 4})
    assert err.value.key == "sizes.n"


def test_the_readme_example_reads_its_specs():
    """The README's Python API example up to its first stage (the rest builds: run by hand, see the slow tests)."""
    import re

    code = re.search(r"## Python API\n.*?```python\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    names: dict = {}
    exec(code.split("\ngenerated = ")[0], names)
    assert names["spec"].name == "my_gemm" and names["conv"].contraction == "nchw,kc->nkhw"


# ------------------------------------------------------------------------------------------------ the key


def _fake_toolchain(mp: pytest.MonkeyPatch | None = None) -> None:
    """The key's compiler and generator sources as constants: the key tests need no nvcc."""
    for name, value in (("nvcc_version", lambda: FAKE_NVCC), ("generator_version", lambda: FAKE_GENERATOR)):
        if mp is not None:
            mp.setattr(cache, name, value)
        else:
            setattr(cache, name, value)


def _key_in_child(queue, spec_dict: dict) -> None:
    _fake_toolchain()
    queue.put(deepgemm.cache_key(deepgemm.spec_from_dict(spec_dict)))


def test_the_key_is_the_same_in_another_process(monkeypatch):
    _fake_toolchain(monkeypatch)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_key_in_child, args=(queue, SMALL))
    child.start()
    key = queue.get(timeout=120)
    child.join(timeout=60)
    assert key == deepgemm.cache_key(deepgemm.spec_from_dict(SMALL))


def test_the_key_changes_with_each_ingredient_and_only_with_those(monkeypatch, tmp_path):
    _fake_toolchain(monkeypatch)
    spec = deepgemm.spec_from_dict(SMALL)
    base = deepgemm.cache_key(spec)
    assert len(base) == 64 and deepgemm.cache_key(spec, "sm_90a") == base  # the spec's arch is the default
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    assert deepgemm.cache_key(load_spec(path)) == base  # where the spec came from is not its content
    assert deepgemm.cache_key(deepgemm.spec_from_dict({**SMALL, "dtype": "float32"})) == base  # an alias: same spec
    changed = {
        "content": deepgemm.cache_key(deepgemm.spec_from_dict({**SMALL, "beta": 1.0})),
        "name": deepgemm.cache_key(deepgemm.spec_from_dict({**SMALL, "name": "other"})),
        "arch": deepgemm.cache_key(spec, "sm_80"),
    }
    monkeypatch.setattr(cache, "generator_version", lambda: "0.0.0+template-edited")
    changed["generator"] = deepgemm.cache_key(spec)
    _fake_toolchain(monkeypatch)
    monkeypatch.setattr(cache, "nvcc_version", lambda: "13.1.0")
    changed["nvcc"] = deepgemm.cache_key(spec)
    _fake_toolchain(monkeypatch)
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DSOMETHING")
    changed["flags from the environment"] = deepgemm.cache_key(spec)
    monkeypatch.delenv("NVCC_APPEND_FLAGS")
    monkeypatch.setattr(cache, "nvcc_flags", lambda arch: ["-O2"])
    changed["flags"] = deepgemm.cache_key(spec)
    assert len({base, *changed.values()}) == 1 + len(changed), changed


def test_the_generator_version_covers_the_templates():
    version = cache.generator_version()
    assert version.startswith(f"{deepgemm.__version__}+") and len(version.split("+")[1]) == 16


# ------------------------------------------------------------------------------------------ the cache, faked


class FakeLibrary:
    """What open_library returns in these tests: every symbol a function that returns 0."""

    def __init__(self, path: str):
        assert Path(path).read_bytes() == b"fake library\n"

    def __getattr__(self, name: str):
        def entry(*args):
            return 0
        return entry


def fake_build(spec, arch, directory: Path, *, count_file: Path, delay: float) -> cache.Entry:
    """The cache's build step without a compiler: it sleeps (a build takes time: others must wait for it), counts
    itself in `count_file` and writes a fake library."""
    time.sleep(delay)
    with open(count_file, "a") as f:
        f.write(f"{spec.name} {directory}\n")
    library = directory / "build" / arch / f"lib{spec.name}.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"fake library\n")
    prototype = (f"cudaError_t {spec.name}(const float* A, const float* B, float* C, float alpha, float beta, "
                 "cudaStream_t stream)")
    return cache.Entry("", spec.name, arch, library.relative_to(directory).as_posix(), prototype, "0" * 64)


def refuse_build(spec, arch, directory: Path) -> cache.Entry:
    raise AssertionError("a warm cache must not build")


def _install_fakes(count_file: Path | None, delay: float, mp: pytest.MonkeyPatch | None = None) -> None:
    _fake_toolchain(mp)
    build = functools.partial(fake_build, count_file=count_file, delay=delay) if count_file else refuse_build
    for module, name, value in ((cache, "build_entry", build), (kernel_module, "open_library", FakeLibrary)):
        if mp is not None:
            mp.setattr(module, name, value)
        else:
            setattr(module, name, value)


def _compile_in_child(queue, barrier, root: str, count_file: str | None, spec_dict: dict) -> None:
    _install_fakes(Path(count_file) if count_file else None, delay=1.0)
    if barrier is not None:
        barrier.wait(timeout=120)
    kernel = deepgemm.compile(deepgemm.spec_from_dict(spec_dict), cache=root)
    queue.put(str(kernel.library))


def _run_children(count: int, root: Path, count_file: Path | None, together: bool) -> list[str]:
    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(count) if together else None
    children = [ctx.Process(target=_compile_in_child, args=(queue, barrier, str(root),
                                                            str(count_file) if count_file else None, SMALL))
                for _ in range(count)]
    for child in children:
        child.start()
    libraries = [queue.get(timeout=180) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    return libraries


def _entries(root: Path) -> list[Path]:
    return [p for p in root.glob("*/*") if p.is_dir()]


def test_two_processes_building_one_key_make_one_artifact(tmp_path):
    root, count_file = tmp_path / "cache", tmp_path / "builds.txt"
    libraries = _run_children(2, root, count_file, together=True)
    assert len(count_file.read_text().splitlines()) == 1
    (entry,) = _entries(root)  # no second entry, no temporary folder left behind
    assert libraries == [str(entry / "build" / "sm_90a" / "libsmall.so")] * 2
    marker = json.loads((entry / cache.MARKER).read_text())
    assert marker["key"] == entry.name and marker["name"] == "small"


def test_threads_asking_at_once_build_once(tmp_path, monkeypatch, capfd):
    count_file = tmp_path / "builds.txt"
    _install_fakes(count_file, 0.5, monkeypatch)
    monkeypatch.setenv("DEEPGEMM_CACHE", str(tmp_path / "cache"))
    spec, threads = deepgemm.spec_from_dict(SMALL), 8
    barrier, kernels = threading.Barrier(threads), []

    def ask() -> None:
        barrier.wait()
        kernels.append(deepgemm.compile(spec))

    workers = [threading.Thread(target=ask) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(count_file.read_text().splitlines()) == 1
    assert len(kernels) == threads and all(k is kernels[0] for k in kernels)  # one library, opened once
    assert kernels[0].library.is_relative_to(tmp_path / "cache")
    err = capfd.readouterr().err
    assert err.count("deepgemm: building small for sm_90a (cached in ") == 1 and len(err.splitlines()) == 1
    kernels[0](1, 2, 3)  # the fake entry point: A, B, C, and alpha, beta, stream by default


def test_a_second_process_loads_a_warm_cache_without_building(tmp_path, monkeypatch):
    root, count_file = tmp_path / "cache", tmp_path / "builds.txt"
    _install_fakes(count_file, 0.0, monkeypatch)
    first = deepgemm.compile(deepgemm.spec_from_dict(SMALL), cache=root)
    assert _run_children(1, root, None, together=False) == [str(first.library)]  # its build step raises
    assert len(count_file.read_text().splitlines()) == 1


def test_an_entry_without_its_marker_is_rebuilt_and_a_failed_build_leaves_nothing(tmp_path, monkeypatch):
    root, count_file = tmp_path / "cache", tmp_path / "builds.txt"
    _install_fakes(count_file, 0.0, monkeypatch)
    spec = deepgemm.spec_from_dict(SMALL)
    entry = deepgemm.compile(spec, cache=root).library.parents[2]
    (entry / cache.MARKER).write_text("{")  # not whole
    assert deepgemm.compile(spec, cache=root).library == entry / "build" / "sm_90a" / "libsmall.so"
    assert len(count_file.read_text().splitlines()) == 2

    def failing(spec, arch, directory):
        (directory / "half-written.cu").write_text("")
        raise deepgemm.BuildError("nvcc said no")

    monkeypatch.setattr(cache, "build_entry", failing)
    other = deepgemm.spec_from_dict({**SMALL, "name": "other"})
    with pytest.raises(deepgemm.BuildError, match="nvcc said no"):
        deepgemm.compile(other, cache=root)
    assert _entries(root) == [entry]


def test_a_cache_folder_that_cannot_be_made_is_a_cache_error(tmp_path, monkeypatch):
    _install_fakes(tmp_path / "builds.txt", 0.0, monkeypatch)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DEEPGEMM_CACHE", str(tmp_path / "file" / "cache"))
    with pytest.raises(deepgemm.CacheError, match="Fix: set DEEPGEMM_CACHE to a folder you can write"):
        deepgemm.compile(deepgemm.spec_from_dict(SMALL))


def test_the_cache_dir_is_deepgemm_cache_or_the_user_cache_dir():
    assert deepgemm.cache_dir({"DEEPGEMM_CACHE": "/x/y"}) == Path("/x/y")
    assert deepgemm.cache_dir({}).parts[-2:] == ("deepgemm", "kernels")


# ------------------------------------------------------------------------------------------------ the kernel


def test_a_kernel_binds_its_arguments_from_the_prototype():
    calls = []

    def entry(*args):
        calls.append(args)
        return 0 if args[0] else 1

    prototype = ("cudaError_t k(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, "
                 "const __nv_bfloat16* bias, int64_t m, float alpha, float beta, cudaStream_t stream)")
    result, name, params = parse_prototype(prototype)
    assert (result, name) == ("cudaError_t", "k") and params[0].ctype == "const __nv_bfloat16*"
    kernel = Kernel("k", "sm_90a", Path("libk.so"), prototype, params, entry)
    assert kernel.pointer_names == ("A", "B", "C", "bias")
    kernel(1, 2, 3, 4, m=16)
    kernel(1, 2, C=3, bias=4, m=8, beta=1.0, stream=99)
    assert calls == [(1, 2, 3, 4, 16, 1.0, 0.0, 0), (1, 2, 3, 4, 8, 1.0, 1.0, 99)]
    with pytest.raises(TypeError, match="missing 'm'"):
        kernel(1, 2, 3, 4)
    with pytest.raises(TypeError, match="an int"):
        kernel(1, 2, 3, 4.5, m=1)
    with pytest.raises(deepgemm.KernelCallError, match="returned 1 \\(cudaErrorInvalidValue") as err:
        kernel(0, 2, 3, 4, m=1)
    assert err.value.status == 1


# ---------------------------------------------------------------------------------------- real builds (slow)


@pytest.mark.slow
def test_compile_builds_a_host_kernel_once_and_it_computes_the_product(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPGEMM_CACHE", str(tmp_path / "cache"))
    spec = deepgemm.gemm(64, 48, 32, dtype="f32", arch="cpu", name="tiny_host")
    kernel = deepgemm.compile(spec)
    assert kernel.prototype == ("int tiny_host(const float* A, const float* B, float* C, float alpha, float beta, "
                                "int threads)")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32), dtype=np.float32)
    b = np.asfortranarray(rng.standard_normal((32, 48), dtype=np.float32))  # b_layout col
    c = np.ones((64, 48), np.float32)
    kernel(a.ctypes.data, b.ctypes.data, c.ctypes.data, alpha=2.0, beta=1.0, threads=1)
    np.testing.assert_allclose(c, 2.0 * (a @ b) + 1.0, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(cache, "build_entry", refuse_build)
    cache._LOADED.clear()  # as a new process: the marker and the library, nothing built
    assert deepgemm.compile(spec).library == kernel.library


@pytest.mark.slow
def test_generate_build_load_a_cuda_kernel(tmp_path):
    spec = deepgemm.gemm(64, 48, 32, name="tiny_cuda")
    generated = deepgemm.generate(spec, tmp_path)
    assert generated.directory == tmp_path / "tiny_cuda" and generated.header.is_file()
    assert generated.prototype.startswith("cudaError_t tiny_cuda(const __nv_bfloat16* A")
    built = deepgemm.build(generated)
    assert built.library == tmp_path / "tiny_cuda" / "build" / "sm_90a" / "libtiny_cuda.so" and not built.cached
    assert built.library.is_file() and built.static_library.is_file() and built.kernels
    assert deepgemm.build(generated).cached
    kernel = deepgemm.load(built)  # dlopen needs no GPU; the null check answers before any launch
    assert kernel.prototype == generated.prototype == deepgemm.load(generated.directory).prototype
    with pytest.raises(deepgemm.KernelCallError) as err:
        kernel(0, 0, 0)
    assert err.value.status == 1
    assert isinstance(ctypes.CDLL(str(built.library)).tiny_cuda, ctypes._CFuncPtr)
