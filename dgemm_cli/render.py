"""Stage 4: Spec + ProblemViews + Plan -> files (text, not written), through the jinja2 templates in templates/.

This module builds the shared part of the templates' context (names, types, the C API, the
harness and baseline tables), dispatches each kernel of the plan to its family's renderer
(renderers/, one table); every decision was made by the planner, and `pipeline.emit` writes the files.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import jinja2
import yaml

from dgemm_cli import __version__
from dgemm_cli.arch import ARCHES, Arch, lowest_arch
from dgemm_cli.baseline import CublasPlan
from dgemm_cli.errors import SpecError
from dgemm_cli.families import FAMILIES, FamilyPlan
from dgemm_cli.formal import views as formal_views
from dgemm_cli.plan import BucketPlan, Plan, RowsBucket
from dgemm_cli.records import PLAN_SCHEMA_VERSION
from dgemm_cli.renderers import Body, float_literal
from dgemm_cli.renderers.buckets import fold, merged_plans, merged_routes
from dgemm_cli.renderers.host import host_signature, primary_of, render_host_sources
from dgemm_cli.renderers.problems import share_problems
from dgemm_cli.spec import Spec
from dgemm_cli.views import ROLES, ProblemViews, output_unit_role, role_holders, role_of


def template_dir() -> Path:
    """templates/ ships inside the wheel as dgemm_cli/templates; in a checkout it is ../templates."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "kernel.cu.j2").is_file():
            return candidate
    raise AssertionError(f"templates not found next to {here}")  # a broken install, not a user error


# The element types in CUDA; a 4-bit view's elements are its 32-bit words (spec.model.Packing).
CTYPES = {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16", "e4m3": "__nv_fp8_e4m3",
          "int8": "int8_t", "uint8": "uint8_t", "int4": "uint32_t", "uint4": "uint32_t"}
INCLUDES = {"f16": "cuda_fp16.h", "bf16": "cuda_bf16.h", "e4m3": "cuda_fp8.h"}
HARNESS_DTYPE = {"f32": "DG_F32", "f16": "DG_F16", "bf16": "DG_BF16", "e4m3": "DG_E4M3", "int8": "DG_INT8",
                 "uint8": "DG_UINT8", "int4": "DG_INT4", "uint4": "DG_UINT4"}
HARNESS_PACK = {None: "DG_PACK_NONE", "linear": "DG_PACK_LINEAR", "awq": "DG_PACK_AWQ", "dg": "DG_PACK_DG"}
HARNESS_ROLE = {"batch": "DG_BATCH", "m": "DG_M", "n": "DG_N", "k": "DG_K"}
# verify's relative Frobenius tolerance of a problem with e4m3 inputs (their scales applied): the products are exact,
# and the FP8 tensor core keeps about 14 bits of the partial sum (2^-13 relative, DeepSeek-V3's report) at each of
# the BK / 32 = 4 k32 steps it accumulates before a promotion to f32: 4 x 2^-13. A kernel that skips the promotion
# fails it at K = 7168 (docs/RESULTS.md has both errors); an output of 16 bits rounds coarser and sets its own.
E4M3_TOLERANCE = 4 * 2.0**-13
# verify's relative Frobenius tolerance by dtype; a problem's is the largest over its buffers.
# Integer weights set none: their products are exact in the reference, and the kernels' rounding is the activations'
# type's (the weights dequantize to it).
TOLERANCE = {"f32": 1e-5, "f16": 1e-2, "bf16": 1e-2, "e4m3": E4M3_TOLERANCE,
             "int8": 0.0, "uint8": 0.0, "int4": 0.0, "uint4": 0.0}
NVCC_FLAGS = ["-std=c++17", "-O3", "-lineinfo"]
HARNESS = "dg_harness.cuh"


@dataclass(frozen=True)
class OperandCtx:
    name: str
    letters: str
    dtype: str
    ctype: str
    align: int
    offset: int
    roles: tuple[str, ...]  # roles with segments that this operand holds
    # How kernel code names the pointer: A, B, C are kernel arguments; D and the epilogue's views
    # travel in the `ep` argument (struct Epilogue).
    ptr: str = ""

    @property
    def tname(self) -> str:
        """The operand's element type as the generated code names it: A_t, ..., D_t, Bias_t."""
        return f"{self.name}_t" if self.name in "ABC" else EXTRA_TYPE[self.name]

    @property
    def zero(self) -> str:
        return f"{self.ctype}(0.0f)"

    def to_float(self, expr: str) -> str:
        return {"f32": expr, "f16": f"__half2float({expr})", "bf16": f"__bfloat162float({expr})"}[self.dtype]

    def from_float(self, expr: str) -> str:
        return {"f32": expr, "f16": f"__float2half_rn({expr})", "bf16": f"__float2bfloat16_rn({expr})"}[self.dtype]


