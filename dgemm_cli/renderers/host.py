"""The host backend's folder (arch cpu): <name>.cpp (the cpu family's traits and the C entry point), <name>.h,
dg/ (the engine's headers), a Makefile, a CMakeLists.txt, a README and plan.json, as text. `render.render_sources`
hands a host target's plan here; the views and the plan come from the same stages as a GPU target's."""

from __future__ import annotations

import hashlib
import json

import jinja2

from dgemm_cli import __version__
from dgemm_cli.arch import Arch
from dgemm_cli.families import FamilyPlan
from dgemm_cli.plan import BucketPlan, Plan
from dgemm_cli.renderers import Body
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews

# How `build` and the folder's Makefile compile <name>.cpp (the Makefile adds -march=$(MARCH), native by default,
# and -fopenmp): the flags plan.json records.
HOST_CXX_FLAGS = ["-std=c++17", "-O3"]
HOST_MARCH = "-march=native"
C_API_TYPES = {"f32": "float", "f16": "dg_f16", "bf16": "dg_bf16"}
# dg::cpu::Slot's order: a Seg's strides, Shape::offset and Args::ptr have one entry each.
SLOTS = ("A", "B", "C", "D", "bias", "scale", "residual")


def host_signature(spec: Spec) -> str:
    """The entry point's parameters: A, B, C, [D], [bias], [scale], [residual], [m], alpha, beta, threads."""
    params = [f"const {C_API_TYPES[spec.A.dtype]}* A", f"const {C_API_TYPES[spec.B.dtype]}* B",
              f"{'const ' if spec.D is not None else ''}{C_API_TYPES[spec.C.dtype]}* C"]
    params += [f"{'' if op.name == 'D' else 'const '}{C_API_TYPES[op.dtype]}* {op.name}" for op in spec.extra_operands]
    if spec.run_time_letter:
        params.append("int64_t m")
    return ", ".join(params + ["float alpha", "float beta", "int threads"])


def _null_checks(spec: Spec) -> str:
    """The pointers a call needs: A, B, the output and the epilogue's views always; C when it is the output or when
    beta != 0 (C beside D is read only for beta)."""
    checks = ["A == nullptr", "B == nullptr"]
    checks.append("(C == nullptr && beta != 0.0f)" if spec.D is not None else "C == nullptr")
    checks += [f"{op.name} == nullptr" for op in spec.extra_operands]
    return " || ".join(checks)


def host_context(spec: Spec, views: ProblemViews, base: dict, body: Body) -> dict:
    present = {"A", "B", "C", *(op.name for op in spec.extra_operands)}
    run_time = spec.run_time_letter
    example = ", ".join(["A", "B", "C", *(op.name for op in spec.extra_operands)]
                        + (["m"] if run_time else []) + ["1.0f", "0.0f", "0"])
    return {
        **base,
        "body": body,
        "c_signature": host_signature(spec),
        "narrow_types": sorted({C_API_TYPES[op.dtype] for op in (*spec.operands, *spec.extra_operands)}
                               - {"float"}),
        "null_checks": _null_checks(spec),
        "slot_pointers": ", ".join(x if x in present else "nullptr" for x in SLOTS),
        # The rows' extent: m times the m role's other letters (the run-time letter is its outermost).
        "m_extent": (f"m * {views.m // run_time[2]}" if run_time and views.m // run_time[2] > 1 else "m")
                    if run_time else str(views.m),
        "epilogue_desc": "; ".join(st.describe() for st in spec.epilogue),
        "out_name": spec.output.name, "has_d": spec.D is not None,
        "activations": any(st.activation or st.clamp for st in spec.epilogue),
        "cxx_flags": " ".join([*HOST_CXX_FLAGS]), "cmake_flags": "-O3",
        "example_args": example,
    }


def render_host_sources(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: Plan | BucketPlan, arch: Arch,
                        base: dict, body: Body, family_why: str, device_headers: dict[str, str]) -> dict[str, str]:
    """File name -> text for a host target. `plan`: the Plan or the one-bucket BucketPlan; `body`: its kernel's
    traits; `device_headers`: dg/ headers the .cpp includes, with their text."""
    k = {**host_context(spec, views, base, body), "family_why": family_why,
         "dg_files": sorted(device_headers)}
    out = {
        f"{spec.name}.cpp": env.get_template("host/kernel.cpp.j2").render(k=k),
        f"{spec.name}.h": env.get_template("host/header.h.j2").render(k=k),
        "Makefile": env.get_template("host/Makefile.j2").render(k=k),
        "CMakeLists.txt": env.get_template("host/CMakeLists.txt.j2").render(k=k),
        "README.md": env.get_template("host/README.md.j2").render(k=k),
        **device_headers,
    }
    digest = hashlib.sha256("".join(out[n] for n in sorted(out)).encode()).hexdigest()
    plan_json = {
        "schema_version": base["plan_schema_version"],
        "generator": f"deepgemm {__version__}",
        "arch": arch.name,
        "content_hash": digest,
        "spec": spec.to_dict(),
        "views": base["views_dict"],
        "plan": plan.to_dict(),
        "build": {"nvcc_flags": [], "cxx_flags": [*HOST_CXX_FLAGS, HOST_MARCH, "-fopenmp", "-fPIC"],
                  "arch_features": [], "kernel_smem": {}, "requires_arch": []},
    }
    out["plan.json"] = json.dumps(plan_json, indent=2) + "\n"
    return out


def primary_of(plan: Plan | BucketPlan) -> FamilyPlan:
    """The one kernel a host plan has: a Plan's primary, or a run-time spec's one bucket's."""
    kernels = plan.kernels
    assert len(kernels) == 1, "a host plan has one kernel"
    return kernels[0]
