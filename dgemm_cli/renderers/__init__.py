"""Per-family template contexts. Each module has `render_body(env, spec, views, plan, base) -> Body`,
rendering templates/<family>/body.cu.j2 into the namespace `<family>` of <name>.cu; each family's
`KernelFamily.renderer` names its module, and render.py dispatches on the plan's `family`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# cuTensorMapEncodeTiled's element type of an input, for the families that load through TMA (hopper, fp8_hopper;
# tcgemv's staged activation).
TMA_DTYPE = {"f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
             "e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}  # TMA moves e4m3 as bytes: no conversion on the way


# A fault seeded on purpose, for tests only (tests/test_bisect.py: `deepgemm bisect` must find it): where this
# environment variable names a fault (SEEDED_FAULTS), the renderer emits that wrong code. Unset, nothing changes.
SEEDED_FAULT_ENV = "DEEPGEMM_TEST_SEED_FAULT"
# "vector-guard": the cta loaders' run-time alignment check tests the promised alignment instead of the vector's,
# so a pointer the harness shifts off the vector's alignment takes the wide cp.async path (misaligned copies).
SEEDED_FAULTS = ("vector-guard",)


def seeded_fault(name: str) -> bool:
    """Whether the test-only fault `name` is asked for (SEEDED_FAULT_ENV); False unless a test sets it."""
    assert name in SEEDED_FAULTS, name
    return os.environ.get(SEEDED_FAULT_ENV, "") == name


@dataclass(frozen=True)
class Body:
    namespace: str  # the family name: the body defines <namespace>::launch(A, B, C, alpha, beta, stream)
    text: str
    title: str  # one line for the .cu header
    decisions: tuple[str, ...]
    includes: frozenset[str] = field(default_factory=frozenset)  # system headers the body needs
    requirements: tuple[str, ...] = ()  # what the kernel asks of the GPU and the caller (the generated README)
    headers: tuple[str, ...] = ()  # the shipped device headers the body instantiates (dg/<family>.cuh)
    # What its launcher does beyond the launch (render.LAUNCH_FACTS' names), where the code is in a shipped header
    # rather than in the body's text.
    facts: frozenset[str] = field(default_factory=frozenset)


def float_literal(x: float) -> str:
    """A C float literal that reads back as x (clamp bounds); infinities as INFINITY."""
    text = repr(float(x))
    if text in ("inf", "-inf"):
        return text.replace("inf", "INFINITY")
    return text + ("f" if "e" in text or "." in text else ".0f")


PORTABLE_CLUSTER = 8  # blocks a cluster may hold without cudaFuncAttributeNonPortableClusterSizeAllowed


def launch_attributes(smem_bytes: int, smem_symbol: str, cluster: int) -> tuple[list[tuple[str, str]], str]:
    """The kernel attributes a launch needs set once (attribute, value), and a sentence saying why:
    more than 48 KB of dynamic shared memory, or a cluster past the portable size."""
    settings, why = [], []
    if smem_bytes > 48 * 1024:
        settings.append(("cudaFuncAttributeMaxDynamicSharedMemorySize", smem_symbol))
        why.append("more than 48 KB of dynamic shared memory needs an opt-in")
    if cluster > PORTABLE_CLUSTER:
        settings.append(("cudaFuncAttributeNonPortableClusterSizeAllowed", "1"))
        why.append(f"a cluster of {cluster} blocks is past the portable {PORTABLE_CLUSTER}")
    if not why:
        return [], ""
    text = "; ".join(why) + ": once per device and instantiation."
    return settings, text[:1].upper() + text[1:]


def dependent_launch_note(when: str = "") -> str:
    """What a programmatic dependent launch (dg/launch.cuh: dg::launch with LaunchShape::dependent) means for the
    caller's stream; `when`: the condition under which the launcher takes it, if it does not always."""
    return (f"Programmatic dependent launch{when}: the kernel may start while the previous kernel in `stream` "
            "finishes, and waits for that kernel to complete before it reads or writes memory, so stream order holds "
            "as for any launch. It may also let the next kernel start before it completes: a next kernel that you "
            "launch with `cudaLaunchAttributeProgrammaticStreamSerialization` must call "
            "`cudaGridDependencySynchronize()` before it reads this kernel's output, as CUDA asks of any dependent "
            "launch; a plain launch after it waits as usual.")


def cluster_requirements(splits: int) -> tuple[str, ...]:
    """What a kernel whose K is split over a cluster of `splits` blocks asks of the GPU and gives back."""
    if splits == 1:
        return ()
    out = [f"Thread-block clusters of {splits} blocks: compute capability 9.0 or later.", dependent_launch_note()]
    if splits > PORTABLE_CLUSTER:
        out.append(f"{splits} blocks a cluster is past the portable {PORTABLE_CLUSTER}: a GPU or MIG partition that "
                   f"cannot co-schedule {splits} blocks makes the launch return a CUDA error "
                   "(cudaOccupancyMaxActiveClusters tells beforehand).")
    out.append("Deterministic: K is summed across the cluster in a fixed order, so repeated calls on the same "
               "data give bit-identical results. No workspace and no state between calls.")
    return tuple(out)


def scratch_requirement(scratch_bytes: int, what: str) -> str:
    """What a kernel whose K slices meet in a stream-ordered scratch buffer (splitk's and dot's groups) asks of the
    caller and gives back; `what`: the order its sums run in."""
    return (f"Deterministic: {what}, so repeated calls on the same data give bit-identical results. "
            f"Scratch: {scratch_bytes} bytes a call from cudaMallocAsync on the caller's stream (the device's "
            "current memory pool), freed with cudaFreeAsync after the second kernel: stream-ordered, so concurrent "
            "streams and graph capture (allocation nodes) are safe; no workspace argument and no state between "
            "calls.")
