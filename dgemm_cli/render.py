"""Stage 4: Spec + ProblemViews + TilePlan -> files, through the jinja2 templates in templates/.

This module only builds the templates' context (names, constants, which macros to use) and
writes files; every decision was made by the planner.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import yaml

from dgemm_cli import __version__
from dgemm_cli.arch import ARCHES, Arch
from dgemm_cli.baseline import CublasPlan, plan_baseline
from dgemm_cli.plan import MMA, OTHER, REGISTER_CAP, LoaderPlan, TilePlan, make_plan
from dgemm_cli.spec import DTYPE_BYTES, Spec
from dgemm_cli.views import ROLE_HOLDERS, ProblemViews, analyse, role_of


def template_dir() -> Path:
    """templates/ ships inside the wheel as dgemm_cli/templates; in a checkout it is ../templates."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "kernel.cu.j2").is_file():
            return candidate
    raise AssertionError(f"templates not found next to {here}")  # a broken install, not a user error


CTYPES = {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16"}
INCLUDES = {"f16": "cuda_fp16.h", "bf16": "cuda_bf16.h"}
HARNESS_DTYPE = {"f32": "DG_F32", "f16": "DG_F16", "bf16": "DG_BF16"}
HARNESS_ROLE = {"batch": "DG_BATCH", "m": "DG_M", "n": "DG_N", "k": "DG_K"}
TOLERANCE = {"f32": 1e-5, "f16": 1e-2, "bf16": 1e-2}
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

    @property
    def zero(self) -> str:
        return f"{self.ctype}(0.0f)"

    def to_float(self, expr: str) -> str:
        return {"f32": expr, "f16": f"__half2float({expr})", "bf16": f"__bfloat162float({expr})"}[self.dtype]

    def from_float(self, expr: str) -> str:
        return {"f32": expr, "f16": f"__float2half_rn({expr})", "bf16": f"__float2bfloat16_rn({expr})"}[self.dtype]


@dataclass(frozen=True)
class LoaderView:
    op: OperandCtx
    struct: str
    kind: str
    vec: int
    bytes: int
    prefix: str  # "A" or "B": the shared-memory tile constants
    other: str  # "m" or "n"
    inner_role: str
    per_row: int  # vectors (or elements) per shared row
    guard: bool  # work items do not divide evenly among threads
    per_thread: int  # work items (vectors or elements) per thread and k-tile
    reason: str
    rows_desc: str

    @property
    def summary(self) -> str:
        if self.kind == "gather":
            return "element loads staged in registers across the math (strided gather)"
        if self.kind == "gather_direct":
            return "element loads stored straight to shared memory (strided gather)"
        return f"{self.bytes}-byte cp.async ({self.vec} element{'s' if self.vec > 1 else ''} a copy)"

    @property
    def inner_left(self) -> str:
        return "(K - gk)" if self.inner_role == "k" else f"({self.other.upper()} - g{self.other})"


@dataclass
class Generated:
    """What `gen` produced for one spec."""

    name: str
    arch: str
    directory: Path
    spec: Spec
    views: ProblemViews
    plan: TilePlan
    baseline: CublasPlan
    files: list[Path] = field(default_factory=list)
    content_hash: str = ""


def _operand_ctx(spec: Spec, views: ProblemViews, name: str) -> OperandCtx:
    op = spec.operand(name)
    roles = tuple(r for r in ("batch", "m", "n", "k") if name in ROLE_HOLDERS[r] and views.roles[r].segments)
    return OperandCtx(name, op.letters, op.dtype, CTYPES[op.dtype], op.align, op.offset, roles)


def _loader_view(plan: TilePlan, ld: LoaderPlan, op: OperandCtx) -> LoaderView:
    tile = plan.smem_tile(ld)
    per_row = tile.inner // ld.vector_elems
    items = tile.rows * per_row
    kind_name = {"gather": "Gather", "gather_direct": "GatherDirect"}.get(
        ld.kind, f"CpAsync{ld.vector_elems * DTYPE_BYTES[op.dtype]}")
    struct = f"{ld.operand}Load{kind_name}"
    return LoaderView(op, struct, ld.kind, ld.vector_elems, ld.vector_elems * DTYPE_BYTES[op.dtype], ld.operand,
                      OTHER[ld.operand], ld.smem_inner, per_row, items % plan.threads != 0,
                      -(-items // plan.threads), ld.reason,
                      f"{tile.rows} x {tile.inner}")


def _segments_desc(seg, op: str) -> dict:
    return {"size": seg.size, "stride": seg.stride(op),
            "desc": f"{seg.label}*{seg.stride(op)}"}


def kernel_context(spec: Spec, views: ProblemViews, plan: TilePlan, baseline: CublasPlan, arch: Arch) -> dict:
    ops = {x: _operand_ctx(spec, views, x) for x in "ABC"}
    offset_fns = []
    for x in "ABC":
        for role in ops[x].roles:
            offset_fns.append({"op": x, "role": role,
                               "segments": [_segments_desc(s, x) for s in views.roles[role].segments]})
    loaders = [_loader_view(plan, plan.a, ops["A"]), _loader_view(plan, plan.b, ops["B"])]
    variants = list(loaders)
    fallback = [lv.struct for lv in loaders]
    conds = []
    for i, ld in enumerate((plan.a, plan.b)):
        if ld.runtime_align:
            assert ld.fallback is not None
            fb = _loader_view(plan, ld.fallback, ops[ld.operand])
            fallback[i] = fb.struct
            if fb.struct != loaders[i].struct:
                variants.append(fb)
            conds.append(f"aligned({ld.operand} + {ops[ld.operand].offset}, {ld.runtime_align})"
                         if ops[ld.operand].offset else f"aligned({ld.operand}, {ld.runtime_align})")
    dispatch_desc = "; ".join(
        f"{ld.operand} takes {ld.runtime_align}-byte cp.async when its pointer is {ld.runtime_align}-byte aligned "
        f"(the spec promises {ops[ld.operand].align}), else {ld.fallback.kind}"
        + (f" of {ld.fallback.vector_elems}" if ld.fallback.kind == "cp_async" else "")
        for ld in (plan.a, plan.b) if ld.runtime_align and ld.fallback is not None)
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
    sig = (f"const {ops['A'].ctype}* A, const {ops['B'].ctype}* B, {ops['C'].ctype}* C, float alpha, float beta, "
           "cudaStream_t stream")
    cp_widths = sorted({lv.bytes for lv in variants if lv.kind == "cp_async"})
    return {
        "name": spec.name, "version": __version__, "source": Path(spec.source).name, "arch": arch.name,
        "spec_yaml": yaml.safe_dump(spec.to_dict(), sort_keys=False, default_flow_style=None, width=100).rstrip(),
        "a": ops["A"], "b": ops["B"], "c": ops["C"], "k_letters": k_letters,
        "batch": views.batch, "m": views.m, "n": views.n, "k": views.k, "flops": views.flops,
        "roles": roles, "decisions": [d.summary() for d in plan.decisions],
        "mma": plan.instruction == MMA, "ab_dtype": spec.A.dtype,
        "needs_trans": plan.a.smem_inner == "m" or plan.b.smem_inner == "n",
        "a_inner": plan.a.smem_inner, "b_inner": plan.b.smem_inner,
        "block_m": plan.block_m, "block_n": plan.block_n, "block_k": plan.block_k,
        "warps_m": plan.warps_m, "warps_n": plan.warps_n, "thread_m": plan.thread_m, "thread_n": plan.thread_n,
        "threads": plan.threads, "min_blocks": plan.min_blocks_per_sm, "reg_cap": REGISTER_CAP,
        "stages": plan.stages, "smem_bytes": plan.smem_bytes,
        "tiles_m": plan.tiles_m, "tiles_n": plan.tiles_n, "tiles": plan.tiles,
        "k_tiles": -(-views.k // plan.block_k), "index_type": plan.index_type,
        "smem_tiles": [plan.smem_tile(plan.a), plan.smem_tile(plan.b)],
        "offset_fns": offset_fns, "loaders": variants, "cp_async_widths": cp_widths,
        "has_batch": bool(views.roles["batch"].segments),
        "batch_ops": [ops[x] for x in "ABC" if "batch" in ops[x].roles],
        "dispatch": bool(conds), "dispatch_cond": " && ".join(conds), "dispatch_desc": dispatch_desc,
        # The register cap depends on the instantiation only when a fallback gathers.
        "async_trait": plan.min_blocks_per_sm > 1 and any(v.kind != "cp_async" for v in variants),
        "fallback": fallback, "signature": sig, "includes": includes,
        "gencodes": {a.name: " ".join(a.gencode) for a in ARCHES.values()},
        "nvcc_flags": NVCC_FLAGS, "cmake_arch": arch.name.removeprefix("sm_"),
        "h": _harness_ctx(spec), "bl": _baseline_ctx(baseline),
    }


def _harness_ctx(spec: Spec) -> dict:
    # C's letters, then every summed one: those of A, then those only B has (summed in B only).
    letters = list(spec.C.letters) + [x for x in spec.sizes if x not in spec.C.letters]
    dims = []
    for x in letters:
        strides = [op.stride_of(x) if x in op.letters else 0 for op in spec.operands]
        dims.append({"letter": x, "role": HARNESS_ROLE[role_of(x, spec)], "size": spec.sizes[x], "strides": strides})
    dtypes = [op.dtype for op in spec.operands]
    return {
        "dims": dims, "nc": len(spec.C.letters),
        "offsets": [op.offset for op in spec.operands], "spans": [op.span for op in spec.operands],
        "dtypes": [HARNESS_DTYPE[d] for d in dtypes], "aligns": [op.align for op in spec.operands],
        "alpha": repr(float(spec.alpha)), "beta": repr(float(spec.beta)),
        "tol": max(TOLERANCE[d] for d in dtypes),
    }


def _baseline_ctx(bl: CublasPlan) -> dict:
    return {
        "available": int(bl.available), "kind": bl.kind, "why": bl.why,
        "copy": [int(c) for c in bl.copy],
        "views": [{"size": list(v.size), "stride": list(v.stride)} for v in bl.views],
        "swap": int(bl.swap), "trans_x": int(bl.trans_x), "trans_y": int(bl.trans_y),
        "m": bl.m, "n": bl.n, "k": bl.k, "ldx": bl.ldx, "ldy": bl.ldy, "ldc": bl.ldc,
        "stride_x": bl.stride_x, "stride_y": bl.stride_y, "stride_c": bl.stride_c, "batch": bl.batch,
    }


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False,
    )


def render_sources(spec: Spec, views: ProblemViews, plan: TilePlan, baseline: CublasPlan,
                   arch: Arch) -> dict[str, str]:
    """File name -> text, without touching the disk."""
    env = environment()
    k = kernel_context(spec, views, plan, baseline, arch)
    out = {
        f"{spec.name}.cu": env.get_template("kernel.cu.j2").render(k=k),
        f"{spec.name}.h": env.get_template("header.h.j2").render(k=k),
        f"{spec.name}_harness.cu": env.get_template("harness.cu.j2").render(k=k),
        "Makefile": env.get_template("Makefile.j2").render(k=k),
        "CMakeLists.txt": env.get_template("CMakeLists.txt.j2").render(k=k),
        "README.md": env.get_template("README.md.j2").render(k=k),
        HARNESS: (template_dir() / HARNESS).read_text(),
    }
    digest = hashlib.sha256("".join(out[n] for n in sorted(out)).encode()).hexdigest()
    plan_json = {
        "generator": f"deepgemm {__version__}",
        "arch": arch.name,
        "content_hash": digest,
        "spec": spec.to_dict(),
        "views": _views_dict(views),
        "plan": plan.to_dict(),
        "baseline": _baseline_ctx(baseline),
        "build": {"nvcc_flags": NVCC_FLAGS, "gencode": {a.name: a.gencode for a in ARCHES.values()}},
    }
    out["plan.json"] = json.dumps(plan_json, indent=2) + "\n"
    return out


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


def generate(spec: Spec, arch: Arch, out_root: Path) -> Generated:
    """Analyse, plan and write one spec's directory `out_root/<name>/`."""
    views = analyse(spec)
    plan = make_plan(views, arch)
    baseline = plan_baseline(views)
    files = render_sources(spec, views, plan, baseline, arch)
    directory = out_root / spec.name
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return Generated(spec.name, arch.name, directory, spec, views, plan, baseline, written,
                     json.loads(files["plan.json"])["content_hash"])

