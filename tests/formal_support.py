"""What the formal tests share: a view's element offsets from the spec's letters (numpy), and an expression at every
point of an enumeration."""

from __future__ import annotations

import numpy as np

from dgemm_cli.formal.expr import evaluate


def view_addresses(views, operand: str, rows: int | None = None) -> np.ndarray:
    """Every element offset of `operand`'s view from its kernel pointer, from the spec's letters (`rows`: the
    run-time letter's size)."""
    op = views.spec.operand(operand)
    dyn = views.spec.run_time_letter
    sizes = [rows if (dyn and x == dyn[0] and rows is not None) else s for x, s in zip(op.letters, op.sizes)]
    if not sizes:
        return np.zeros(1, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    return sum(g.astype(np.int64) * st for g, st in zip(grids, op.strides)).ravel()


def at_points(e, pts: dict) -> np.ndarray:
    """`e` at every point of `pts` (a constant broadcast to them)."""
    n = len(next(iter(pts.values()))) if pts else 1
    return np.broadcast_to(np.asarray(evaluate(e, pts)), (n,))