def _operand_ctx(spec: Spec, views: ProblemViews, name: str) -> OperandCtx:
    op = spec.operand(name)
    roles = tuple(r for r in ROLES if name in role_holders(r, spec) and views.roles[r].segments)
    if name not in "ABC":  # a bias or scale is broadcast over the roles it lacks: no index math for them
        roles = tuple(r for r in roles if any(seg.stride(name) for seg in views.roles[r].segments))
    return OperandCtx(name, op.letters, op.dtype, CTYPES[op.dtype], op.align, op.offset, roles,
                      name if name in "ABC" else f"ep.{name}")


# The C type name of each extra operand in the generated code (A_t, B_t, C_t for the others).
EXTRA_TYPE = {"D": "D_t", "bias": "Bias_t", "scale": "Scale_t", "residual": "Residual_t"}


def _signature(spec: Spec, ops: dict[str, OperandCtx]) -> str:
    """The C entry point's parameters: A, B, C, [D], [bias], [scale], [residual], [A_scales, B_scales], [m], alpha,
    beta, stream. C is only read when the spec has an output view D; the scales come with e4m3 inputs and integer
    weights, the zero points with integer weights that have them."""
    params = [f"const {ops['A'].ctype}* A", f"const {ops['B'].ctype}* B",
              f"{'const ' if spec.D is not None else ''}{ops['C'].ctype}* C"]
    params += [f"{'' if op.name == 'D' else 'const '}{ops[op.name].ctype}* {op.name}" for op in spec.extra_operands]
    params += [f"const {CTYPES[op.dtype]}* {op.name}" for op in spec.quant_views]
    if spec.run_time_letter:
        params.append("int64_t m")
    return ", ".join(params + ["float alpha", "float beta", "cudaStream_t stream"])


def c_prototype(spec: Spec, views: ProblemViews, arch: Arch | None = None) -> str:
    """The entry point's C declaration, as <name>.h has it (a host target's: renderers/host.py)."""
    if arch is not None and arch.backend == "cpu":
        return f"int {spec.name}({host_signature(spec)})"
    ops = {x: _operand_ctx(spec, views, x) for x in ("A", "B", "C", *(op.name for op in spec.extra_operands))}
    return f"cudaError_t {spec.name}({_signature(spec, ops)})"


def _epilogue_ctx(spec: Spec, ops: dict[str, OperandCtx]) -> dict:
    """`ep`: what the shared epilogue macros (templates/common/_epilogue.j2) apply after alpha/beta, or
    None for a plain product; `ep_param` / `ep_arg` thread the `Epilogue ep` argument (D and the
    epilogue's pointers) through every family's launch and kernel signatures, as m_param / m_arg do M."""
    if not spec.extra_operands and not spec.epilogue:
        return {"ep": None, "ep_param": "", "ep_arg": ""}
    steps = []
    for st in spec.epilogue:
        steps.append({"kind": st.kind, "op": ops[st.view.name] if st.view is not None else None,
                      "activation": st.activation, "clamp": [float_literal(x) for x in st.clamp or ()],
                      "desc": st.describe()})
    extra = [ops[op.name] for op in spec.extra_operands]
    return {
        "ep": {"ops": extra, "steps": steps, "out": ops["D"] if spec.D is not None else ops["C"],
               "has_d": spec.D is not None, "types": [(EXTRA_TYPE[o.name], o.ctype) for o in extra],
               # Activations of a 16-bit output take the special function unit's tanh and exp (dg/activations.cuh).
               "fast": spec.output.dtype != "f32",
               "uses_device_math": any(st.activation or st.clamp for st in spec.epilogue)},
        # Steps without views (an activation, a clamp) need no pointers: no `ep` argument then.
        "ep_param": ", Epilogue ep" if extra else "", "ep_arg": ", ep" if extra else "",
    }


def _entry_ctx(spec: Spec) -> dict:
    """What the entry point checks and passes: C is only read when the spec has D (`c_const`), and then it
    may be null when beta == 0; the extra pointers travel as one `Epilogue` argument."""
    extra = [op.name for op in spec.extra_operands]
    run_time = bool(spec.run_time_letter)
    scales = "".join(f", {op.name}" for op in spec.quant_views)
    args = "A, B, C" + (", m" if run_time else "") + (", ep" if extra else "") + scales + ", alpha, beta, stream"
    return {"c_const": "const " if spec.D is not None else "", "launch_args": args,
            "ep_init": f"const Epilogue ep{{{', '.join(extra)}}};" if extra else "",
            # The README's example call and buffer sizes (elements; at the largest run-time size).
            "pointers": ", ".join(["A", "B", "C", *extra, *(op.name for op in spec.quant_views)]),
            "buffers": [{"name": op.name, "span": op.span}
                        for op in (*spec.operands, *spec.extra_operands, *spec.quant_views)]}


