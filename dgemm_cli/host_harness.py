"""The CPU backend's harness: verify and bench a generated folder's shared library in this process, beside numpy.

`python -m dgemm_cli.host_harness verify|bench --dir FOLDER --lib LIBRARY.so [options]` prints exactly one JSON
object on stdout in the layout of the GPU harness (templates/dg_harness.cuh), so that `records.harness_report`
reads it unchanged; diagnostics go to stderr. Exit codes: 0 pass, 1 verify failed, 2 bad command line (or a folder
this harness cannot run), 4 the library misbehaved (not loadable, a missing symbol, an error code on a valid call).

The library exports one C function named after the spec:
    int NAME(const A_t* A, const B_t* B, [const ]C_t* C, [D_t* D], [const Bias_t* bias], [const Scale_t* scale],
             [const Residual_t* residual], [int64_t m], float alpha, float beta, int threads)
with BASE pointers (the kernel adds each view's offset), f16 / bf16 passed as 16-bit patterns, and 0 returned on
success, 22 (EINVAL) for m outside its range or a NULL pointer it needs.

verify's reference is float64 numpy over `as_strided` views of the raw buffers built from the spec alone (it shares
no indexing code with the kernel): einsum of the contraction, alpha and beta, then the epilogue as
docs/design/epilogue.md defines it. Its pass rule is the GPU harness's. bench times the kernel and two numpy
formulations of the same views (copy + matmul, strided einsum) in the same process, interleaved; with `--roof 1`
also the compute roof, numpy's f32 matmul of two ROOF_N x ROOF_N matrices (`roof_tflops`, `roof_gemm`).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dgemm_cli.errors import SpecError
from dgemm_cli.records import HARNESS_SCHEMA_VERSION, json_number
from dgemm_cli.render import TOLERANCE
from dgemm_cli.spec import OperandView, Spec, parse_spec
from dgemm_cli.views import role_of

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_LIBRARY = 0, 1, 2, 4
EINVAL = 22
SUPPORTED_DTYPES = ("f32", "f16", "bf16")
BITS_TYPE = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
CTYPE = {"f32": "float", "f16": "uint16_t", "bf16": "uint16_t"}
# The GPU harness's patterns: the sentinel (a signalling-looking NaN no arithmetic produces) fills every element
# outside a view; the poison (the quiet NaN) fills the output's view, and C's when beta == 0 (it must not be read).
SENTINEL_BITS = {"f32": 0x7FBADBAD, "f16": 0x7D5B, "bf16": 0x7FA5}
POISON_BITS = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}
PAD_ELEMENTS = 16  # sentinel elements past every buffer's span: a write past the view's end lands in them
BASE_ALIGN = 256  # base pointers start 256-byte aligned; the shifted case moves them `align` bytes past that
CPU_VECTOR_BYTES = 64  # a spec promising less than this for some pointer also gets the shifted case
# How much an activation may grow an error (the GPU harness's dg_activation_slope), for the element bound.
ACTIVATION_SLOPE = {"gelu_tanh": 1.13, "gelu_erf": 1.13, "silu": 1.1, "sigmoid": 0.25}
EXTRA_INPUTS = ("bias", "scale", "residual")
FALLBACK_LLC_BYTES = 32 << 20
MAX_BENCH_SETS = 64
BENCH_MEMORY_BUDGET = 4 << 30  # bytes all bench sets together may take
REFERENCE_CHUNK_BYTES = 128 << 20  # float64 copies of input views the reference makes at a time
DEFAULT_SEEDS = (1, 2, 3)
SETTLE_S = 0.3  # the pause before each bench pass (bench_row)
ROOF_N = 2048  # the compute roof's square f32 matmul: 17 GFLOP, enough for a BLAS to reach its peak on many cores
PROBE_TIMEOUT_S = 60.0  # an API probe (a call the kernel must refuse) that takes longer is killed


class HarnessFailure(Exception):
    """The command cannot give a result: the report is an error object and the process exits with `exit_code`."""

    def __init__(self, exit_code: int, message: str, name: str | None = None):
        self.exit_code, self.name = exit_code, name
        super().__init__(message)


@contextmanager
def naming(spec: Spec):
    """A failure inside names the kernel in its error report, as the GPU harness's does."""
    try:
        yield
    except HarnessFailure as exc:
        exc.name = exc.name or spec.name
        raise


# ------------------------------------------------------------------------------------------------ dtypes (pure)

def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns, rounded to nearest even; NaN stays a quiet NaN of its sign."""
    f32 = np.ascontiguousarray(values, dtype=np.float32)
    u = f32.view(np.uint32)
    with np.errstate(over="ignore"):
        rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    quiet_nan = ((u >> np.uint32(16)) & np.uint32(0x8000)).astype(np.uint16) | np.uint16(0x7FC0)
    return np.where(np.isnan(f32), quiet_nan, rounded)


def float_to_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values rounded to `dtype`, as its bit patterns (uint32 for f32, uint16 for f16 and bf16)."""
    if dtype == "f32":
        return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    if dtype == "f16":
        return np.ascontiguousarray(values, dtype=np.float16).view(np.uint16)
    return bf16_bits(values)


def bits_to_float32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Bit patterns of `dtype` (any shape and strides) -> float32 values, a new contiguous array."""
    if dtype == "f32":  # astype keeps a 0-d view 0-d (ascontiguousarray would make it 1-d)
        return bits.astype(np.uint32, order="C").view(np.float32)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float32)
    wide = bits.astype(np.uint32)  # one copy, shifted in place: the baselines' conversion is timed
    wide <<= np.uint32(16)
    return wide.view(np.float32)


def bits_to_float64(bits: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # the sentinel is a signalling NaN: quieting it is no error here
        return bits_to_float32(bits, dtype).astype(np.float64)


def random_bits(rng: np.random.Generator, count: int, dtype: str, amplitude: float = 1.0) -> np.ndarray:
    """`count` values uniform in (-amplitude, amplitude), rounded to `dtype`, as bit patterns."""
    return float_to_bits(amplitude * rng.uniform(-1.0, 1.0, count), dtype)


# ------------------------------------------------------------------------------------------------ geometry (pure)

def subscripts(spec: Spec) -> tuple[str, str, str]:
    """The contraction's letters of A, B and the output, e.g. ("nchw", "kc", "nkhw")."""
    inputs, out = spec.contraction.split("->")
    a, b = inputs.split(",")
    return a, b, out


def sizes_at(spec: Spec, m: int | None) -> dict[str, int]:
    """Every letter's size with the run-time letter at m (as given for a fixed-size spec or m None)."""
    rt = spec.run_time_letter
    return spec.sizes if rt is None or m is None else {**spec.sizes, rt[0]: m}


def span_at(view: OperandView, sizes: dict[str, int]) -> int:
    """Elements a buffer must hold for `view` at these sizes: offset + largest reachable index + 1."""
    return view.offset + sum((sizes[x] - 1) * view.stride_of(x) for x in view.letters) + 1


def view_of(buffer: np.ndarray, view: OperandView, letters: str, sizes: dict[str, int]) -> np.ndarray:
    """`view` of the 1-D `buffer` (its elements from the base pointer) as an array over `letters`, in that order;
    a letter the view lacks is one it is broadcast over (stride 0). Element address: offset + sum index * stride."""
    step = buffer.itemsize
    shape = tuple(sizes[x] for x in letters)
    strides = tuple(view.stride_of(x) * step if x in view.letters else 0 for x in letters)
    return as_strided(buffer[view.offset:], shape=shape, strides=strides, writeable=buffer.flags.writeable)


def summed_terms(spec: Spec) -> int:
    """Products summed per output element."""
    _, _, out = subscripts(spec)
    return math.prod(n for x, n in spec.sizes.items() if x not in out)


