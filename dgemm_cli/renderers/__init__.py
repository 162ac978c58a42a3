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