# The element types of the header's C API: f16, bf16 and e4m3 as structs of their bits a C compiler accepts, which
# are cuda_fp16.h's __half, cuda_bf16.h's __nv_bfloat16 and cuda_fp8.h's __nv_fp8_e4m3 in C++ (templates/header.h.j2
# defines them).
C_API_TYPES = {"f32": "float", "f16": "dg_f16", "bf16": "dg_bf16", "e4m3": "dg_e4m3",
               "int8": "int8_t", "uint8": "uint8_t", "int4": "uint32_t", "uint4": "uint32_t"}
# The narrow types <name>.h defines for its C API: (header, the C++ type, the C struct's field type).
NARROW_TYPES = {"f16": ("cuda_fp16.h", "__half", "unsigned short"),
                "bf16": ("cuda_bf16.h", "__nv_bfloat16", "unsigned short"),
                "e4m3": ("cuda_fp8.h", "__nv_fp8_e4m3", "unsigned char")}


def _header_signature(spec: Spec) -> str:
    """The entry point's parameters as <name>.h declares them: _signature's, with C_API_TYPES' element types."""
    params = [f"const {C_API_TYPES[spec.A.dtype]}* A", f"const {C_API_TYPES[spec.B.dtype]}* B",
              f"{'const ' if spec.D is not None else ''}{C_API_TYPES[spec.C.dtype]}* C"]
    params += [f"{'' if op.name == 'D' else 'const '}{C_API_TYPES[op.dtype]}* {op.name}" for op in spec.extra_operands]
    params += [f"const {C_API_TYPES[op.dtype]}* {op.name}" for op in spec.quant_views]
    if spec.run_time_letter:
        params.append("int64_t m")
    return ", ".join(params + ["float alpha", "float beta", "cudaStream_t stream"])


def _header_views(spec: Spec) -> list[dict]:
    """Each pointer's view as the header describes it: letters, sizes (the run-time letter's range), element
    strides, offset, dtype, promised alignment, and the elements its buffer must hold (at the largest size)."""
    run_time = spec.run_time_letter
    scaled = {sc.view.name: sc for sc in spec.scales}
    rows = []
    for op in (*spec.operands, *spec.extra_operands, *spec.quant_views):
        if op.name == "C" and spec.D is not None:
            role = "read for beta (may be null when beta == 0)"
        elif op is spec.output:
            role = "written"
        elif op.name in scaled:  # sizes in blocks: say what one scale covers
            sc = scaled[op.name]
            role = (f"read, one scale a block of {sc.operand} of "
                    + " x ".join(f"{x} {b}" for x, b in sc.blocks))
        else:
            role = "read"
        sizes = [f"{x}={run_time[1]}..{run_time[2]}" if run_time and x == run_time[0] else f"{x}={n}"
                 for x, n in zip(op.letters, op.sizes)]
        rows.append({"name": op.name, "role": role, "letters": op.letters or "(scalar)", "dtype": op.dtype,
                     "sizes": ", ".join(sizes) or "-", "strides": ", ".join(map(str, op.strides)) or "-",
                     "offset": op.offset, "align": op.align, "span": op.span})
    return rows