def step_text(step: Any) -> str:
    """An epilogue step as the GPU harness names it: "bias[n]", "gelu_tanh", "clamp[-1.0, 1.0]"."""
    if step.view is not None:
        return f"{step.kind}[{step.view.letters}]"
    if step.kind == "activation":
        return step.activation
    return f"clamp[{step.clamp[0]!r}, {step.clamp[1]!r}]"


# ------------------------------------------------------------------------------------------------ reference (pure)

def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; math.erf elementwise is exact and only the gelu_erf reference needs it.
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


def activation(name: str, t: np.ndarray) -> np.ndarray:
    """docs/design/epilogue.md's activations in float64; relu is a comparison, so NaN stays NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "relu":
            return np.where(t < 0, 0.0, t)
        if name == "gelu_tanh":
            return 0.5 * t * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3)))
        if name == "gelu_erf":
            return 0.5 * t * (1.0 + _erf(t / math.sqrt(2.0)))
        if name == "silu":
            return t / (1.0 + np.exp(-t))
        if name == "sigmoid":
            return 1.0 / (1.0 + np.exp(-t))
        if name == "tanh":
            return np.tanh(t)
    raise ValueError(f"unknown activation {name!r}")


def contraction_f64(spec: Spec, a_bits: np.ndarray, b_bits: np.ndarray, sizes: dict[str, int],
                    chunk_bytes: int = REFERENCE_CHUNK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """The contraction of A's and B's buffers (bit patterns of their dtypes) at `sizes` in float64, and its magnitude
    sum(|a * b|), both over the output's letters. einsum with optimize=True calls BLAS: independent of the kernel
    either way. The magnitude is only the error scale of the element bound, a sum of positive terms (no
    cancellation), so float32 holds it to a relative 2^-24 k at worst; it is summed in float32, at twice float64's
    rate. The copies of the views are made a slice of one output letter at a time, each at most about `chunk_bytes`,
    so a large problem holds its output twice in float64 and its inputs once in their dtypes."""
    a_letters, b_letters, out = subscripts(spec)
    av, bv = view_of(a_bits, spec.A, a_letters, sizes), view_of(b_bits, spec.B, b_letters, sizes)
    product = np.empty([sizes[x] for x in out])
    magnitude = np.empty_like(product)
    # Slice along the largest output letter of the larger input: its float64 copy (and |copy|) shrinks the most.
    larger = a_letters if av.size >= bv.size else b_letters
    candidates = [x for x in out if x in larger]
    copy_bytes = 16 * (av.size + bv.size)
    letter = max(candidates, key=lambda x: sizes[x]) if candidates and copy_bytes > chunk_bytes else None
    total = 1 if letter is None else sizes[letter]
    step = total if letter is None else max(1, total * chunk_bytes // copy_bytes)

    def part(view: np.ndarray, letters: str, lo: int) -> np.ndarray:
        if letter is None or letter not in letters:
            return view
        index = [slice(None)] * view.ndim
        index[letters.index(letter)] = slice(lo, lo + step)
        return view[tuple(index)]

    for lo in range(0, total, step):
        a32 = bits_to_float32(part(av, a_letters, lo), spec.A.dtype)
        b32 = bits_to_float32(part(bv, b_letters, lo), spec.B.dtype)
        target = (slice(None),) * product.ndim if letter is None else tuple(
            slice(lo, lo + step) if x == letter else slice(None) for x in out)
        with np.errstate(invalid="ignore"):  # a sentinel is a signalling NaN: quieting it is no error here
            product[target] = np.einsum(spec.contraction, a32.astype(np.float64), b32.astype(np.float64),
                                        optimize=True)
            magnitude[target] = np.einsum(spec.contraction, np.abs(a32), np.abs(b32), optimize=True)
    return product, magnitude


def reached_by(spec: Spec, sizes: dict[str, int], address: int) -> np.ndarray:
    """The output elements (a boolean array over the output's letters at `sizes`) whose sum holds a term that reads
    A's element at `address` (an element offset from A's base): where a NaN there must show. A term reads A at the
    coordinates of A's letters that reach the address; the output letters among them are fixed by those
    coordinates, the others (B's) free."""
    a_letters, _, out = subscripts(spec)
    marker = np.zeros(max(span_at(spec.A, sizes), address + 1), dtype=bool)
    marker[address] = True
    reached = np.zeros([sizes[x] for x in out], dtype=bool)
    for coords in np.argwhere(view_of(marker, spec.A, a_letters, sizes)):
        at = dict(zip(a_letters, (int(i) for i in coords)))
        reached[tuple(at.get(x, slice(None)) for x in out)] = True
    return reached


def finish_reference(spec: Spec, product: np.ndarray, magnitude: np.ndarray, inputs: dict[str, np.ndarray],
                     sizes: dict[str, int], alpha: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """t = alpha * product + beta * C_old (C not read when beta == 0), then each epilogue step in order, in float64;
    with the magnitude carried alongside (the error scale of the element bound, as dg_reference_epilogue carries it).
    `inputs` holds the float64 buffers of C and the epilogue's views by slot name."""
    _, _, out = subscripts(spec)
    t = alpha * product
    mag = abs(alpha) * magnitude
    if beta != 0.0:
        c_term = beta * view_of(inputs["C"], spec.C, out, sizes)
        t = t + c_term
        mag = mag + np.abs(c_term)
    with np.errstate(invalid="ignore", over="ignore"):
        for step in spec.epilogue:
            if step.kind in ("bias", "residual"):
                v = view_of(inputs[step.kind], step.view, out, sizes)
                t = t + v
                mag = mag + np.abs(v)
            elif step.kind == "scale":
                v = view_of(inputs["scale"], step.view, out, sizes)
                t = t * v
                mag = mag * np.abs(v)
            elif step.kind == "activation":
                t = activation(step.activation, t)
                mag = mag * ACTIVATION_SLOPE.get(step.activation, 1.0)
            else:  # clamp: comparisons, so that NaN stays NaN
                lo, hi = (float(np.float32(x)) for x in step.clamp)  # the kernel compares in float32
                t = np.where(t < lo, lo, np.where(t > hi, hi, t))
    return np.broadcast_to(t, product.shape), np.broadcast_to(mag, product.shape)


# ------------------------------------------------------------------------------------------------ pass rule (pure)

@dataclass(frozen=True)
class Comparison:
    """The kernel's output against the reference, by the GPU harness's rule (dg_verify_case)."""

    max_abs_err: float
    rel_err: float
    calc_diff: float
    within_acc_bound: bool
    bad_elements: int  # finite outputs outside their element bound
    nan_elements: int  # NaN or Inf outputs where the reference is finite
    nan_lost: int  # outputs that are not NaN where the reference is
    first_fail: tuple[int, ...] | None  # the first failing element's indices over the output's letters
    got: float
    want: float

    def accurate(self, tol: float) -> bool:
        return (self.nan_elements == 0 and self.nan_lost == 0 and self.bad_elements == 0
                and (self.rel_err <= tol or self.within_acc_bound))


def calc_diff(sum_xy: float, sum_squares: float) -> float:
    """DeepGEMM's metric 1 - 2 sum(x y) / sum(x^2 + y^2): 0 for equal outputs, NaN with a NaN output."""
    if sum_squares == 0.0:
        return 0.0 if sum_xy == 0.0 else math.nan
    return 1.0 - 2.0 * sum_xy / sum_squares


def compare(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, tol: float, k_terms: int) -> Comparison:
    """Every element within max(8 tol (|want| + rms(want)), acc_bound), acc_bound = 6 sqrt(k) 2^-24 magnitude (what
    float32 evaluation of the sum may lose: it only dominates where the sum cancels); where the reference is NaN the
    output must be NaN, and those elements take no part in the norms. rel_err is ||got - want|| / ||want||."""
    got, want, magnitude = (np.asarray(x, dtype=np.float64).ravel() for x in (got, want, magnitude))
    ref_nan = np.isnan(want)
    # The norms over the elements whose reference is finite: all of them but in a NaN case (no copies then).
    finite_ref = ~ref_nan if ref_nan.any() else None
    g, w, mag = (got, want, magnitude) if finite_ref is None else (got[finite_ref], want[finite_ref],
                                                                  magnitude[finite_ref])
    sum_ref2 = float(w @ w)
    rms = math.sqrt(sum_ref2 / w.size) if w.size else 0.0
    acc_bound = (6.0 * math.sqrt(k_terms) * 2.0**-24) * mag
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.subtract(g, w)
        np.abs(err, out=err)
        got_finite = np.isfinite(g)
        bound = np.abs(w)
        bound += rms
        bound *= 8.0 * tol
        np.maximum(bound, acc_bound, out=bound)
        outside = got_finite & ~(err <= bound)
        sum_err2 = float(err @ err)
        sum_xy, sum_squares = float(g @ w), float(g @ g) + sum_ref2
    nan_lost = ref_nan & ~np.isnan(got)
    if finite_ref is None:
        bad = outside | ~got_finite
    else:
        bad = np.zeros(got.size, dtype=bool)
        bad[finite_ref] = outside | ~got_finite
        bad |= nan_lost
    max_abs_err = float(np.max(err)) if err.size else 0.0
    if np.any(np.isnan(err)) or np.any(nan_lost):
        max_abs_err = math.nan
    first = int(np.argmax(bad)) if bad.any() else None
    return Comparison(
        max_abs_err=max_abs_err,
        rel_err=math.sqrt(sum_err2 / sum_ref2) if sum_ref2 > 0.0 else math.sqrt(sum_err2),
        calc_diff=calc_diff(sum_xy, sum_squares),
        within_acc_bound=bool(sum_err2 <= float(acc_bound @ acc_bound)),
        bad_elements=int(np.count_nonzero(outside)), nan_elements=int(np.count_nonzero(~got_finite)),
        nan_lost=int(np.count_nonzero(nan_lost)),
        first_fail=None if first is None else first,  # flat; the caller unravels it over the output's shape
        got=float(got[first]) if first is not None else math.nan,
        want=float(want[first]) if first is not None else math.nan)


def worst(values: Sequence[float]) -> float:
    """The largest, NaN once any is NaN (the GPU harness's dg_max_nan)."""
    out = 0.0
    for v in values:
        out = math.nan if math.isnan(v) or math.isnan(out) else max(out, v)
    return out


# ------------------------------------------------------------------------------------------------ the folder

def load_folder_spec(folder: Path) -> Spec:
    """The typed spec of a generated folder (plan.json's `spec`). A folder this harness cannot run: exit 2."""
    path = Path(folder) / "plan.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HarnessFailure(EXIT_USAGE, f"{path}: not readable JSON ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("spec"), dict):
        raise HarnessFailure(EXIT_USAGE, f"{path}: no `spec` object; regenerate the folder")
    try:
        spec = parse_spec(record["spec"], str(path))
    except SpecError as exc:
        raise HarnessFailure(EXIT_USAGE, str(exc)) from None
    unsupported = sorted({op.dtype for op in (*spec.operands, *spec.extra_operands)} - set(SUPPORTED_DTYPES))
    if unsupported or spec.scales:
        raise HarnessFailure(EXIT_USAGE, f"{spec.name}: dtype {', '.join(unsupported) or 'e4m3'} is not part of the "
                                         "CPU backend (f32, f16 and bf16 only)")
    return spec


def slot_views(spec: Spec) -> dict[str, OperandView]:
    """Every buffer of the C API by slot name, in its order: A, B, C, then D, bias, scale, residual as present."""
    return {"A": spec.A, "B": spec.B, "C": spec.C, **{op.name: op for op in spec.extra_operands}}


def output_name(spec: Spec) -> str:
    return "D" if spec.D is not None else "C"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def device_name(threads: int) -> str:
    return f"{cpu_model()} ({threads or available_cores()} threads)"


def last_level_cache_bytes() -> int:
    """The largest cache of cpu0 (sysfs), or FALLBACK_LLC_BYTES where sysfs does not say."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else FALLBACK_LLC_BYTES


# ------------------------------------------------------------------------------------------------ the library

class KernelLibrary:
    """The folder's entry point through ctypes, looked up once. `call` takes each slot's address (None: NULL)."""

    def __init__(self, library: Path, spec: Spec):
        try:
            self.lib = ctypes.CDLL(str(Path(library).resolve()))
        except OSError as exc:
            raise HarnessFailure(EXIT_LIBRARY, f"cannot load {library}: {exc}") from None
        try:
            self.fn = getattr(self.lib, spec.name)
        except AttributeError:
            raise HarnessFailure(EXIT_LIBRARY, f"{library} exports no function {spec.name!r}") from None
        self.run_time = spec.run_time_letter is not None
        self.slots = tuple(slot_views(spec))
        self.fn.argtypes = ([ctypes.c_void_p] * len(self.slots) + ([ctypes.c_int64] if self.run_time else [])
                            + [ctypes.c_float, ctypes.c_float, ctypes.c_int])
        self.fn.restype = ctypes.c_int

    def arguments(self, pointers: dict[str, int | None], m: int | None, alpha: float, beta: float,
                  threads: int) -> tuple:
        """The argument tuple of one call, built once so that a timed call converts nothing."""
        args: list[Any] = [ctypes.c_void_p(pointers.get(x)) for x in self.slots]
        if self.run_time:
            args.append(ctypes.c_int64(m))
        return (*args, ctypes.c_float(alpha), ctypes.c_float(beta), ctypes.c_int(threads))

    def call(self, pointers: dict[str, int | None], m: int | None, alpha: float, beta: float, threads: int) -> int:
        return self.fn(*self.arguments(pointers, m, alpha, beta, threads))


@dataclass
class SlotBuffer:
    """One buffer of the C API: its elements as bit patterns from the base pointer (`bits`, span and the sentinel
    pad), the base `shift` bytes past a BASE_ALIGN boundary."""

    name: str
    view: OperandView
    raw: np.ndarray  # the allocation, bytes
    bits: np.ndarray  # the elements from the base pointer, as bit patterns

    @classmethod
    def allocate(cls, name: str, view: OperandView, elements: int, shift: int) -> SlotBuffer:
        es = view.elem_bytes
        raw = np.zeros(elements * es + BASE_ALIGN + shift, dtype=np.uint8)
        start = (-raw.ctypes.data) % BASE_ALIGN + shift
        bits = raw[start:start + elements * es].view(BITS_TYPE[view.dtype])
        bits[:] = SENTINEL_BITS[view.dtype]
        return cls(name, view, raw, bits)

    @property
    def address(self) -> int:
        return self.bits.ctypes.data


def allocate_buffers(spec: Spec, shift_by_align: bool = False) -> dict[str, SlotBuffer]:
    """Every slot's buffer, sized for the largest run-time size plus one (a kernel that wrongly accepts hi + 1 then
    writes into sentinels, not past the allocation) and PAD_ELEMENTS more; base pointers BASE_ALIGN-aligned, or with
    `shift_by_align` exactly each view's promised `align` bytes past that."""
    rt = spec.run_time_letter
    sizes = sizes_at(spec, rt[2] + 1 if rt else None)
    return {x: SlotBuffer.allocate(x, v, span_at(v, sizes) + PAD_ELEMENTS,
                                   v.align % BASE_ALIGN if shift_by_align else 0)
            for x, v in slot_views(spec).items()}


