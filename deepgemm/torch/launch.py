"""Running one contraction on torch tensors: their metadata -> the canonical contraction (problem.py) -> its kernel
from the cache (deepgemm.compile) -> one call on the tensors' data pointers, on the current CUDA stream (or on
the host's threads for CPU tensors). No copy, no allocation, no synchronization: the caller owns `out`.

Kernels are memoized in the process by the canonical contraction, so a call whose tensors index memory like an
earlier call's takes no planning and no hashing beyond the contraction's own. Run-time rows: a contraction with
one row letter takes a kernel built for a range of sizes (problem.ROW_RANGES) always with rows="dynamic", and with
"auto" once its size has changed between calls or where such a kernel is already loaded; so a decode loop over
batch sizes builds once a range, not once a size, and a model called at one size gets that size's own kernel.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace

import torch

from deepgemm.api import default_name, spec_from_dict
from deepgemm.cache import get_kernel
from deepgemm.kernel import Kernel
from deepgemm.torch.problem import (
    MAX_ALIGN,
    Contraction,
    Equation,
    TensorArgumentError,
    TensorMeta,
    byte_extent,
    contraction_of,
    output_shape,
    parse_equation,
    ranges_meet,
    run_time_span,
    spec_document,
)
from dgemm_cli.spec import Spec

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
# A CUDA device's compute capability -> the arch deepgemm generates for it.
CAPABILITY_ARCH = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 7): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a"}
ROW_POLICIES = ("auto", "static", "dynamic")

_KERNELS: dict[tuple, tuple[Kernel, str | None]] = {}  # (contraction key, arch, reads_c) -> kernel, run-time letter
_ROW_SIZES: dict[tuple, set[int]] = {}  # contraction with its row size left out -> the row sizes it was called with
_GUARD = threading.Lock()


def tensor_meta(t: torch.Tensor, what: str) -> TensorMeta:
    if not isinstance(t, torch.Tensor):
        raise TensorArgumentError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
    dtype = DTYPES.get(t.dtype)
    if dtype is None:
        raise TensorArgumentError(f"{what}: dtype {t.dtype} has no deepgemm kernel. Fix: use "
                                  f"{', '.join(str(d) for d in DTYPES)}")
    if t.device.type not in ("cuda", "cpu"):
        raise TensorArgumentError(f"{what}: on {t.device}; deepgemm runs CUDA and CPU tensors. Fix: move it")
    return TensorMeta(tuple(t.shape), tuple(t.stride()), dtype, t.data_ptr())


def arch_of(device: torch.device) -> str:
    """The arch deepgemm generates for `device`: "cpu", or the CUDA arch of its compute capability."""
    if device.type == "cpu":
        return "cpu"
    return _cuda_arch(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_arch(index: int) -> str:
    capability = torch.cuda.get_device_capability(index)
    arch = CAPABILITY_ARCH.get(capability)
    if arch is None:
        known = ", ".join(f"{a} ({c[0]}.{c[1]})" for c, a in CAPABILITY_ARCH.items())
        raise TensorArgumentError(f"cuda:{index} has compute capability {capability[0]}.{capability[1]}; deepgemm "
                                  f"generates for {known}. Fix: run on one of those, or on CPU tensors")
    return arch


@functools.lru_cache(maxsize=256)
def equation_of(equation: str, a_ndim: int, b_ndim: int) -> Equation:
    return parse_equation(equation, a_ndim, b_ndim)


@dataclass(frozen=True)
class Prepared:
    """What a call of one shape needs at run time: its kernel, each parameter's source in the prototype's order
    (a tensor's name, or a scalar's), the run-time size, and each tensor's byte extent (the overlap check)."""

    kernel: Kernel
    sources: tuple[str, ...]  # "a", "b", "out", "bias", ... (pointers), "m", "alpha", "beta", "stream", "threads"
    m: int | None
    extents: tuple[int, ...]  # a, b, then each epilogue tensor's bytes from its data pointer


_PREPARED: dict[tuple, Prepared] = {}  # a call's shapes, strides, dtypes, alignments and options -> Prepared
_POINTER_SOURCES = {"A": "a", "B": "b", "C": "out"}