def base_context(spec: Spec, views: ProblemViews, baseline: CublasPlan, arch: Arch) -> dict:
    """What every family's template and the shared files (header, harness, build files) use."""
    ops = {x: _operand_ctx(spec, views, x) for x in ("A", "B", "C", *(op.name for op in spec.extra_operands))}
    # Each operand's dg::Role types, printed from the segments the formal model indexes by (formal/views.py), so that
    # the traits and the proof read one source.
    role_types = {x: {r: formal_views.role_type(formal_views.segments(views, x, r)) for r in ROLES} for x in ops}
    k_letters = "".join(x for x in spec.sizes if x not in spec.C.letters)
    roles = []
    for r in ("batch", "m", "n", "k"):
        rv = views.roles[r]
        segs = ", ".join(f"{s.label} strides "
                         + " ".join(f"{o}:{st}" for o, st in s.strides) for s in rv.segments)
        roles.append({"role": r, "desc": f"{rv.size:<8} letters '{''.join(rv.letters)}' -> "
                                         f"{len(rv.segments)} segment(s) {segs}".rstrip()})
    for x in "ABC":
        f = views.operands[x]
        roles.append({"role": x, "desc": f"contiguous along {f.unit_role or 'nothing'}; vector {f.vector_elems} "
                                         f"elem as promised ({f.vector_limit}), {f.vector_elems_aligned} if "
                                         f"16-byte aligned ({f.vector_limit_aligned})"})
    includes = sorted({INCLUDES[o.dtype] for o in ops.values() if o.dtype in INCLUDES})
    sig = _signature(spec, ops)
    return {
        "name": spec.name, "version": __version__, "source": Path(spec.source).name, "arch": arch.name,
        "spec_yaml": spec_yaml(spec.to_dict()),
        "a": ops["A"], "b": ops["B"], "c": ops["C"], "k_letters": k_letters, "b_packed": spec.B.packing is not None,
        "batch": views.batch, "m": views.m, "n": views.n, "k": views.k, "flops": views.flops,
        "roles": roles, "role_types": role_types, "signature": sig, "includes": includes,
        # Kernels that index tiles by batch move these operands' pointers to the batch's first element.
        "has_batch": bool(views.roles["batch"].segments),
        "batch_ops": [o for o in ops.values() if "batch" in o.roles],
        # Element-wise stores of the output (C, or D) walk its contiguous role (m or n), so that they coalesce.
        "c_along": "m" if output_unit_role(views) == "m" else "n",
        **_epilogue_ctx(spec, ops), **_entry_ctx(spec),
        **_run_time_ctx(spec, views),
        "gencodes": {a.name: " ".join(a.gencode) for a in ARCHES.values()},
        "nvcc_flags": NVCC_FLAGS, "cmake_arch": arch.name.removeprefix("sm_"),
        "h": _harness_ctx(spec), "bl": _baseline_ctx(baseline),
        "launch": frozenset(),  # kernel_context reads it from the rendered kernels (launch_facts)
        # The header's C API: its parameters, the narrow types it defines, each pointer's view.
        "c_signature": _header_signature(spec), "views_doc": _header_views(spec),
        "narrow_types": [dict(zip(("name", "header", "cpp", "bits"), (t, *NARROW_TYPES[t])))
                         for t in sorted({o.dtype for o in (*ops.values(), *spec.quant_views)} & set(NARROW_TYPES))],
        # The scale views of e4m3 inputs (f32) and of integer weights (f32, f16, bf16), and the weights' zero points:
        # the entry point checks and offsets them.
        "scale_ops": [OperandCtx(op.name, op.letters, op.dtype, CTYPES[op.dtype], op.align, op.offset, (), op.name)
                      for op in spec.quant_views],
    }


def _run_time_ctx(spec: Spec, views: ProblemViews) -> dict:
    """The run-time letter, if any: `dyn` describes the spec's range (entry point, header, harness);
    `rows_at_run_time` says this kernel serves a range of it, so M is a kernel argument
    (M = m * M_UNIT rows: the letter is the outermost of the m role) rather than a constant."""
    run_time = spec.run_time_letter
    if run_time is None:
        return {"dyn": None, "rows_at_run_time": False, "m_param": "", "m_arg": "", "m_desc": str(views.m)}
    x, lo, hi = run_time
    unit = views.m // hi
    return {
        "dyn": {"letter": x, "lo": lo, "hi": hi, "unit": unit, "edges": []},
        "rows_at_run_time": lo < hi, "m_unit": unit, "m_param": ", index_t M", "m_arg": ", M",
        "m_desc": f"{lo * unit}..{hi * unit} (at run time: m, the size of '{x}', in {lo}..{hi}"
                  + (f", times {unit} rows" if unit > 1 else "") + ")",
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: FamilyPlan, base: dict) -> Body:
    """One kernel's namespace, by the renderer its family names (families.FAMILIES)."""
    renderer: Callable[..., Body] = importlib.import_module(FAMILIES[plan.family].renderer).render_body
    return renderer(env, spec, views, plan, base)


# What a launcher does beyond its one launch, which <name>.h tells the caller (thread safety, graph capture): each
# fact is read from the code the renderers emitted, so that the header never claims what the code does not do.
LAUNCH_FACTS = {"scratch": "cudaMallocAsync", "tensor_maps": "encode_tiled()", "attributes": "cudaFuncSetAttribute",
                "sm_count": "cudaDevAttrMultiProcessorCount", "clusters": "cudaOccupancyMaxActiveClusters",
                "pointer_checks": "aligned("}


def launch_facts(bodies: list[Body]) -> frozenset[str]:
    found = frozenset(fact for fact, code in LAUNCH_FACTS.items() if any(code in b.text for b in bodies))
    return found.union(*(b.facts for b in bodies))


# The shipped device headers: templates/dg/ becomes the folder's dg/, which the .cu includes.
DEVICE_HEADERS = "dg"


