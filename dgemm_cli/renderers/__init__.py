"""Per-family template contexts. Each module has `render_body(env, spec, views, plan, base) -> Body`,
rendering templates/<family>/body.cu.j2 into the namespace `<family>` of <name>.cu; render.py
dispatches through RENDERERS on the plan's `family`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Body:
    namespace: str  # the family name: the body defines <namespace>::launch(A, B, C, alpha, beta, stream)
    text: str
    title: str  # one line for the .cu header
    decisions: tuple[str, ...]
    includes: frozenset[str] = field(default_factory=frozenset)  # system headers the body needs


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
