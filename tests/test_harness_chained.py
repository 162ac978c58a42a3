"""verify launches the kernel under test right behind a kernel that writes all of its buffers (the harness's
dg_restore_after_idle_kernel), as an engine launches it behind the kernel that produced its inputs: a
programmatic dependent launch that touches memory before its griddepcontrol.wait must fail verify. The
self-test harness's naive kernel, launched dependent, with the wait (passes) and without it (fails)."""

from __future__ import annotations

import pytest

from dgemm_cli.render import HARNESS, template_dir

from .conftest import REPO
from .test_harness_dynamic import _compile, _nvcc, _run

SELFTEST = REPO / "tests" / "harness_selftest" / "selftest_harness.cu"


def test_every_verify_case_launches_the_kernel_behind_a_writer_of_its_buffers():
    text = (template_dir() / HARNESS).read_text()
    case = text[text.index("static DgCaseResult dg_verify_case("):]
    case = case[:case.index("\n}\n")]
    # The predecessor is queued right before the kernel under test, after the reference (which reads the inputs).
    assert case.index("dg_reference_sum_kernel") < case.index("dg_launch_predecessor(st, alpha, beta);") \
        < case.index("st.kernel(")
    writer = text[text.index("__global__ void __maxnreg__(32) dg_restore_after_idle_kernel"):]
    writer = writer[:writer.index("\n}\n")]
    # It lets the next grid in before it idles, and restores the buffers only after.
    assert writer.index("griddepcontrol.launch_dependents") < writer.index("dg_globaltimer() - start < idle_ns") \
        < writer.index("dst[w] = v0;")
    launch = text[text.index("static void dg_launch_predecessor("):]
    launch = launch[:launch.index("\n}\n")]
    assert "cudaMemsetAsync(list.dst[i], 0xFF, list.bytes[i], st.stream)" in launch  # NaN in every dtype
    # Saved, then one launch of the kernel (its first launch loads it and starts too late to overlap the writer),
    # then the NaN and the writer; the restore overwrites that launch's output.
    assert launch.index("cudaMemcpyAsync(st.saved[x].ptr") < launch.index("st.kernel(st.ptr, st.m, alpha, beta") \
        < launch.index("cudaMemsetAsync") < launch.index("dg_restore_after_idle_kernel<<<")
    # The largest carveout: an SM changes it only when empty, so a dependent launch needing shared memory would
    # otherwise wait for the predecessor to complete.
    assert "cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared" in launch


@pytest.mark.slow
@pytest.mark.parametrize("defines", [("-DSELFTEST_DEPENDENT",), ("-DSELFTEST_DEPENDENT", "-DSELFTEST_BROKEN=10")])
def test_the_selftest_compiles_as_a_dependent_launch(tmp_path, defines):
    _compile(_nvcc(), [SELFTEST], tmp_path / "selftest", template_dir(), ("-DSELFTEST_CASE=3", *defines))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("broken, want_rc", [(False, 0), (True, 1)])
def test_a_dependent_launch_that_reads_before_its_wait_fails_verify(tmp_path, broken, want_rc):
    exe = tmp_path / "selftest"
    defines = ("-DSELFTEST_CASE=3", "-DSELFTEST_DEPENDENT") + (("-DSELFTEST_BROKEN=10",) if broken else ())
    _compile(_nvcc(), [SELFTEST], exe, template_dir(), defines)
    rc, report = _run(exe, "verify", "--seeds", "1,2")
    assert rc == want_rc, report
    if broken:  # it read the NaN the predecessor left in the inputs until it restored them
        assert all(r["nan_elements"] > 0 for r in report["runs"]), report