def device_headers(included: Iterable[str]) -> dict[str, str]:
    """The shipped device headers a .cu including `included` (dg/<name>.cuh) reads, each with what it includes in
    turn, by its path in the generated folder."""
    folder = template_dir() / DEVICE_HEADERS
    found: dict[str, str] = {}
    todo = [Path(h).name for h in included]
    while todo:
        name = todo.pop()
        if f"{DEVICE_HEADERS}/{name}" in found:
            continue
        text = (folder / name).read_text()
        found[f"{DEVICE_HEADERS}/{name}"] = text
        todo.extend(_LOCAL_INCLUDE.findall(text))
    return dict(sorted(found.items()))


_LOCAL_INCLUDE = re.compile(r'^#include "([\w.]+\.(?:cuh|hpp))"', re.MULTILINE)


def _flow(value: object) -> str:
    """`value` as one line of YAML flow style."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 20)
    return text.strip().removesuffix("...").strip()  # a scalar's document ends in "..."


def spec_yaml(spec: dict) -> str:
    """The spec as the .cu's header echoes it: a line a key, a mapping or list that does not fit one line as a line
    an item (each operand, each epilogue step), each in flow style."""
    lines = []
    for key, value in spec.items():
        if not isinstance(value, (dict, list)) or len(f"{key}: {_flow(value)}") <= 110:
            lines.append(f"{key}: {_flow(value)}")
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {_flow(v)}" for k, v in value.items())
        else:
            lines.append(f"{key}:")
            lines.extend(f"- {_flow(v)}" for v in value)
    return "\n".join(lines)


def kernel_context(spec: Spec, views: ProblemViews, plan: Plan | BucketPlan, baseline: CublasPlan, arch: Arch,
                   env: jinja2.Environment) -> dict:
    base = base_context(spec, views, baseline, arch)
    if isinstance(plan, BucketPlan):
        routes = [_route(env, b.views.spec, b.views, b.plan, baseline, arch, b) for b in plan.buckets]
        base["dyn"]["edges"] = sorted({e for b in plan.buckets for e in (b.lo, b.hi)})
        family_why = f"one kernel per bucket of {plan.letter}, picked at run time ({plan.why})"
        rejected = []
    else:
        routes = [_route(env, spec, views, plan, baseline, arch, None, base)]
        family_why = plan.family_decision.summary()
        rejected = [f"{r.value}: {r.why}" for r in plan.family_decision.rejected]
    bodies = [b for r in routes for b in r["bodies"]]
    if isinstance(plan, BucketPlan):
        plans, dispatch_lines = merged_plans(routes, "m"), merged_routes(routes, "m")
        namespaces, folded_smem, callee = fold(routes, "m")
        for r in routes:  # a folded bucket's kernels are its fold's template at its size
            r["primary"] = callee.get(r["primary"], r["primary"])
            r["fallback"] = callee.get(r["fallback"], r["fallback"])
    else:
        plans = [{"sizes": None, "title": b.title, "decisions": b.decisions} for b in bodies]
        namespaces, folded_smem, callee, dispatch_lines = bodies, {}, {}, None
        if base["dyn"]:  # one plan for the whole run-time range (a bucket of a run-time spec, generated alone)
            r, dyn = routes[0], base["dyn"]
            dispatch_lines = [{"sizes": f"m in {dyn['lo']}..{dyn['hi']}",
                               "text": r["summary"] + (f"; {r['dispatch']['desc']}" if r["dispatch"] else "")}]
    namespaces = share_problems(namespaces)
    # Each kernel namespace and the dynamic shared memory its launch asks for (plan.json, for `build`'s report).
    kernel_smem = {**{ns: smem for r in routes for ns, smem in r["kernel_smem"].items() if ns not in callee},
                   **folded_smem}
    dg_headers = sorted(set().union(*(b.headers for b in bodies))
                        | ({"dg/activations.cuh"} if base["ep"] and base["ep"]["uses_device_math"] else set()))
    return {
        **base,
        "family": plan.family, "family_why": family_why, "family_rejected": rejected,
        "disabled": ",".join(plan.disabled),  # `gen --disable`'s options, which the header comment records
        # The header comment's plans and dispatch lines (each said once), and the .cu's kernel namespaces in order.
        "plans": plans, "dispatch_lines": dispatch_lines, "namespaces": namespaces, "kernel_smem": kernel_smem,
        "bodies": bodies, "routes": routes, "launch": launch_facts(bodies),
        # A fixed-size spec's one route, as the header comment and the entry point name it.
        "primary": routes[0]["primary"], "fallback": routes[0]["fallback"], "dispatch": routes[0]["dispatch"],
        "body_includes": sorted(set().union(*(b.includes for b in bodies)) | {"cstdint"}),
        # The shipped device headers the kernels use (dg/); the epilogue's activations and clamps are dg's too.
        "dg_headers": dg_headers,
        "dg_files": list(device_headers(dg_headers)),  # with what they include: the Makefile's prerequisites
        "requirements": list(dict.fromkeys(r for b in bodies for r in b.requirements)),
    }


def _route(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: Plan, baseline: CublasPlan, arch: Arch,
           bucket: RowsBucket | None, base: dict | None = None) -> dict:
    """One plan's kernels rendered, and how the entry point reaches them: `when` (a bucket's sizes of the
    run-time letter m, tested in order) and `dispatch` (the pointer checks that pick the primary)."""
    base = base or base_context(spec, views, baseline, arch)
    bodies = [render_body(env, spec, views, p, base) for p in plan.kernels]
    if bucket is not None:  # namespaces name the bucket: m3_gemv, m5_8_splitk
        bodies = [dataclasses.replace(b, namespace=f"{bucket.label}_{b.namespace}") for b in bodies]
    dispatch = None
    if plan.fallback is not None:
        checks = plan.primary.runtime_align
        promised = {x: spec.operand(x).align for x in checks}
        dispatch = {
            "cond": " && ".join(f"aligned({x}, {n})" for x, n in checks.items()),
            "desc": (f"{plan.primary.family} when " + ", ".join(f"{x}" for x in checks)
                     + " point at " + "/".join(str(n) for n in checks.values())
                     + "-byte aligned views (the spec promises " + ", ".join(f"{x}: {promised[x]}" for x in checks)
                     + f"), else {plan.fallback.family}"),
        }
    return {
        "bodies": bodies, "primary": bodies[0].namespace, "fallback": bodies[1].namespace if dispatch else None,
        "dispatch": dispatch,
        "when": None if bucket is None else (f"m == {bucket.lo}" if bucket.exact else f"m <= {bucket.hi}"),
        "sizes": None if bucket is None else bucket.sizes("m"),
        # The bucket: its label (the namespaces' prefix), its sizes, and its one size where it has one.
        "label": bucket.label if bucket is not None else None,
        "span": (bucket.lo, bucket.hi) if bucket is not None else None,
        "rows": bucket.lo if bucket is not None and bucket.exact else None,
        "summary": f"{plan.family}: {plan.primary.summary}",
        "args": base["launch_args"],
    # Each kernel namespace and the dynamic shared memory its launch asks for (plan.json, for `build`'s report).
        "kernel_smem": {b.namespace: p.smem_bytes for b, p in zip(bodies, plan.kernels)},
    }


# dg_harness.cuh's slots: every per-operand array of its DgProblem has one entry each, in the C API's order.
HARNESS_SLOTS = ("A", "B", "C", "D", "bias", "scale", "residual", "A_scales", "B_scales", "B_zeros")
HARNESS_SLOT = {x: f"DG_{x.upper()}" for x in HARNESS_SLOTS}
# The scales of e4m3 inputs or integer weights, A's then B's: DgDim's `block` has one each (B_zeros: B_scales').
HARNESS_SCALE_SLOTS = ("A_scales", "B_scales")
HARNESS_STEP = {"bias": "DG_STEP_BIAS", "scale": "DG_STEP_SCALE", "residual": "DG_STEP_RESIDUAL",
                "activation": "DG_STEP_ACTIVATION", "clamp": "DG_STEP_CLAMP"}
HARNESS_MAX_STEPS = 16  # DG_MAX_STEPS


def _harness_ctx(spec: Spec) -> dict:
    """kProblem's tables (templates/harness.cu.j2, dg_harness.cuh's DgProblem): per letter its stride in every
    slot (a scale slot's per block) and, with e4m3 inputs, its block in each scale slot; per slot presence,
    offset, span, dtype and align (zeros for a slot the spec lacks), the epilogue's steps, and `pointers`, how
    the launch wrapper passes the slots to the entry point."""
    # C's letters, then every summed one: those of A, then those only B has (summed in B only).
    letters = list(spec.C.letters) + [x for x in spec.sizes if x not in spec.C.letters]
    views = {op.name: op for op in (*spec.operands, *spec.extra_operands, *spec.quant_views)}
    slots = [views.get(x) for x in HARNESS_SLOTS]
    dim_of = {x: i for i, x in enumerate(letters)}
    scales = {sc.view.name: sc for sc in spec.scales}
    dims = []
    for x in letters:
        strides = [op.stride_of(x) if op is not None and x in op.letters else 0 for op in slots]
        # strides: A, B, C (the product's); extra_strides: D, bias, scale, residual; scale_strides: A_scales,
        # B_scales, B_zeros (per block). blocks: how many indices of x one scale covers, 0 where the input lacks x.
        # A packed view's stride along its packed letter steps one word (eight values).
        dims.append({"letter": x, "role": HARNESS_ROLE[role_of(x, spec)], "size": spec.sizes[x],
                     "strides": strides[:3], "extra_strides": strides[3:7], "scale_strides": strides[7:],
                     "blocks": [dict(scales[s].blocks).get(x, 0) if s in scales else 0 for s in HARNESS_SCALE_SLOTS]})
    if len(spec.epilogue) > HARNESS_MAX_STEPS:
        raise SpecError(spec.source, "epilogue", f"{len(spec.epilogue)} steps; verify's harness holds at most "
                        f"{HARNESS_MAX_STEPS}", "merge neighbouring clamps into one, and drop repeated activations")
    steps = []
    for st in spec.epilogue:
        step = {"kind": HARNESS_STEP[st.kind], "activation": "0", "lo": "0.0f", "hi": "0.0f"}
        if st.view is not None:
            step["text"] = f"{st.kind}[{st.view.letters}]"
        elif st.kind == "activation":
            step.update(text=st.activation, activation=f"DG_{st.activation.upper()}")
        else:
            lo, hi = st.clamp
            step.update(text=f"clamp[{lo!r}, {hi!r}]", lo=float_literal(lo), hi=float_literal(hi))
        steps.append(step)
    present = [op for op in slots if op is not None]
    # The entry point's pointers in its order; C is only read when the spec has D.
    pointers = [{"name": op.name, "slot": HARNESS_SLOT[op.name],
                 "type": f"{'' if op is spec.output else 'const '}{CTYPES[op.dtype]}*"}
                for op in present]
    return {
        "dims": dims, "nc": len(spec.C.letters), "output": spec.output.name, "pointers": pointers,
        "scales": bool(spec.scales),  # DgDim's blocks are rendered only then (zero-filled otherwise)
        # The tables list the slots up to the last present one; C++ zero-fills the rest (absent slots).
        "nslots": max(HARNESS_SLOTS.index(op.name) for op in present) + 1,
        "present": [int(op is not None) for op in slots],
        "offsets": [op.offset if op is not None else 0 for op in slots],
        "spans": [op.span if op is not None else 0 for op in slots],
        "dtypes": [HARNESS_DTYPE[op.dtype] if op is not None else "0" for op in slots],
        "aligns": [op.align if op is not None else 0 for op in slots],
        # Integer weights: each slot's packing and the dims of its packed letter (dg: B's k letter, then n).
        "weights": spec.inputs == "weight-only",
        "packs": [HARNESS_PACK[op.packing.order if op is not None and op.packing is not None else None]
                  for op in slots],
        "pack_dims": [_pack_dims(op, spec, dim_of) for op in slots],
        "zero_form": "DG_ZEROS_PRESCALED" if spec.zeros and spec.zeros[0].form == "prescaled" else "DG_ZEROS_SUBTRACT",
        "alpha": repr(float(spec.alpha)), "beta": repr(float(spec.beta)),
        "tol": max(TOLERANCE[op.dtype] for op in present), "steps": steps,
    }


def _pack_dims(op, spec: Spec, dim_of: dict[str, int]) -> list[int]:
    """The harness's dims of a packed view's packed letter, and for the dg layout of B's n letter after its k."""
    if op is None or op.packing is None:
        return [0, 0]
    if op.packing.order == "dg":
        n = next(x for x in op.letters if x in spec.C.letters)
        return [dim_of[op.packing.along], dim_of[n]]
    return [dim_of[op.packing.along], 0]


def _baseline_ctx(bl: CublasPlan) -> dict:
    # `scaled` (what grows with a run-time size) only where something does, and `epilogue` / `alternative`
    # only for a spec with an epilogue: a plain spec's plan.json and harness tables stay as they were.
    def scaled(x) -> dict:
        return {"scaled": list(x.scaled)} if x.scaled else {}

    def pointers(c) -> dict:  # a pointer-array call's batch segments; a strided call has none
        return {"pointers": [{**vars(d), "scaled": int(d.scaled)} for d in c.pointers]} if c.pointers else {}

    return {
        "available": int(bl.available), "kind": bl.kind, "why": bl.why,
        "copy": [int(c) for c in bl.copy],
        "views": [{"size": list(v.size), "stride": list(v.stride), **scaled(v)} for v in bl.views],
        "calls": [{**{f: x for f, x in vars(c).items() if f not in ("scaled", "pointers")}, "swap": int(c.swap),
                   "trans_x": int(c.trans_x), "trans_y": int(c.trans_y), **scaled(c), **pointers(c)}
                  for c in bl.calls],
        **({"epilogue": bl.epilogue} if bl.epilogue else {}),
        **({"alternative": _alternative_ctx(bl.alternative)} if bl.alternative else {}),
    }


def _alternative_ctx(alt) -> dict:
    """The alternative baseline's fields; `includes` only where it has some, so that the other alternatives' plan.json
    stays as it was."""
    return {k: v for k, v in dataclasses.asdict(alt).items() if k != "includes" or v}


@functools.cache
def environment() -> jinja2.Environment:
    """The one template environment: it keeps each template compiled (recompiled when its file changes)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False,
    )


def render_sources(spec: Spec, views: ProblemViews, plan: Plan, baseline: CublasPlan,
                   arch: Arch) -> dict[str, str]:
    """File name -> text, without touching the disk."""
    env = environment()
    if arch.backend == "cpu":
        return _render_host(env, spec, views, plan, baseline, arch)
    k = kernel_context(spec, views, plan, baseline, arch, env)
    out = {
        f"{spec.name}.cu": env.get_template("kernel.cu.j2").render(k=k),
        f"{spec.name}.h": env.get_template("header.h.j2").render(k=k),
        f"{spec.name}_harness.cu": env.get_template("harness.cu.j2").render(k=k),
        "Makefile": env.get_template("Makefile.j2").render(k=k),
        "CMakeLists.txt": env.get_template("CMakeLists.txt.j2").render(k=k),
        "README.md": env.get_template("README.md.j2").render(k=k),
        HARNESS: (template_dir() / HARNESS).read_text(),
    }
    out.update(device_headers(k["dg_headers"]))
    if baseline.alternative is not None:  # a header-only baseline beside the harness (e.g. cuBLASLt's epilogues)
        for header in (baseline.alternative.header, *baseline.alternative.includes):
            out[header] = (template_dir() / header).read_text()
    features = frozenset().union(*(p.arch_features for p in plan.kernels))
    digest = hashlib.sha256("".join(out[n] for n in sorted(out)).encode()).hexdigest()
    plan_json = {
        "schema_version": PLAN_SCHEMA_VERSION,
        "generator": f"deepgemm {__version__}",
        "arch": arch.name,
        "content_hash": digest,
        "spec": spec.to_dict(),
        "views": _views_dict(views),
        "plan": plan.to_dict(),
        "baseline": _baseline_ctx(baseline),
        "build": {"nvcc_flags": NVCC_FLAGS, "gencode": {a.name: a.gencode for a in ARCHES.values()},
                  # What the kernels' instructions and launches need (arch.FEATURES), and the first arch with all of it.
                  "arch_features": sorted(features),
                  "kernel_smem": k["kernel_smem"],
                  "requires_arch": [needed] if (needed := lowest_arch(features)) else []},
    }
    out["plan.json"] = json.dumps(plan_json, indent=2) + "\n"
    return out


def _render_host(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: Plan | BucketPlan,
                 baseline: CublasPlan, arch: Arch) -> dict[str, str]:
    """A host target's folder (renderers/host.py): its one kernel's traits, by the family's renderer."""
    kernel = primary_of(plan)
    # The spec's own views: a run-time letter is the outermost of its role there even where its range is one size
    # (whose bucket analyses it as fixed), and the engine cuts that segment at the rows of the call.
    base = {**base_context(spec, views, baseline, arch), **_run_time_ctx(spec, views),
            "plan_schema_version": PLAN_SCHEMA_VERSION, "views_dict": _views_dict(views)}
    body = render_body(env, spec, views, kernel, base)
    # The CUDA families are never candidates for the host: the host's families alone are named.
    family_why = (f"{kernel.family}, the host backend's family" + (f"; {plan.why}" if isinstance(plan, BucketPlan)
                                                                   else ""))
    headers = [*body.headers, *(["dg/cpu_activations.hpp"] if any(st.activation or st.clamp for st in spec.epilogue)
                                else [])]
    return render_host_sources(env, spec, views, plan, arch, base, body, family_why, device_headers(headers))


def _views_dict(views: ProblemViews) -> dict:
    return {
        "roles": {r: {"size": rv.size, "letters": "".join(rv.letters),
                      "segments": [{"letters": "".join(s.letters), "size": s.size, "strides": dict(s.strides)}
                                   for s in rv.segments]}
                  for r, rv in views.roles.items()},
        "operands": {x: {"unit_role": f.unit_role, "vector_elems": f.vector_elems, "vector_limit": f.vector_limit,
                         "vector_elems_aligned": f.vector_elems_aligned, "span": f.span,
                         "broadcast": list(f.broadcast)}
                     for x, f in views.operands.items()},
        "needs_int64": views.needs_int64,
    }
