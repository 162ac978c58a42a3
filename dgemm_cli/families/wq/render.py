"""Template context of the `wq` family (templates/wq/body.cu.j2): dg/wq.cuh's traits (the index maps of the weights,
their scales and zero points as Roles, one Seg a letter) and launch()."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.wq import WqPlan
from dgemm_cli.render import CTYPES
from dgemm_cli.renderers import Body
from dgemm_cli.spec import Spec
from dgemm_cli.spec.model import OperandView
from dgemm_cli.views import ProblemViews

ORDERS = {"linear": "dg::wq::LINEAR", "awq": "dg::wq::AWQ"}
FORMS = {"subtract": "dg::wq::SUBTRACT", "prescaled": "dg::wq::PRESCALED"}


def _segs(spec: Spec, views: ProblemViews, role: str, view: OperandView, blocks: dict[str, int]) -> list[str]:
    """A role's letters as dg::wq::Seg<size, block, stride, packed>, innermost first: one element of `view` per
    `blocks[x]` indices of letter x, its stride (0 where the view lacks the letter)."""
    out = []
    for x in reversed(views.roles[role].letters):
        stride = view.stride_of(x) if x in view.letters else 0
        packed = view.packing is not None and view.packing.along == x
        out.append(f"dg::wq::Seg<{spec.sizes[x]}, {blocks.get(x, 1)}, {stride}{', true' if packed else ''}>")
    return out


def _view_desc(view: OperandView) -> str:
    if view.packing is None:
        return f"{view.dtype} elements, strides {list(view.strides)} over '{view.letters}'"
    return f"{view.dtype}, {view.packing.describe(view.strides)} over '{view.letters}'"


def weights_context(spec: Spec, views: ProblemViews) -> dict:
    """B's fields for the traits: its description, bits, signedness, nibble order and Roles (dg: its k chunks)."""
    b = spec.B
    return {
        "desc": _view_desc(b), "bits": 8 if b.packing is None else 4, "signed": b.dtype in ("int4", "int8"),
        "order": ORDERS.get(b.packing.order if b.packing else "linear", "dg::wq::LINEAR"),
        "dg": b.packing is not None and b.packing.order == "dg", "k_chunks": -(-views.k // 64),
        "k": _segs(spec, views, "k", b, {}), "n": _segs(spec, views, "n", b, {}),
    }


def quant_context(spec: Spec, views: ProblemViews) -> tuple[dict, dict | None]:
    """The scales' and the zero points' fields for the traits (None: no zero points): dtype, Roles per block,
    and for the zero points their bits, nibble order and form."""
    sc, = spec.scales
    blocks = dict(sc.blocks)
    zero = spec.zeros[0] if spec.zeros else None
    scales = {"desc": f"{sc.view.dtype}, one a block of {', '.join(f'{x}: {n}' for x, n in sc.blocks)}",
              "ctype": CTYPES[sc.view.dtype],
              "k": _segs(spec, views, "k", sc.view, blocks), "n": _segs(spec, views, "n", sc.view, blocks)}
    zeros = None
    if zero is not None:
        z = zero.view
        zeros = {"desc": f"{zero.form}: " + _view_desc(z), "ctype": CTYPES[z.dtype],
                 "bits": 0 if z.dtype in ("f16", "bf16", "f32") else 8 if z.packing is None else 4,
                 "order": ORDERS[z.packing.order] if z.packing is not None else "dg::wq::LINEAR",
                 "form": FORMS[zero.form],
                 "k": _segs(spec, views, "k", z, blocks), "n": _segs(spec, views, "n", z, blocks)}
    return scales, zeros


def context(spec: Spec, views: ProblemViews, plan: WqPlan, base: dict) -> dict:
    weights = weights_context(spec, views)
    scales, zeros = quant_context(spec, views)
    return {**base, "index_type": plan.index_type, "threads": plan.threads, "cols": plan.cols, "rows": plan.rows,
            "ksplit": plan.ksplit, "tiles_n": plan.tiles_n, "blocks": plan.blocks,
            "weights": weights, "scales": scales, "zeros": zeros}


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: WqPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("wq/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    return Body("wq", text, f"wq: {plan.summary}", tuple(decisions), headers=("dg/wq.cuh",))