def run(equation: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
        epilogue: tuple[tuple[str, object], ...] = (), *, alpha: float = 1.0, beta: float = 0.0,
        rows: str = "auto") -> None:
    """out = epilogue(alpha * einsum(equation, a, b) + beta * out), in place, by a deepgemm kernel. A call of a
    shape seen before (shapes, strides, dtypes, pointers' alignment, epilogue, options) skips the analysis: its
    kernel and argument order are memoized (`Prepared`); only the overlap of out with the inputs is checked again."""
    tensors = (a, b, out, *(v for _, v in epilogue if isinstance(v, torch.Tensor)))
    key = None
    if all(isinstance(t, torch.Tensor) for t in (a, b, out)):
        key = (equation, rows, beta != 0.0, out.device, *(_signature(t) for t in tensors),
               tuple(k if isinstance(v, torch.Tensor) else (k, v) for k, v in epilogue))
        prepared = _PREPARED.get(key)
        if prepared is not None:
            _check_overlap(prepared, tensors)
            _launch(prepared, tensors, epilogue, alpha, beta, out.device)
            return
    prepared = _prepare(equation, a, b, out, epilogue, beta, rows)
    if prepared is None:  # nothing to launch: an empty output or an empty sum, done already
        return
    if key is not None:
        _PREPARED[key] = prepared
    _launch(prepared, tensors, epilogue, alpha, beta, out.device)


def _signature(t: torch.Tensor) -> tuple:
    return t.dtype, t.device, tuple(t.shape), t.stride(), t.data_ptr() % MAX_ALIGN


def contraction_for(equation: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None,
                    epilogue: tuple[tuple[str, object], ...] = ()) -> Contraction:
    """The canonical contraction of einsum(equation, a, b) into `out` (None: a new dense result, 16-byte aligned,
    in a's dtype, as einsum allocates it), every tensor on one device."""
    eq = equation_of(equation, a.dim(), b.dim())
    a_meta, b_meta = tensor_meta(a, "a"), tensor_meta(b, "b")
    device = out.device if out is not None else a.device
    for what, t in [("a", a), ("b", b), *((f"epilogue {k}", v) for k, v in epilogue if isinstance(v, torch.Tensor))]:
        if t.device != device:
            raise TensorArgumentError(f"{what} is on {t.device}, out on {device}. Fix: put every tensor on one "
                                      "device")
    if out is None:
        shape = output_shape(eq, a_meta, b_meta)
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
        out_meta = TensorMeta(shape, tuple(strides), a_meta.dtype, 0)
    else:
        out_meta = tensor_meta(out, "out")
    steps = tuple((k, tensor_meta(v, f"epilogue {k}") if isinstance(v, torch.Tensor) else v) for k, v in epilogue)
    return contraction_of(eq, a_meta, b_meta, out_meta, steps)


def _prepare(equation: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             epilogue: tuple[tuple[str, object], ...], beta: float, rows: str) -> Prepared | None:
    """The analysis of a call (every check), its kernel and argument order; None where there is nothing to launch
    (then out is already written)."""
    if rows not in ROW_POLICIES:
        raise TensorArgumentError(f"rows={rows!r}: use one of {', '.join(ROW_POLICIES)}")
    contraction = contraction_for(equation, a, b, out, epilogue)
    if out.numel() == 0:
        return None
    if any(n == 0 for _, n in contraction.sizes):  # an empty sum: t = beta * out, then the epilogue
        _empty_sum(out, epilogue, beta)
        return None
    kernel, row = kernel_for(contraction, arch_of(out.device), reads_c=beta != 0.0, rows=rows)
    sources = tuple(_POINTER_SOURCES.get(p.name, p.name) for p in kernel.parameters)
    inputs = (("a", a), ("b", b), *((f"epilogue {k}", v) for k, v in epilogue if isinstance(v, torch.Tensor)))
    extents = tuple(byte_extent(tensor_meta(t, what)) for what, t in inputs)
    return Prepared(kernel, sources, contraction.size(row) if row is not None else None, extents)


