"""Instrumented copies of the _nowait negative controls (variants.py) for session 20's call 4: the kernel's block 0
prints when it starts (%globaltimer) and the first bits of A it reads; the harness's writer prints when it starts
and when it restores. _dbg: the harness without the launch before the predecessor (as at 6c9f1cf), _dbgwarm: as
the harness is now.   python3 tools/session20/chain_debug.py SRC DST NAME..."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import copy_renamed  # noqa: E402

KERNEL_PRINT = ('\n  if (blockIdx.x == 0 && threadIdx.x == 0) { unsigned long long t_; '
                'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); '
                'printf("DBG kernel start %llu\\n", t_); }\n')
WRITER_OLD = ("  const unsigned long long start = dg_globaltimer();\n"
              "  while (dg_globaltimer() - start < idle_ns) __nanosleep(500);\n")
WRITER_NEW = WRITER_OLD + ('  if (blockIdx.x == 0 && threadIdx.x == 0)\n'
                           '    printf("DBG writer start %llu restore %llu\\n", start, dg_globaltimer());\n')


def make(src: pathlib.Path, dst: pathlib.Path, name: str, suffix: str) -> None:
    tmp = dst / ".one"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).symlink_to((src / name).resolve())
    (d,) = copy_renamed(tmp, dst, suffix)
    (tmp / name).unlink()
    tmp.rmdir()
    cu = d / f"{d.name}.cu"
    text = cu.read_text()
    text, n = re.subn(r"(__global__ void [^{]*_kernel\([^{]*\) \{)", lambda m: m.group(1) + KERNEL_PRINT, text, count=1)
    cu.write_text("#include <cstdio>\n" + text)
    h = d / "dg_harness.cuh"
    ht = h.read_text()
    assert WRITER_OLD in ht and n == 1, d
    ht = ht.replace(WRITER_OLD, WRITER_NEW)
    if suffix == "_dbg":
        warm = ("  const cudaError_t loaded = st.kernel(st.ptr, st.m, alpha, beta, st.stream);\n"
                "  if (loaded != cudaSuccess) dg_die_cuda(loaded, \"kernel under test (launch returned)\", __LINE__);\n"
                "  DG_CUDA(cudaGetLastError());\n")
        assert warm in ht
        ht = ht.replace(warm, "")
    h.write_text(ht)
    print(d.name, "instrumented")


if __name__ == "__main__":
    for name in sys.argv[3:]:
        for suffix in ("_dbg", "_dbgwarm"):
            make(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), name, suffix)