def in_view_mask(view: OperandView, letters: str, sizes: dict[str, int], elements: int) -> np.ndarray:
    mask = np.zeros(elements, dtype=bool)
    view_of(mask, view, letters, sizes)[...] = True
    return mask


# ------------------------------------------------------------------------------------------------ verify

def verify_sizes(spec: Spec, seed: int) -> list[int]:
    """A run-time spec's sizes: the small ones and powers of two where tilings change, both ends, and 3 drawn from
    `seed` (as the GPU harness's dg_verify_sizes, without bucket edges)."""
    _, lo, hi = spec.run_time_letter
    rng = np.random.default_rng([seed, 0x51235])
    drawn = [int(x) for x in rng.integers(lo, hi + 1, 3)]
    return sorted({m for m in (1, 2, 3, 7, 8, 9, 16, 17, 63, 64, lo, hi, *drawn) if lo <= m <= hi})


def additive_amplitude(spec: Spec) -> float:
    """bias and residual are drawn at the typical size of alpha * A.B (sqrt(k) / 3 for uniform inputs), so that a
    forgotten or misplaced one shows beside the product."""
    return max(1.0, abs(spec.alpha) * math.sqrt(summed_terms(spec)) / 3.0)


class Verifier:
    """One verify run: the buffers (allocated once), the kernel and the seed's inputs and reference product."""

    def __init__(self, spec: Spec, kernel: KernelLibrary, threads: int, shift_by_align: bool = False):
        self.spec, self.kernel, self.threads = spec, kernel, threads
        self.buffers = allocate_buffers(spec, shift_by_align)
        self.shifted = shift_by_align
        self.out = output_name(spec)
        self.letters = subscripts(spec)[2]
        self.tol = max(TOLERANCE[v.dtype] for v in slot_views(spec).values())
        self.k_terms = summed_terms(spec)
        self.seed: int | None = None

    @property
    def pointers(self) -> dict[str, int | None]:
        return {x: b.address for x, b in self.buffers.items()}

    def snapshot(self) -> dict[str, np.ndarray]:
        return {x: b.bits.copy() for x, b in self.buffers.items()}

    def load_seed(self, seed: int) -> None:
        """Fresh inputs for `seed` over every input's span (its pad keeps the sentinel), C_old over C's view at the
        largest size, their float64 images, and the product at the largest size."""
        spec, rng = self.spec, np.random.default_rng(seed)
        self.seed = seed
        amplitude = additive_amplitude(spec)
        full = sizes_at(spec, spec.run_time_letter[2] if spec.run_time_letter else None)
        for x, buf in self.buffers.items():
            if x in ("C", "D"):
                continue
            n = buf.bits.size - PAD_ELEMENTS
            buf.bits[:n] = random_bits(rng, n, buf.view.dtype, amplitude if x in ("bias", "residual") else 1.0)
        c = self.buffers["C"]
        self.c_old = np.full_like(c.bits, SENTINEL_BITS[c.view.dtype])
        c_view = view_of(self.c_old, spec.C, self.letters, full)
        c_view[...] = random_bits(rng, c_view.size, spec.C.dtype).reshape(c_view.shape)
        # float64 images of what the reference reads elementwise (C_old, the epilogue's views); A and B are read
        # through their bits, a slice at a time (contraction_f64).
        self.inputs = {x: bits_to_float64(b.bits, b.view.dtype) for x, b in self.buffers.items()
                       if x in EXTRA_INPUTS}
        self.inputs["C"] = bits_to_float64(self.c_old, spec.C.dtype)
        self.product, self.magnitude = contraction_f64(spec, self.buffers["A"].bits, self.buffers["B"].bits, full)
        self.input_bits = {x: b.bits.copy() for x, b in self.buffers.items() if x not in ("C", "D")}

    def share_seed(self, other: Verifier) -> None:
        """`other`'s inputs, copied into this verifier's buffers (the same layout from other base pointers), and its
        reference: the shifted case runs the kernel on the seed's data without a second reference."""
        self.seed = other.seed
        for x, bits in other.input_bits.items():
            self.buffers[x].bits[:] = bits
        self.c_old, self.inputs, self.input_bits = other.c_old, other.inputs, other.input_bits
        self.product, self.magnitude = other.product, other.magnitude

    def rows(self, array: np.ndarray, m: int | None) -> np.ndarray:
        """The reference at size m: the run-time letter is one of the output's letters, so its first m rows."""
        rt = self.spec.run_time_letter
        if rt is None or m is None:
            return array
        index = [slice(None)] * array.ndim
        index[self.letters.index(rt[0])] = slice(0, m)
        return array[tuple(index)]

    def fill_c(self, m: int | None, beta: float) -> None:
        """C's buffer: the sentinel, and in its view at size m C_old (beta != 0) or poison (C must not be read)."""
        spec, sizes = self.spec, sizes_at(self.spec, m)
        c = self.buffers["C"].bits
        c[:] = SENTINEL_BITS[spec.C.dtype]
        c_view = view_of(c, spec.C, self.letters, sizes)
        c_view[...] = view_of(self.c_old, spec.C, self.letters, sizes) if beta != 0.0 else POISON_BITS[spec.C.dtype]

    def prepare_output(self, m: int | None, beta: float) -> None:
        """C as fill_c leaves it; D's buffer: the sentinel, poison in its view (every element must be written)."""
        self.fill_c(m, beta)
        if self.spec.D is not None:
            d, sizes = self.buffers["D"].bits, sizes_at(self.spec, m)
            d[:] = SENTINEL_BITS[self.spec.D.dtype]
            view_of(d, self.spec.D, self.letters, sizes)[...] = POISON_BITS[self.spec.D.dtype]

    def launch(self, m: int | None, alpha: float, beta: float) -> None:
        rc = self.kernel.call(self.pointers, m, alpha, beta, self.threads)
        if rc != 0:
            at = f" at {self.spec.run_time_letter[0]} = {m}" if m is not None else ""
            raise HarnessFailure(EXIT_LIBRARY, f"{self.spec.name} returned {rc} on a valid call{at} "
                                               f"(alpha {alpha:g}, beta {beta:g})")

    def nan_address(self, m: int | None, rng: np.random.Generator) -> int:
        """The element of A that a random output element's random summed term reads."""
        spec, sizes = self.spec, sizes_at(self.spec, m)
        a = spec.A.offset
        for x in spec.A.letters:
            a += int(rng.integers(0, sizes[x])) * spec.A.stride_of(x)
        return a

    def case(self, m: int | None, alpha: float, beta: float, nan_input: bool = False) -> dict[str, Any]:
        """One launch on the seed's inputs at size m, checked: accuracy against the reference, the output's holes
        (sentinels outside its view, past its span too), C unchanged with D, every input unchanged."""
        spec, sizes = self.spec, sizes_at(self.spec, m)
        a_buf = self.buffers["A"]
        product, magnitude = self.rows(self.product, m), self.rows(self.magnitude, m)
        nan_at = None
        if nan_input:
            # The reference of A with one NaN: the product with NaN wherever a term reads it (a NaN times any
            # finite value is NaN, and it stays NaN through the sum), the rest as it was.
            nan_at = self.nan_address(m, np.random.default_rng([self.seed, 0x4E414E]))
            a_buf.bits[nan_at] = POISON_BITS[spec.A.dtype]
            product = np.where(reached_by(spec, sizes, nan_at), np.nan, product)
        want, mag = finish_reference(spec, product, magnitude, self.inputs, sizes, alpha, beta)
        self.prepare_output(m, beta)
        c_before = self.buffers["C"].bits.copy()
        self.launch(m, alpha, beta)

        out_buf = self.buffers[self.out]
        out_view = slot_views(spec)[self.out]
        got = bits_to_float64(view_of(out_buf.bits, out_view, self.letters, sizes), out_view.dtype)
        cmp = compare(got, want, mag, self.tol, self.k_terms)
        mask = in_view_mask(out_view, self.letters, sizes, out_buf.bits.size)
        holes = np.flatnonzero(~mask & (out_buf.bits != BITS_TYPE[out_view.dtype](SENTINEL_BITS[out_view.dtype])))
        c_written = int(np.count_nonzero(self.buffers["C"].bits != c_before)) if spec.D is not None else 0
        if nan_at is not None:
            a_buf.bits[nan_at] = self.input_bits["A"][nan_at]
        inputs_written = sum(int(np.count_nonzero(self.buffers[x].bits != bits)) for x, bits in self.input_bits.items())
        if nan_at is not None:
            inputs_written -= int(self.buffers["A"].bits[nan_at] != self.input_bits["A"][nan_at])
        passed = cmp.accurate(self.tol) and holes.size == 0 and c_written == 0 and inputs_written == 0

        run: dict[str, Any] = {} if m is None else {"m": m}
        run.update(seed=self.seed, shifted=self.shifted)
        if spec.epilogue:
            run["nan_input"] = nan_input
        run.update(alpha=alpha, beta=beta, passed=passed, max_abs_err=cmp.max_abs_err, rel_err=cmp.rel_err,
                   calc_diff=cmp.calc_diff, within_acc_bound=cmp.within_acc_bound, bad_elements=cmp.bad_elements,
                   nan_elements=cmp.nan_elements)
        if spec.epilogue:
            run["nan_lost"] = cmp.nan_lost
        run.update(holes_written=int(holes.size), first_hole=int(holes[0]) if holes.size else None)
        if spec.D is not None:
            run["c_written"] = c_written
        run["inputs_written"] = inputs_written
        run["first_fail"] = None
        if cmp.first_fail is not None:
            index = np.unravel_index(cmp.first_fail, got.shape) if got.ndim else ()
            fail: dict[str, Any] = {} if m is None else {"m": m}
            fail.update(seed=self.seed, alpha=alpha, beta=beta)
            if nan_input:
                fail["nan_input"] = True
            fail.update(index={x: int(i) for x, i in zip(self.letters, index)}, got=cmp.got, want=cmp.want)
            run["first_fail"] = fail
        where = f"{spec.run_time_letter[0]}={m} " if m is not None else ""
        print(f"host_harness: verify {where}seed={self.seed} alpha={alpha:g} beta={beta:g}"
              f"{' (NaN input)' if nan_input else ''}{' (shifted)' if self.shifted else ''}: "
              f"{'PASS' if passed else 'FAIL'} rel_err={cmp.rel_err:.3g} calc_diff={cmp.calc_diff:.3g} "
              f"max_abs_err={cmp.max_abs_err:.3g} bad={cmp.bad_elements} nan={cmp.nan_elements} "
              f"holes_written={holes.size} c_written={c_written} inputs_written={inputs_written}", file=sys.stderr)
        return run

    def repeat_differed(self, m: int | None, repeats: int) -> int:
        """From the same inputs and output buffer, `repeats` launches after a first must leave the output's whole
        buffer bit-identical to the first's. Returns how many differed."""
        spec = self.spec
        # The output as the cases left it is a valid start (finite, sentinels in the holes); with D, C gets C_old
        # again (the beta == 0 case poisoned it).
        if spec.D is not None:
            self.fill_c(m, spec.beta)
        out = self.buffers[self.out].bits
        start = out.copy()
        c_start = self.buffers["C"].bits.copy()
        first = None
        differed = 0
        for _ in range(repeats + 1):
            out[:] = start
            self.buffers["C"].bits[:] = c_start
            self.launch(m, spec.alpha, spec.beta)
            if first is None:
                first = out.copy()
            elif not np.array_equal(first, out):
                differed += 1
        return differed

    def null_probes(self, m: int | None) -> tuple[list[dict[str, Any]], bool | None]:
        """The API contract: a NULL pointer the kernel needs (A, B, the output, C when beta != 0) is refused with 22
        and nothing written. With D, C = NULL and beta == 0 must run (None without D)."""
        spec = self.spec
        needed = ["A", "B", self.out] + (["C"] if spec.D is not None else [])
        probes = []
        for x in needed:
            beta = spec.beta
            what = f"{x} = nullptr"
            if x == "C":
                beta = spec.beta if spec.beta != 0.0 else 1.0
                what += f" with beta = {beta:g}"
            pointers = {**self.pointers, x: None}
            probes.append({"probe": what, "rejected": self.expect_rejected(pointers, m, beta, what)})
        null_c_accepted = None
        if spec.D is not None:
            what = "C = nullptr and beta = 0 (allowed with D)"
            outcome = isolated(lambda: {"rc": self.kernel.call({**self.pointers, "C": None}, m, spec.alpha, 0.0,
                                                               self.threads)})
            null_c_accepted = outcome.get("rc") == 0
            if not null_c_accepted:
                print(f"host_harness: called with {what} the kernel {describe_outcome(outcome)}", file=sys.stderr)
        return probes, null_c_accepted

    def expect_rejected(self, pointers: dict[str, int | None], m: int | None, beta: float, what: str) -> bool:
        """Whether the kernel refuses this call with 22 and writes nothing. The call runs in a forked child
        (isolated): a kernel that dereferences the NULL or runs past the buffers costs this probe, not the report."""
        def probe() -> dict[str, Any]:
            before = self.snapshot()
            rc = self.kernel.call(pointers, m, self.spec.alpha, beta, self.threads)
            wrote = [x for x, bits in before.items() if not np.array_equal(bits, self.buffers[x].bits)]
            return {"rc": rc, "wrote": wrote}

        outcome = isolated(probe)
        rejected = outcome.get("rc") == EINVAL and not outcome.get("wrote")
        if not rejected:
            print(f"host_harness: called with {what} the kernel {describe_outcome(outcome)}", file=sys.stderr)
        return rejected


