"""Template context of the `cpu` family (templates/cpu/traits.cpp.j2): the traits dg/cpu_gemm.hpp's engine is
instantiated with. The views reach it as a dg::cpu::Shape (each role's segments with a stride per slot) and the
epilogue as `finish_run`, which turns a run of output elements' f32 sums into the stored values."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.cpu import SMALL_M, CpuPlan
from dgemm_cli.families.cpu.cost import MICRO_TILES
from dgemm_cli.renderers import Body, float_literal
from dgemm_cli.renderers.host import SLOTS
from dgemm_cli.spec import Spec
from dgemm_cli.views import ROLES, ProblemViews

CPP_TYPES = {"f32": "float", "f16": "dg::cpu::f16", "bf16": "dg::cpu::bf16"}
# The preprocessor test that selects each ISA's micro-kernel in dg/cpu_gemm.hpp, in its order.
ISA_CONDITIONS = (("avx512", "#if defined(__AVX512F__)"), ("avx2", "#elif defined(__AVX2__) && defined(__FMA__)"),
                  ("portable", "#else"))
SLOT_ENUM = {"A": "kA", "B": "kB", "C": "kC", "D": "kD", "bias": "kBias", "scale": "kScale",
             "residual": "kResidual"}


def _role(views: ProblemViews, role: str) -> str:
    """A dg::cpu::Role initializer: {nseg, {{size, {stride per slot}}, ...}} (outer -> inner)."""
    segs = views.roles[role].segments
    if not segs:
        return "{0, {}}"
    inits = []
    for seg in segs:
        strides = dict(seg.strides)
        inits.append(f"{{{seg.size}, {{{', '.join(str(strides.get(x, 0)) for x in SLOTS)}}}}}")
    return f"{{{len(segs)}, {{{', '.join(inits)}}}}}"


def context(spec: Spec, views: ProblemViews, plan: CpuPlan, base: dict) -> dict:
    out = spec.output
    steps = []
    for st in spec.epilogue:
        steps.append({"kind": st.kind, "desc": st.describe(), "activation": st.activation,
                      "slot": SLOT_ENUM[st.view.name] if st.view is not None else None,
                      "type": CPP_TYPES[st.view.dtype] if st.view is not None else None,
                      "clamp": [float_literal(x) for x in st.clamp or ()]})
    # C always: the C API takes beta at run time, and finish_run reads C at its own element wherever beta != 0, the
    # spec's beta 0 beside D notwithstanding.
    finish_slots = ["C", "D" if spec.D is not None else None,
                    *(op.name for op in spec.extra_operands if op.name != "D")]
    return {
        **base,
        "a_type": CPP_TYPES[spec.A.dtype], "b_type": CPP_TYPES[spec.B.dtype], "c_type": CPP_TYPES[spec.C.dtype],
        "out_type": CPP_TYPES[out.dtype], "out_slot": SLOT_ENUM[out.name],
        "shape": {r: _role(views, r) for r in ROLES},
        "offsets": ", ".join(str(spec.operand(x).offset) if x in views.operands else "0" for x in SLOTS),
        "out_slots": [SLOT_ENUM[x] for x in finish_slots if x is not None],
        "kc": plan.kc, "mc": plan.mc, "nc": plan.nc, "steps": steps,
        "micro_tiles": MICRO_TILES, "isa_conditions": ISA_CONDITIONS, "small_m": SMALL_M,
        "small_rows": plan.small_rows, "blocked": plan.blocked,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: CpuPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("cpu/traits.cpp.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    return Body("cpu", text, f"cpu: {plan.summary}", tuple(decisions), headers=("dg/cpu_gemm.hpp",))
