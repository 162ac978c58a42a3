"""A built kernel in this process: lib<name>.so opened with ctypes, its entry point typed from the C prototype that
<name>.h declares. Pointers are plain integers (device addresses for a CUDA kernel, host addresses for arch cpu),
so no array library is needed."""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dgemm_cli.errors import KernelCallError, KernelLoadError

# The C types an entry point's parameters and result have (render._signature, renderers/host.host_signature).
_SCALARS = {"int64_t": ctypes.c_int64, "float": ctypes.c_float, "int": ctypes.c_int,
            "cudaStream_t": ctypes.c_void_p, "cudaError_t": ctypes.c_int}
# What a trailing scalar is when the call leaves it out.
DEFAULTS = {"alpha": 1.0, "beta": 0.0, "stream": 0, "threads": 0}
# The statuses a call most often meets, for the message; the others are named by number.
_STATUS = {
    1: "cudaErrorInvalidValue: a null pointer, or a run-time size outside the kernel's range",
    35: "cudaErrorInsufficientDriver: the driver is older than the CUDA the library was built with",
    100: "cudaErrorNoDevice: no CUDA GPU is visible",
    209: "cudaErrorNoKernelImageForDevice: the library was built for another arch than this GPU's",
    222: "cudaErrorUnsupportedPtxVersion: the driver is older than the CUDA the library was built with",
}
_HOST_STATUS = {22: "EINVAL: a null pointer, or a run-time size outside the kernel's range"}
_PROTOTYPE = re.compile(r"(\w+) (\w+)\((.*)\)")


@dataclass(frozen=True)
class Parameter:
    """One parameter of the entry point, as <name>.h declares it."""

    name: str
    ctype: str  # "const __nv_bfloat16*", "int64_t", "float", "cudaStream_t", "int"

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")


def parse_prototype(prototype: str) -> tuple[str, str, tuple[Parameter, ...]]:
    """(result type, function name, parameters) of a C prototype as render.c_prototype writes it."""
    m = _PROTOTYPE.fullmatch(prototype.strip())
    assert m, f"not a prototype render wrote: {prototype!r}"  # c_prototype's shape; not a user error
    params = []
    for text in m.group(3).split(", "):
        ctype, _, name = text.strip().rpartition(" ")
        params.append(Parameter(name, ctype.replace(" *", "*")))
    return m.group(1), m.group(2), tuple(params)


def open_library(path: Path) -> Any:
    """dlopen `path` (ctypes.CDLL); the one place the library is opened."""
    return ctypes.CDLL(str(path))


@dataclass(frozen=True, eq=False)
class Kernel:
    """A loaded kernel: call it with one integer address per pointer parameter (positionally, in the prototype's
    order, or by name), then the scalars by name: `m` (a run-time size, required where the prototype has it),
    `alpha` (1.0), `beta` (0.0), and `stream` (0, the default stream; a CUDA kernel) or `threads` (0: all cores;
    a host kernel). A non-zero status raises KernelCallError. The call is asynchronous on the stream, as the C
    function is."""

    name: str
    arch: str
    library: Path  # lib<name>.so
    prototype: str  # the C declaration in <name>.h
    parameters: tuple[Parameter, ...]
    _function: Any = field(repr=False)

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def pointer_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters if p.is_pointer)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self.parameters):
            raise TypeError(f"{self.name}() takes at most {len(self.parameters)} arguments ({len(args)} given)")
        values = dict(zip(self.argument_names, args))
        for key, value in kwargs.items():
            if key not in self.argument_names:
                raise TypeError(f"{self.name}() has no parameter {key!r}; it takes {', '.join(self.argument_names)}")
            if key in values:
                raise TypeError(f"{self.name}() got {key!r} twice")
            values[key] = value
        call = []
        for p in self.parameters:
            if p.name not in values and p.name not in DEFAULTS:
                raise TypeError(f"{self.name}() is missing {p.name!r} ({p.ctype}); its prototype: {self.prototype}")
            value = values.get(p.name, DEFAULTS.get(p.name))
            if p.is_pointer or p.ctype in ("int64_t", "int", "cudaStream_t"):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"{self.name}(): {p.name} is an address or a count, an int; got {value!r}")
            call.append(value)
        self.call_ordered(call)

    def call_ordered(self, values: list[Any] | tuple[Any, ...]) -> None:
        """The C function on `values`, one a parameter in the prototype's order, checked only by ctypes and by the
        status: for a caller that builds them from `parameters` itself (deepgemm.torch, once a call's shape)."""
        status = self._function(*values)
        if status != 0:
            table = _HOST_STATUS if self.arch == "cpu" else _STATUS
            raise KernelCallError(f"{self.name} returned {status} ({table.get(status, 'see the CUDA runtime API')}). "
                                  f"Fix: check the arguments against {self.prototype}", status)


def load_library(library: Path, name: str, arch: str, prototype: str) -> Kernel:
    """Open `library` and type its entry point `name` from `prototype`."""
    if not library.is_file():
        raise KernelLoadError(f"{library}: no such library. Fix: build it first (deepgemm.build)")
    result, function_name, params = parse_prototype(prototype)
    assert function_name == name, (function_name, name)
    try:
        lib = open_library(library)
    except OSError as err:
        raise KernelLoadError(f"{library}: cannot be loaded ({err}). Fix: rebuild it on this machine "
                              "(deepgemm.build(..., force=True), or delete its cache entry)") from None
    try:
        function = getattr(lib, name)
    except AttributeError:
        raise KernelLoadError(f"{library}: has no function {name}. Fix: rebuild it from its folder "
                              "(deepgemm.build(..., force=True))") from None
    function.argtypes = [ctypes.c_void_p if p.is_pointer else _SCALARS[p.ctype] for p in params]
    function.restype = _SCALARS[result]
    return Kernel(name, arch, library, prototype, params, function)