def isolated(probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """probe() run in a forked child (its result comes back as JSON through a pipe), so that a kernel crashing on a
    wrong argument loses that probe, not the report: {"crashed": "signal 11"} then. In-process without fork."""
    if not hasattr(os, "fork"):
        return probe()
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            faulthandler.disable()  # a crash is this probe's answer, not a traceback to print
            os.close(read_fd)
            os.write(write_fd, json.dumps(probe()).encode())
        finally:
            os._exit(0)  # never back into the caller's code: the child only answers
    os.close(write_fd)
    chunks = []
    # A child that hangs (a forked OpenMP runtime can) is killed: the probe then reads as crashed.
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while select.select([read_fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    else:
        os.kill(pid, signal.SIGKILL)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if chunks:
        return json.loads(b"".join(chunks))
    why = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
    return {"crashed": why}


def describe_outcome(outcome: dict[str, Any]) -> str:
    if "crashed" in outcome:
        return f"crashed ({outcome['crashed']})"
    text = f"returned {outcome['rc']}"
    return text + (f" and wrote {', '.join(outcome['wrote'])}" if outcome.get("wrote") else "")


def summarize(m: int | None, runs: list[dict[str, Any]], repeat_differed: int) -> dict[str, Any]:
    """One size's outcome (the whole problem's, for a fixed-size one): the worst run's errors, the first failure."""
    first = next((r["first_fail"] for r in runs if r["first_fail"] is not None), None)
    return {"m": m, "passed": repeat_differed == 0 and all(r["passed"] for r in runs),
            "max_abs_err": worst([r["max_abs_err"] for r in runs]), "rel_err": worst([r["rel_err"] for r in runs]),
            "calc_diff": worst([r["calc_diff"] for r in runs]), "first_fail": first,
            "repeat_differed": repeat_differed}


def report_header(command: str, spec: Spec, threads: int, library: Path) -> dict[str, Any]:
    return {"schema_version": HARNESS_SCHEMA_VERSION, "command": command, "name": spec.name, "arch": "host",
            "device": device_name(threads), "threads": threads or available_cores(), "library": str(library),
            "dtype": spec.A.dtype, "output": output_name(spec), "epilogue": [step_text(s) for s in spec.epilogue]}


def dynamic_range(spec: Spec) -> dict[str, Any]:
    letter, lo, hi = spec.run_time_letter
    return {"letter": letter, "lo": lo, "hi": hi}


def check_sizes(spec: Spec, sizes: Sequence[int] | None) -> None:
    if not sizes:
        return
    rt = spec.run_time_letter
    if rt is None:
        raise HarnessFailure(EXIT_USAGE, "--m: this kernel has no run-time size")
    for m in sizes:
        if not rt[1] <= m <= rt[2]:
            raise HarnessFailure(EXIT_USAGE, f"--m: {m} is outside the run-time range {rt[1]}..{rt[2]} of '{rt[0]}'")


def verify(folder: Path, library: Path, seeds: Sequence[int] = DEFAULT_SEEDS, samples: int = 256, repeat: int = 0,
           sizes: Sequence[int] | None = None, threads: int = 0) -> dict[str, Any]:
    """The verify report of `library` built from `folder` (see the module's doc). `samples` is accepted for the GPU
    harness's command line and unused: the reference here covers every element. Raises HarnessFailure."""
    del samples
    spec = load_folder_spec(folder)
    with naming(spec):
        check_sizes(spec, sizes)
        kernel = KernelLibrary(library, spec)
        rt = spec.run_time_letter
        m_list: list[int | None] = [None]
        if rt is not None:
            m_list = sorted(set(sizes)) if sizes else verify_sizes(spec, seeds[0] if seeds else 0)
        hi = rt[2] if rt else None

        # The kernel receives alpha and beta as float32; the reference uses the same values.
        alpha, beta = float(np.float32(spec.alpha)), float(np.float32(spec.beta))
        v = Verifier(spec, kernel, threads)
        # The API contract first, on sentinel-filled buffers: a rejected call must write nothing.
        api_probes, null_c_accepted = v.null_probes(hi)
        m_probes = []
        if rt is not None:
            for m in sorted({rt[1] - 1, rt[2] + 1}):
                what = f"{rt[0]} = {m} (outside {rt[1]}..{rt[2]})"
                m_probes.append({"m": m, "rejected": v.expect_rejected(v.pointers, m, spec.beta, what)})

        runs: dict[int | None, list[dict[str, Any]]] = {m: [] for m in m_list}
        repeats: dict[int | None, int] = dict.fromkeys(m_list, 0)
        for seed in seeds:
            v.load_seed(seed)
            for m in m_list:
                runs[m].append(v.case(m, alpha, beta))
                if beta != 0.0:
                    runs[m].append(v.case(m, alpha, 0.0))
                elif spec.D is not None:  # the caller passes beta at run time: C is read wherever it is not 0
                    runs[m].append(v.case(m, alpha, 1.0))
                if seed == seeds[0] and repeat > 0:
                    repeats[m] = v.repeat_differed(m, repeat)
                if spec.epilogue:  # NaN must get through the epilogue: one case with a NaN in A
                    runs[m].append(v.case(m, alpha, beta, nan_input=True))
        # Base pointers exactly `align` bytes past a 256-byte boundary, where the spec promises less than a CPU vector:
        # the kernel's unaligned paths get verified too, on the last seed's inputs and reference.
        if seeds and any(x.align < CPU_VECTOR_BYTES for x in slot_views(spec).values()):
            shifted = Verifier(spec, kernel, threads, shift_by_align=True)
            shifted.share_seed(v)
            for m in m_list:
                runs[m].append(shifted.case(m, alpha, beta))

    results = [summarize(m, runs[m], repeats[m]) for m in m_list]
    api_null_rejected = all(p["rejected"] for p in api_probes)
    api_m_rejected = all(p["rejected"] for p in m_probes)
    passed = (api_null_rejected and null_c_accepted is not False and api_m_rejected
              and all(r["passed"] for r in results))
    report = report_header("verify", spec, threads, library)
    report.update(passed=passed, tol=v.tol, max_abs_err=worst([r["max_abs_err"] for r in results]),
                  rel_err=worst([r["rel_err"] for r in results]), calc_diff=worst([r["calc_diff"] for r in results]),
                  first_fail=next((r["first_fail"] for r in results if r["first_fail"] is not None), None),
                  api_null_rejected=api_null_rejected)
    if null_c_accepted is not None:
        report["api_null_c_accepted"] = null_c_accepted
    report.update(api_probes=api_probes, repeat=repeat, repeat_differed=sum(repeats.values()),
                  runs=[r for m in m_list for r in runs[m]])
    if rt is not None:
        report.update(dynamic=dynamic_range(spec), api_m_rejected=api_m_rejected, api_m_probes=m_probes,
                      m_cases=results)
        for r in results:
            if not r["passed"]:
                print(f"host_harness: verify {spec.name}: FAILED at {rt[0]} = {r['m']}", file=sys.stderr)
    print(f"host_harness: verify {spec.name}: {'PASSED' if passed else 'FAILED'}", file=sys.stderr)
    return report



# ------------------------------------------------------------------------------------------------ bench: baselines

DEFAULT_WARMUP, DEFAULT_REPS = 3, 20


def gemm_letters(spec: Spec) -> dict[str, str]:
    """The contraction's letters by role (views.role_of): batch (in A, B and C), m (A and C), n (B and C), k (summed),
    each in the order the output, respectively the spec's sizes, name them."""
    out = subscripts(spec)[2]
    groups = {"batch": "", "m": "", "n": "", "k": ""}
    for x in out:
        groups[role_of(x, spec)] += x
    groups["k"] = "".join(x for x in spec.sizes if x not in out)
    return groups


def erf_f32(x: np.ndarray) -> np.ndarray:
    """erf in float32 numpy for the baselines' gelu_erf (Abramowitz and Stegun 7.1.26: |error| < 1.5e-7, under
    4e-7 evaluated in float32, a few float32 ulps near 1): numpy has no erf, and an element-by-element math.erf
    would time Python, not numpy."""
    a = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (np.float32(1.421413741)
                + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return np.copysign(np.float32(1.0) - poly * np.exp(-a * a), x)


def activation_f32(name: str, t: np.ndarray) -> np.ndarray:
    if name == "gelu_erf":
        return np.float32(0.5) * t * (np.float32(1.0) + erf_f32(t * np.float32(1.0 / math.sqrt(2.0))))
    return activation(name, t).astype(np.float32, copy=False)


def epilogue_f32(spec: Spec, t: np.ndarray, views: dict[str, np.ndarray], alpha: float, beta: float) -> np.ndarray:
    """alpha * t + beta * C, then the epilogue steps, elementwise in float32 numpy (the baselines' epilogue).
    `views` holds C's and the epilogue views' bit patterns over the output's letters."""
    if alpha != 1.0:
        t = np.float32(alpha) * t
    if beta != 0.0:
        t = t + np.float32(beta) * bits_to_float32(views["C"], spec.C.dtype)
    for step in spec.epilogue:
        if step.kind in ("bias", "residual"):
            t = t + bits_to_float32(views[step.kind], step.view.dtype)
        elif step.kind == "scale":
            t = t * bits_to_float32(views["scale"], step.view.dtype)
        elif step.kind == "activation":
            t = activation_f32(step.activation, t)
        else:
            lo, hi = (np.float32(x) for x in step.clamp)
            t = np.where(t < lo, lo, np.where(t > hi, hi, t))
    return t


def store(out_view: np.ndarray, t: np.ndarray, dtype: str) -> None:
    """t (over the output's letters) rounded to `dtype` into the output's strided bit view."""
    out_view[...] = float_to_bits(t, dtype).reshape(t.shape)


def as_f32(bits_view: np.ndarray, dtype: str) -> np.ndarray:
    """A strided view of bit patterns as float32: the same memory for f32 (no copy), a converted copy for 16 bits."""
    return bits_view.view(np.float32) if dtype == "f32" else bits_to_float32(bits_view, dtype)


def output_side(spec: Spec, sizes: dict[str, int],
                buffers: dict[str, SlotBuffer]) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """What a baseline's epilogue reads (C and the epilogue's views, over the output's letters), the output's view
    it stores to, and the output's dtype."""
    out = subscripts(spec)[2]
    views = {x: view_of(buffers[x].bits, slot_views(spec)[x], out, sizes) for x in ("C", *EXTRA_INPUTS)
             if x in buffers}
    out_name = output_name(spec)
    return (views, view_of(buffers[out_name].bits, slot_views(spec)[out_name], out, sizes),
            slot_views(spec)[out_name].dtype)


def copy_matmul(spec: Spec, sizes: dict[str, int], buffers: dict[str, SlotBuffer]) -> Callable[[], None]:
    """numpy.matmul on contiguous f32 copies: A as batch x M x K, B as batch x K x N (broadcast letters with stride
    0), the copies (and 16-bit conversions) part of the time; then the epilogue and the store to the output view."""
    g = gemm_letters(spec)
    out = subscripts(spec)[2]
    shape = {r: math.prod(sizes[x] for x in g[r]) for r in g}
    a_view = view_of(buffers["A"].bits, spec.A, g["batch"] + g["m"] + g["k"], sizes)
    b_view = view_of(buffers["B"].bits, spec.B, g["batch"] + g["k"] + g["n"], sizes)
    product_letters = g["batch"] + g["m"] + g["n"]
    to_out = [product_letters.index(x) for x in out]
    views, out_view, out_dtype = output_side(spec, sizes, buffers)

    def run() -> None:
        a = np.ascontiguousarray(as_f32(a_view, spec.A.dtype)).reshape(shape["batch"], shape["m"], shape["k"])
        b = np.ascontiguousarray(as_f32(b_view, spec.B.dtype)).reshape(shape["batch"], shape["k"], shape["n"])
        product = np.matmul(a, b).reshape([sizes[x] for x in product_letters]).transpose(to_out)
        store(out_view, epilogue_f32(spec, product, views, spec.alpha, spec.beta), out_dtype)

    return run


def strided_einsum(spec: Spec, sizes: dict[str, int], buffers: dict[str, SlotBuffer]) -> Callable[[], None]:
    """numpy.einsum(contraction, A, B, optimize=True) on the strided f32 views (16-bit inputs converted first, that
    conversion part of the time); then the epilogue and the store to the output view."""
    a_letters, b_letters, _ = subscripts(spec)
    a_view = view_of(buffers["A"].bits, spec.A, a_letters, sizes)
    b_view = view_of(buffers["B"].bits, spec.B, b_letters, sizes)
    views, out_view, out_dtype = output_side(spec, sizes, buffers)

    def run() -> None:
        product = np.einsum(spec.contraction, as_f32(a_view, spec.A.dtype), as_f32(b_view, spec.B.dtype),
                            optimize=True)
        store(out_view, epilogue_f32(spec, np.asarray(product), views, spec.alpha, spec.beta), out_dtype)

    return run


BASELINES: dict[str, Callable[[Spec, dict[str, int], dict[str, SlotBuffer]], Callable[[], None]]] = {
    "copy + matmul": copy_matmul,
    "einsum": strided_einsum,
}


# ------------------------------------------------------------------------------------------------ bench

def bench_sizes(spec: Spec) -> list[int]:
    _, lo, hi = spec.run_time_letter
    return sorted({lo, (lo + hi) // 2, hi})


def work(spec: Spec, sizes: dict[str, int]) -> tuple[float, float]:
    """Flops and bytes of one call: the inputs count the unique elements they read (a broadcast letter once), the
    output is written, and C read too when beta != 0 (the GPU harness's dg_work)."""
    flops = 2.0 * math.prod(sizes.values())
    views = slot_views(spec)
    total = 0.0
    for x in ("A", "B", *EXTRA_INPUTS):
        if x in views:
            v = views[x]
            total += v.elem_bytes * math.prod(sizes[y] for y, st in zip(v.letters, v.strides) if st != 0)
    count = math.prod(sizes[x] for x in subscripts(spec)[2])
    total += count * views[output_name(spec)].elem_bytes
    if spec.beta != 0.0:
        total += count * spec.C.elem_bytes
    return flops, total


def median_us(samples_ns: Sequence[int]) -> float:
    return float(np.median(np.asarray(samples_ns, dtype=np.float64))) / 1e3


def time_runs(run: Callable[[int], None], nsets: int, count: int, start: int = 0) -> list[int]:
    """`count` runs, each on the next buffer set, each timed on its own (perf_counter_ns)."""
    samples = []
    for r in range(count):
        i = (start + r) % nsets
        t0 = time.perf_counter_ns()
        run(i)
        samples.append(time.perf_counter_ns() - t0)
    return samples


def bench_sets(spec: Spec, llc_bytes: int) -> list[dict[str, SlotBuffer]]:
    """Buffer sets whose total exceeds twice the last-level cache (at most MAX_BENCH_SETS, within
    BENCH_MEMORY_BUDGET), each filled at random, so that no timed run finds its inputs in cache."""
    set_bytes = sum(b.raw.nbytes for b in allocate_buffers(spec).values())
    # At least two sets: a call's inputs are then always the ones the previous call did not touch.
    nsets = min(max(-(-2 * llc_bytes // set_bytes), 2), MAX_BENCH_SETS, max(BENCH_MEMORY_BUDGET // set_bytes, 1))
    sets = []
    for i in range(nsets):
        rng = np.random.default_rng([0x5EED, i])
        buffers = allocate_buffers(spec)
        for b in buffers.values():
            b.bits[:] = random_bits(rng, b.bits.size, b.view.dtype)
        sets.append(buffers)
    return sets


def copy_gbps(llc_bytes: int, reps: int) -> float:
    """What the memory system streams in the same process: numpy copying 2x the last-level cache, read + write
    bytes a second (median of `reps`)."""
    src = np.ones(2 * llc_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    samples = time_runs(lambda _: np.copyto(dst, src), 1, max(reps, 3))
    return 2.0 * src.nbytes / (median_us(samples) * 1e-6) / 1e9


def roof(reps: int) -> tuple[float, str]:
    """The compute roof in the same process: TFLOP/s of numpy's f32 matmul (its BLAS, default threads) of two random
    ROOF_N x ROOF_N matrices, the median of `reps` runs (3 to 10) after a pause and one untimed run. f32 is the
    roof of every host dtype: the cpu family converts 16-bit inputs to f32 while packing."""
    rng = np.random.default_rng(0x600F)
    a, b = (rng.uniform(-1.0, 1.0, (ROOF_N, ROOF_N)).astype(np.float32) for _ in range(2))
    out = np.empty_like(a)
    time.sleep(SETTLE_S)
    np.matmul(a, b, out=out)
    samples = time_runs(lambda _: np.matmul(a, b, out=out), 1, max(3, min(reps, 10)))
    what = f"numpy float32 matmul {ROOF_N}x{ROOF_N}x{ROOF_N} (its BLAS, default threads)"
    return 2.0 * ROOF_N ** 3 / (median_us(samples) * 1e-6) / 1e12, what


def bench_row(spec: Spec, kernel: KernelLibrary, sets: list[dict[str, SlotBuffer]], m: int | None, warmup: int,
              reps: int, baseline: bool, threads: int) -> dict[str, Any]:
    """One size's times. Both sides run `reps` times in the order ours, the baselines, the baselines in reverse,
    ours, so that each is timed once right after itself and once right after the other side."""
    sizes = sizes_at(spec, m)
    nsets = len(sets)
    calls = [kernel.arguments({x: b.address for x, b in s.items()}, m, spec.alpha, spec.beta, threads) for s in sets]
    fn = kernel.fn

    def ours(i: int) -> None:
        rc = fn(*calls[i])
        if rc != 0:
            raise HarnessFailure(EXIT_LIBRARY, f"{spec.name} returned {rc} on a valid call (bench)")

    sides: list[tuple[str, Callable[[int], None]]] = [("ours", ours)]
    if baseline:
        for name, make in BASELINES.items():
            runs = [make(spec, sizes, s) for s in sets]
            sides.append((name, lambda i, runs=runs: runs[i]()))
    passes: dict[str, list[list[int]]] = {name: [] for name, _ in sides}
    for _, run in sides:
        time_runs(run, nsets, warmup)
    order = sides + sides[:0:-1] + sides[:1] if baseline else sides
    for name, run in order:
        # The previous side's idle threads spin before they sleep (OpenBLAS's workers about 2^28 cycles, libgomp's
        # its spin count) and would take a core from this side: each pass starts once they sleep, after one untimed
        # run that wakes this side's own.
        time.sleep(SETTLE_S)
        time_runs(run, nsets, 1)
        passes[name].append(time_runs(run, nsets, reps, start=len(passes[name]) * reps))

    flops, total_bytes = work(spec, sizes)
    us = median_us([t for p in passes["ours"] for t in p])
    candidates = [{"formulation": name, **({"epilogue": "elementwise"} if spec.epilogue or spec.beta != 0.0 else {}),
                   "us": median_us([t for p in passes[name] for t in p]),
                   "us_passes": [median_us(p) for p in passes[name]]} for name, _ in sides[1:]]
    best = min(candidates, key=lambda c: c["us"]) if candidates else None
    row: dict[str, Any] = {} if m is None else {"m": m}
    row.update(us=us, tflops=flops / (us * 1e-6) / 1e12, gbps=total_bytes / (us * 1e-6) / 1e9, us_stream=None,
               us_passes=[median_us(p) for p in passes["ours"]],
               baseline="numpy" if baseline else "skipped (--baseline 0)")
    if best is None:
        row.update(baseline_formulation=None, baseline_epilogue=None, baseline_us=None, baseline_tflops=None,
                   baseline_us_stream=None, baseline_us_passes=None, ratio=None)
    else:
        row.update(baseline_formulation=best["formulation"], baseline_epilogue=best.get("epilogue"),
                   baseline_us=best["us"], baseline_tflops=flops / (best["us"] * 1e-6) / 1e12,
                   baseline_us_stream=None, baseline_us_passes=best["us_passes"], ratio=best["us"] / us)
    row["baseline_candidates"] = candidates
    where = f" {spec.run_time_letter[0]}={m}" if m is not None else ""
    print(f"host_harness: bench {spec.name}{where}: {us:.3f} us, {flops / (us * 1e-6) / 1e9:.2f} GFLOP/s; "
          f"baseline {best['formulation'] if best else '-'}: {best['us'] if best else math.nan:.3f} us",
          file=sys.stderr)
    return row


def bench(folder: Path, library: Path, warmup: int = DEFAULT_WARMUP, reps: int = DEFAULT_REPS, baseline: bool = True,
          sizes: Sequence[int] | None = None, threads: int = 0, with_roof: bool = False) -> dict[str, Any]:
    """The bench report of `library` built from `folder` (see the module's doc). Raises HarnessFailure."""
    if reps < 1:
        raise HarnessFailure(EXIT_USAGE, "--reps must be at least 1")
    spec = load_folder_spec(folder)
    with naming(spec):
        check_sizes(spec, sizes)
        kernel = KernelLibrary(library, spec)
        rt = spec.run_time_letter
        m_list: list[int | None] = [None] if rt is None else (sorted(set(sizes)) if sizes else bench_sizes(spec))
        llc = last_level_cache_bytes()
        sets = bench_sets(spec, llc)
        rows = [bench_row(spec, kernel, sets, m, warmup, reps, baseline, threads) for m in m_list]
    ours_threads = threads or available_cores()
    report = report_header("bench", spec, threads, library)
    report["method"] = (
        f"same-process wall time (time.perf_counter_ns) of each call, the median of {2 * reps if baseline else reps} "
        f"runs after {warmup} warm-up runs; inputs rotated through {len(sets)} buffer sets (together more than twice "
        f"the {llc >> 20} MiB last-level cache); order ours, baselines, baselines in reverse, ours (us_passes: each "
        f"pass's median), each pass after a {SETTLE_S:g} s pause (the other side's idle threads spin until then) and "
        f"one untimed run. Ours: a ctypes call with {ours_threads} threads. Baselines (numpy with its BLAS's default "
        "threads): copy + matmul (the views copied to contiguous f32 batch x M x K and K x N arrays, the copy "
        "counted) and einsum(optimize=True) on the strided f32 views; 16-bit inputs converted to f32 and the "
        "epilogue, beta * C and the store to the output view applied in numpy, all counted")
    report.update(rows[-1])
    report.update(copy_gbps=copy_gbps(llc, reps) if baseline else None, sets=len(sets), reps=reps, warmup=warmup)
    report.update(zip(("roof_tflops", "roof_gemm"), roof(reps) if with_roof else (None, None)))
    if rt is not None:
        report.update(m=rows[-1]["m"], dynamic=dynamic_range(spec), m_rows=rows)
    return report


# ------------------------------------------------------------------------------------------------ command line

def jsonable(value: Any) -> Any:
    """The report as the GPU harness writes it: NaN and infinities as strings (bare NaN is not JSON)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return json_number(value)
    return value


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so that a bad command line still prints one JSON object."""

    def error(self, message: str):  # noqa: D401 -- argparse's hook
        raise HarnessFailure(EXIT_USAGE, f"{message}; usage: {self.format_usage().strip()}")


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def argument_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="python -m dgemm_cli.host_harness",
                             description="Verify or bench a CPU-backend folder's shared library (one JSON object "
                                         "on stdout).")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)
    for name in ("verify", "bench"):
        sub = commands.add_parser(name)
        sub.add_argument("--dir", required=True, type=Path, help="the generated folder (its plan.json)")
        sub.add_argument("--lib", required=True, type=Path, help="the shared library built from it")
        sub.add_argument("--m", type=_int_list, default=None, help="run-time sizes to run, e.g. 1,8,64")
        sub.add_argument("--threads", type=_count, default=0, help="the kernel's threads (0: all cores)")
        if name == "verify":
            sub.add_argument("--seeds", type=_int_list, default=list(DEFAULT_SEEDS))
            sub.add_argument("--samples", type=_count, default=256, help="accepted; every element is checked")
            sub.add_argument("--repeat", type=_count, default=0,
                             help="more launches on the first seed's data that must reproduce its bits")
        else:
            sub.add_argument("--warmup", type=_count, default=DEFAULT_WARMUP)
            sub.add_argument("--reps", type=_count, default=DEFAULT_REPS)
            sub.add_argument("--baseline", type=int, choices=(0, 1), default=1)
            sub.add_argument("--roof", type=int, choices=(0, 1), default=0,
                             help="1: also time the compute roof (numpy's f32 matmul)")
    return parser


def run_command(argv: Sequence[str]) -> tuple[dict[str, Any], int]:
    """The report of one command line and the exit code; a HarnessFailure becomes an error report."""
    command = argv[0] if argv and argv[0] in ("verify", "bench") else None
    try:
        args = argument_parser().parse_args(list(argv))
        if args.command == "verify":
            report = verify(args.dir, args.lib, seeds=args.seeds, samples=args.samples, repeat=args.repeat,
                            sizes=args.m, threads=args.threads)
            return report, EXIT_PASSED if report["passed"] else EXIT_FAILED
        report = bench(args.dir, args.lib, warmup=args.warmup, reps=args.reps, baseline=bool(args.baseline),
                       sizes=args.m, threads=args.threads, with_roof=bool(args.roof))
        return report, EXIT_PASSED
    except HarnessFailure as exc:
        print(f"host_harness: error: {exc}", file=sys.stderr)
        report = {"schema_version": HARNESS_SCHEMA_VERSION, "command": command}
        return {**report, **({"name": exc.name} if exc.name else {}), "error": str(exc)}, exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    report, code = run_command(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(json.dumps(jsonable(report)) + "\n")
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
