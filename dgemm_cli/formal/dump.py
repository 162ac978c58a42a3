"""`deepgemm explain --dump-index`: each kernel's global accesses as the model states them (pure): the intermediates
in the order the kernel computes them, the address, what the guard lets through, and the values of the named
constants. This is the index IR the proofs are about, in the kernel's own spelling."""

from __future__ import annotations

from typing import Any

from dgemm_cli.formal.check import kernel_plans, models_of
from dgemm_cli.formal.expr import Const, Let, Var, children, cuda
from dgemm_cli.formal.model import Access, KernelModel
from dgemm_cli.views import ProblemViews


def _lets(e: Any, out: dict[str, str]) -> None:
    """The Lets under `e`, each after those it uses."""
    for k in children(e):
        _lets(k, out)
    if isinstance(e, Let):
        out.setdefault(e.name, f"{e.name} = {cuda(e.value)}")


def _names(e: Any, consts: dict[str, int], variables: dict[str, str]) -> None:
    if isinstance(e, Const) and e.name:
        consts.setdefault(e.name, e.value)
    if isinstance(e, Var):
        variables.setdefault(e.spelled or e.name, e.name)
    for k in children(e):
        _names(k, consts, variables)


def access_lines(a: Access) -> list[str]:
    lets: dict[str, str] = {}
    for e in (*a.always, a.count, a.address):
        _lets(e, lets)
    ranges = ", ".join(f"{cuda(r.lo)} <= {r.var.spelled or r.var.name} < {cuda(r.hi) if r.hi is not None else 'inf'}"
                       for r in a.ranges)
    width = f"vectors of {a.width} elements" if a.width > 1 else "single elements"
    lines = [f"  {a.text} ({a.kind}: {width})",
             f"    over {ranges}"]
    lines += [f"    {text}" for name, text in lets.items() if not name.endswith("_offset")]
    lines.append(f"    elements moved: {cuda(a.count)}")
    lines.append(f"    address: {a.operand} + {cuda(a.address.value if isinstance(a.address, Let) else a.address)}")
    return lines


def model_text(model: KernelModel) -> str:
    consts: dict[str, int] = {}
    variables: dict[str, str] = {}
    lines = [f"kernel {model.kernel} (index_t = {model.index_type})"]
    for a in model.accesses:
        lines += access_lines(a)
        bounds = [b for r in a.ranges for b in (r.lo, r.hi) if b is not None]
        for e in (*a.always, a.count, a.address, *bounds):
            _names(e, consts, variables)
    lines.append("  constants: " + ", ".join(f"{k} = {v}" for k, v in consts.items()))
    return "\n".join(lines)


def index_dump(views: ProblemViews, plan: Any) -> str:
    out = []
    for label, v, fp in kernel_plans(plan, views):
        found = models_of(v, fp, label)
        if isinstance(found, str):
            out.append(f"kernel {v.spec.name} {label}: no index dump ({found})")
            continue
        out += [model_text(m) for m in found]
    return "\n\n".join(out)