def _check_overlap(prepared: Prepared, tensors: tuple[torch.Tensor, ...]) -> None:
    """out (tensors[2]) against every other tensor, as contraction_of checks it, from the memoized extents."""
    out = tensors[2]
    start = out.data_ptr()
    size = byte_extent(TensorMeta(tuple(out.shape), out.stride(), DTYPES[out.dtype], start))
    for t, extent in zip((tensors[0], tensors[1], *tensors[3:]), prepared.extents):
        if ranges_meet(start, size, t.data_ptr(), extent):
            raise TensorArgumentError("out overlaps an input in memory: a kernel reads it while it writes out. Fix: "
                                      "pass an out of its own (or none)")


def _launch(prepared: Prepared, tensors: tuple[torch.Tensor, ...], epilogue: tuple[tuple[str, object], ...],
            alpha: float, beta: float, device: torch.device) -> None:
    pointers = {"a": tensors[0].data_ptr(), "b": tensors[1].data_ptr(), "out": tensors[2].data_ptr()}
    pointers.update((k, v.data_ptr()) for k, v in epilogue if isinstance(v, torch.Tensor))
    scalars = {"m": prepared.m, "alpha": float(alpha), "beta": float(beta)}
    if device.type == "cpu":
        scalars["threads"] = torch.get_num_threads()
        prepared.kernel.call_ordered([pointers[s] if s in pointers else scalars[s] for s in prepared.sources])
        return
    with torch.cuda.device(device):
        scalars["stream"] = torch.cuda.current_stream(device).cuda_stream
        prepared.kernel.call_ordered([pointers[s] if s in pointers else scalars[s] for s in prepared.sources])


def kernel_for(c: Contraction, arch: str, *, reads_c: bool, rows: str = "auto") -> tuple[Kernel, str | None]:
    """The kernel of `c` and its run-time row letter (None: sized at compile time), built once a process."""
    found_span = run_time_span(c) if rows != "static" else None
    row, span = found_span if found_span is not None else (None, None)
    shape_class = _without_size(c, row) if row is not None else c  # the contraction but for its run-time size
    if span is not None and rows == "auto" and (shape_class, arch, reads_c, span) not in _KERNELS:
        with _GUARD:
            seen = _ROW_SIZES.setdefault((shape_class, arch, reads_c), set())
            seen.add(c.size(row))
            varies = len(seen) > 1
        if not varies:
            row, span, shape_class = None, None, c
    key = (shape_class, arch, reads_c, span)
    found = _KERNELS.get(key)
    if found is None:
        found = (get_kernel(spec_of(c, arch, reads_c=reads_c, rows=span), arch), row)
        with _GUARD:
            found = _KERNELS.setdefault(key, found)
    return found


def spec_of(c: Contraction, arch: str, *, reads_c: bool, rows: tuple[int, int] | None = None,
            name: str | None = None) -> Spec:
    """The spec of contraction `c` (named after a hash of its document unless `name` is given)."""
    doc = spec_document(c, arch, rows=rows, reads_c=reads_c)
    return spec_from_dict({"name": name or default_name("torch", doc), **doc}, source="<deepgemm.torch>")


def _without_size(c: Contraction, letter: str) -> Contraction:
    return replace(c, sizes=tuple((x, 0 if x == letter else n) for x, n in c.sizes))


def _empty_sum(out: torch.Tensor, epilogue: tuple[tuple[str, object], ...], beta: float) -> None:
    """A contraction over an empty K: t = beta * out (0 where beta is 0), then the epilogue's steps, as the
    kernels apply them (docs/design/epilogue.md)."""
    t = out.float() * beta if beta != 0.0 else torch.zeros(out.shape, dtype=torch.float32, device=out.device)
    for kind, value in epilogue:
        if kind == "bias":
            t = t + value.float()
        elif kind == "scale":
            t = t * value.float()
        elif kind == "residual":
            t = t + value.float()
        elif kind == "clamp":
            t = t.clamp(float(value[0]), float(value[1]))
        elif kind == "activation":
            t = ACTIVATIONS[value](t)
    out.copy_(t)


ACTIVATIONS = {
    "relu": torch.relu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "gelu_erf": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
