"""What deepgemm reads back after `gen`, parsed once into typed records: plan.json, the harness's verify and bench
reports, and the tuning database. Each parser checks the record's schema version and names the file, the key and
the fix when the record is from another deepgemm or malformed; readers then use named fields, not string keys."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dgemm_cli.errors import DeepGemmError

PLAN_SCHEMA_VERSION = 1
# The harness's reports carry no version yet: a report without one is read as this version's layout.
HARNESS_SCHEMA_VERSION = 1
TUNING_SCHEMA_VERSION = 1
TUNING_FORMAT = "deepgemm-tuning-db"

REGENERATE = "regenerate it with `deepgemm gen SPEC`"
REBUILD = "regenerate the folder with `deepgemm gen SPEC` and rebuild it with `deepgemm build`"
RETUNE = "move it away and tune again, or pass another --db"


class RecordError(DeepGemmError):
    """A file deepgemm wrote (plan.json, a harness report, a tuning database) is from another version or
    malformed. The message names the file, the key and the fix."""

    def __init__(self, source: str, key: str, problem: str, fix: str):
        self.source, self.key, self.problem, self.fix = source, key, problem, fix
        super().__init__(f"{source}: {key}: {problem}. Fix: {fix}")


class TuningDbError(RecordError):
    """The tuning database file is unreadable, not one, or of another schema version."""


class _Fields:
    """One JSON object's fields, read with their types checked. A missing or mistyped field raises `error` naming
    its key path (`prefix` + key), so every record names what is wrong the same way."""

    def __init__(self, data: Any, source: str, prefix: str, fix: str, error: type[RecordError] = RecordError):
        self.source, self.prefix, self.fix, self.error = source, prefix, fix, error
        if not isinstance(data, Mapping):
            raise error(source, prefix.rstrip(".") or "(top level)", f"is {_kind(data)}, not an object", fix)
        self.data = data

    def fail(self, key: str, problem: str) -> RecordError:
        return self.error(self.source, self.prefix + key, problem, self.fix)

    def sub(self, key: str, optional: bool = False) -> _Fields | None:
        value = self.data.get(key)
        if value is None and optional:
            return None
        if key not in self.data:
            raise self.fail(key, "missing")
        return _Fields(value, self.source, f"{self.prefix}{key}.", self.fix, self.error)

    def items(self, key: str, optional: bool = False) -> list[_Fields] | None:
        value = self.data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, list):
            raise self.fail(key, "missing" if key not in self.data else f"is {_kind(value)}, not a list")
        return [_Fields(v, self.source, f"{self.prefix}{key}[{i}].", self.fix, self.error) for i, v in enumerate(value)]

    def get(self, key: str, kind: type | tuple[type, ...], optional: bool = False, default: Any = None) -> Any:
        """The value of `key`, of type `kind`; `optional`: absent or null gives `default`."""
        value = self.data.get(key)
        if value is None and optional:
            return default
        if key not in self.data:
            raise self.fail(key, "missing")
        if kind is float:  # the harness writes NaN and infinities as strings; a whole number is a number too
            number = _number(value)
            if number is None:
                raise self.fail(key, f"is {_kind(value)}, not a number")
            return number
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise self.fail(key, f"is {_kind(value)}, not {_kind_name(kind)}")
        return value

    def number(self, key: str) -> float | None:  # absent and null read as None
        return self.get(key, float, optional=True)

    def strings(self, key: str, optional: bool = False) -> tuple[str, ...] | None:
        value = self.get(key, list, optional=optional)
        if value is None:
            return None
        if not all(isinstance(v, str) for v in value):
            raise self.fail(key, "holds something other than strings")
        return tuple(value)

    def numbers(self, key: str) -> tuple[float, ...]:
        value = self.get(key, list, optional=True, default=[])
        out = tuple(_number(v) for v in value)
        if any(v is None for v in out):
            raise self.fail(key, "holds something other than numbers")
        return out

    def version(self, key: str, current: int, older_fix: str) -> int:
        """The record's schema version: it must be `current`; a missing or older one takes `older_fix`."""
        found = self.data.get(key)
        if found is None:
            raise self.error(self.source, self.prefix + key, "missing: written by a deepgemm older than schema "
                             f"version {current}", older_fix)
        if found != current:
            raise self.error(self.source, self.prefix + key, f"is {found!r}; this deepgemm reads version {current}",
                             older_fix if isinstance(found, int) and found < current else
                             "use the deepgemm that wrote it, or " + older_fix)
        return current


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) or value in ("nan", "inf", "-inf"):
        return float(value)
    return None


def json_number(value: float | None) -> float | str | None:
    """A number as the harness writes it: NaN and infinities as strings (bare NaN is not JSON)."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "a whole number", bool: "true or false", dict: "an object", list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _read_json(path: Path, error: type[RecordError], fix: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(str(path), "(whole file)", f"not readable JSON ({exc})", fix) from None


# ------------------------------------------------------------------------------------------------ plan.json

@dataclass(frozen=True)
class RunTimeRange:
    """The letter a kernel is sized by at run time and its range, min to max inclusive."""

    letter: str
    lo: int
    hi: int

    def __contains__(self, size: int) -> bool:
        return self.lo <= size <= self.hi

    def to_dict(self) -> dict[str, Any]:
        """As the harness reports it (`dynamic`)."""
        return {"letter": self.letter, "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_fields(cls, f: _Fields) -> RunTimeRange:
        return cls(f.get("letter", str), f.get("lo", int), f.get("hi", int))


@dataclass(frozen=True)
class PlanRecord:
    """What the stages after `gen` read of a generated folder's plan.json."""

    generator: str
    arch: str  # the arch it was planned for
    content_hash: str  # sha256 of every rendered file
    spec: Mapping[str, Any]  # the normalised spec (Spec.to_dict)
    family: str  # the kernel family, or the bucket plan's
    smem_bytes: int  # the largest dynamic shared memory a block of any kernel asks for
    nvcc_flags: tuple[str, ...]
    arch_features: tuple[str, ...]  # what the kernels' instructions and launches need (arch.FEATURES)
    requires_arch: tuple[str, ...]  # the first arch with all of it; empty when any arch has it
    kernel_smem: Mapping[str, int]  # each kernel namespace of the .cu -> the dynamic shared memory its launch asks for
    cxx_flags: tuple[str, ...] = ()  # the host compiler's flags (arch cpu; build_host.py)
    # `gen --disable`'s options (plan.disabled; absent when none: an optional key, which schema version 1 readers
    # without it skip, and which changes nothing `build`, `verify` or `bench` read: they re-plan nothing)
    disabled: tuple[str, ...] = ()
    source: str = field(default="plan.json", compare=False)
    schema_version: int = PLAN_SCHEMA_VERSION

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def run_time(self) -> RunTimeRange | None:
        """The letter the kernel is sized by at run time, None for a fixed-size kernel."""
        for letter, size in self.spec["sizes"].items():
            if isinstance(size, Mapping):
                return RunTimeRange(letter, size["min"], size["max"])
        return None

    @classmethod
    def from_dict(cls, data: Any, source: str = "plan.json") -> PlanRecord:
        f = _Fields(data, source, "", REGENERATE)
        f.version("schema_version", PLAN_SCHEMA_VERSION, REGENERATE)
        spec, plan, build = f.sub("spec"), f.sub("plan"), f.sub("build")
        spec.get("name", str)
        for letter, size in spec.get("sizes", dict).items():
            if isinstance(size, Mapping):
                sizes = spec.sub("sizes").sub(letter)
                sizes.get("min", int), sizes.get("max", int)
            elif not isinstance(size, int) or isinstance(size, bool):
                raise spec.fail(f"sizes.{letter}", f"is {_kind(size)}, not a size")
        kernel_smem = build.get("kernel_smem", dict)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in kernel_smem.values()):
            raise build.fail("kernel_smem", "holds something other than byte counts")
        return cls(generator=f.get("generator", str), arch=f.get("arch", str), content_hash=f.get("content_hash", str),
                   spec=spec.data, family=plan.get("family", str), smem_bytes=plan.get("smem_bytes", int),
                   nvcc_flags=build.strings("nvcc_flags"), arch_features=build.strings("arch_features"),
                   requires_arch=build.strings("requires_arch"), kernel_smem=dict(kernel_smem),
                   cxx_flags=build.strings("cxx_flags", optional=True) or (),
                   disabled=plan.strings("disabled", optional=True) or (), source=source)

    @classmethod
    def load(cls, path: Path) -> PlanRecord:
        """plan.json at `path` (a folder: its plan.json)."""
        path = path / "plan.json" if path.is_dir() else path
        return cls.from_dict(_read_json(path, RecordError, REGENERATE), str(path))

    def to_dict(self) -> dict[str, Any]:
        """The fields of plan.json this record holds, in plan.json's layout."""
        build = {"nvcc_flags": list(self.nvcc_flags), "arch_features": list(self.arch_features),
                 "requires_arch": list(self.requires_arch), "kernel_smem": dict(self.kernel_smem),
                 **({"cxx_flags": list(self.cxx_flags)} if self.cxx_flags else {})}
        return {"schema_version": self.schema_version, "generator": self.generator, "arch": self.arch,
                "content_hash": self.content_hash, "spec": dict(self.spec),
                "plan": {"family": self.family, "smem_bytes": self.smem_bytes,
                         **({"disabled": list(self.disabled)} if self.disabled else {})}, "build": build}


# ------------------------------------------------------------------------------------------------ harness reports

@dataclass(frozen=True)
class VerifyCase:
    """One run-time size of a verify report (`m_cases`)."""

    m: int
    passed: bool
    max_abs_err: float | None
    rel_err: float | None
    first_fail: Mapping[str, Any] | None
    repeat_differed: int = 0
    calc_diff: float | None = None  # DeepGEMM's 1 - 2 sum(xy) / sum(x^2 + y^2); None in reports that predate it

    @classmethod
    def from_fields(cls, f: _Fields) -> VerifyCase:
        return cls(f.get("m", int), f.get("passed", bool), f.number("max_abs_err"), f.number("rel_err"),
                   f.get("first_fail", dict, optional=True), f.get("repeat_differed", int, optional=True, default=0),
                   f.number("calc_diff"))

    def to_dict(self) -> dict[str, Any]:
        return {"m": self.m, "passed": self.passed, "max_abs_err": json_number(self.max_abs_err),
                "rel_err": json_number(self.rel_err), "calc_diff": json_number(self.calc_diff),
                "first_fail": self.first_fail, "repeat_differed": self.repeat_differed}


@dataclass(frozen=True)
class SizeProbe:
    """A size outside the run-time range the harness passed, and whether the launcher refused it."""

    m: int
    rejected: bool


def _harness_fields(data: Any, source: str, command: str) -> tuple[_Fields, bool]:
    """The report's fields and whether it is an error report (then only `error` is required)."""
    f = _Fields(data, source, "", REBUILD)
    if "schema_version" in f.data:
        f.version("schema_version", HARNESS_SCHEMA_VERSION, REBUILD)
    said = f.get("command", str, optional=True)
    if said is not None and said != command:
        raise f.fail("command", f"is {said!r}, the harness was asked for {command!r}")
    return f, f.get("error", str, optional=True) is not None


@dataclass(frozen=True)
class VerifyReport:
    """The harness's verify report; with `error` set the harness could not run and the rest is empty."""

    name: str | None
    passed: bool
    tol: float | None
    max_abs_err: float | None
    rel_err: float | None
    first_fail: Mapping[str, Any] | None
    error: str | None = None
    device: str | None = None
    api_null_rejected: bool | None = None
    api_misaligned_rejected: bool | None = None
    repeat: int = 0
    repeat_differed: int = 0  # repeated launches whose output bits differed from the first
    dynamic: RunTimeRange | None = None
    api_m_probes: tuple[SizeProbe, ...] = ()
    m_cases: tuple[VerifyCase, ...] | None = None  # one a run-time size; None for a fixed-size kernel
    epilogue: tuple[str, ...] | None = None
    output: str | None = None
    # DeepGEMM's 1 - 2 sum(xy) / sum(x^2 + y^2), the worst case's; None in reports that predate it.
    calc_diff: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the whole report, for --json

    @classmethod
    def failed(cls, error: str) -> VerifyReport:  # no report: the harness did not start, or timed out
        return cls(None, False, None, None, None, None, error=error, raw={"error": error})

    @classmethod
    def from_dict(cls, data: Any, source: str = "verify report") -> VerifyReport:
        f, is_error = _harness_fields(data, source, "verify")
        if is_error:
            return cls(f.get("name", str, optional=True), False, None, None, None, None, error=f.data["error"],
                       raw=f.data)
        dynamic = f.sub("dynamic", optional=True)
        cases = f.items("m_cases", optional=True)
        return cls(
            name=f.get("name", str), passed=f.get("passed", bool), tol=f.get("tol", float),
            max_abs_err=f.get("max_abs_err", float), rel_err=f.get("rel_err", float),
            first_fail=f.get("first_fail", dict, optional=True), device=f.get("device", str, optional=True),
            api_null_rejected=f.get("api_null_rejected", bool, optional=True),
            api_misaligned_rejected=f.get("api_misaligned_rejected", bool, optional=True),
            repeat=f.get("repeat", int, optional=True, default=0),
            repeat_differed=f.get("repeat_differed", int, optional=True, default=0),
            dynamic=RunTimeRange.from_fields(dynamic) if dynamic else None,
            api_m_probes=tuple(SizeProbe(p.get("m", int), p.get("rejected", bool))
                               for p in f.items("api_m_probes", optional=True) or []),
            m_cases=tuple(VerifyCase.from_fields(c) for c in cases) if cases is not None else None,
            epilogue=f.strings("epilogue", optional=True), output=f.get("output", str, optional=True),
            calc_diff=f.number("calc_diff"), raw=f.data)


@dataclass(frozen=True)
class BaselineCandidate:
    """One cuBLAS (or cuBLASLt) formulation the bench timed; `us` None where it could not run (`error`)."""

    formulation: str
    us: float | None
    us_passes: tuple[float, ...] = ()
    epilogue: str | None = None
    error: str | None = None
    # A cuBLAS candidate's output against the kernel's, ||got - want|| / ||want|| (the harness refuses one past its
    # limit); None for an alternative, one that did not run, or a report that predates the check.
    rel_diff: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"formulation": self.formulation, "epilogue": self.epilogue, "us": json_number(self.us),
               "us_passes": [json_number(p) for p in self.us_passes] if self.us is not None else None,
               "error": self.error, "rel_diff": json_number(self.rel_diff) if self.rel_diff is not None else None}
        return {k: v for k, v in out.items() if v is not None or k == "us"}


@dataclass(frozen=True)
class BenchRow:
    """The times of one size: a fixed-size report's top level, or one of a run-time report's `m_rows`.
    The baseline's fields are None when the bench ran without it (`--baseline 0`) or none could run."""

    us: float
    tflops: float | None = None
    gbps: float | None = None
    us_stream: float | None = None
    us_passes: tuple[float, ...] = ()
    baseline: str | None = None
    baseline_formulation: str | None = None
    baseline_epilogue: str | None = None  # what the baseline ran after, or fused into, the GEMM
    baseline_us: float | None = None
    baseline_tflops: float | None = None
    baseline_us_stream: float | None = None
    baseline_us_passes: tuple[float, ...] = ()
    ratio: float | None = None  # baseline time / kernel time: > 1 is faster than cuBLAS
    baseline_candidates: tuple[BaselineCandidate, ...] = ()
    m: int | None = None  # the run-time size; None for a fixed-size kernel
    # An e4m3 kernel's bench: bf16 cuBLASLt on the same shape, beside the FP8 baseline (never a candidate); None
    # for other kernels, and bf16_baseline says why where it could not run.
    bf16_baseline: str | None = None
    bf16_baseline_us: float | None = None
    bf16_baseline_tflops: float | None = None
    bf16_ratio: float | None = None  # bf16 time / kernel time

    @classmethod
    def from_fields(cls, f: _Fields) -> BenchRow:
        return cls(
            us=f.get("us", float), tflops=f.number("tflops"), gbps=f.number("gbps"), us_stream=f.number("us_stream"),
            us_passes=f.numbers("us_passes"), baseline=f.get("baseline", str, optional=True),
            baseline_formulation=f.get("baseline_formulation", str, optional=True),
            baseline_epilogue=f.get("baseline_epilogue", str, optional=True), baseline_us=f.number("baseline_us"),
            baseline_tflops=f.number("baseline_tflops"), baseline_us_stream=f.number("baseline_us_stream"),
            baseline_us_passes=f.numbers("baseline_us_passes"), ratio=f.number("ratio"),
            baseline_candidates=tuple(
                BaselineCandidate(c.get("formulation", str), c.number("us"), c.numbers("us_passes"),
                                  c.get("epilogue", str, optional=True), c.get("error", str, optional=True),
                                  c.number("rel_diff"))
                for c in f.items("baseline_candidates", optional=True) or []),
            m=f.get("m", int, optional=True), bf16_baseline=f.get("bf16_baseline", str, optional=True),
            bf16_baseline_us=f.number("bf16_baseline_us"), bf16_baseline_tflops=f.number("bf16_baseline_tflops"),
            bf16_ratio=f.number("bf16_ratio"))

    def to_dict(self) -> dict[str, Any]:
        """In the harness's layout, NaN as "nan"."""
        out: dict[str, Any] = {} if self.m is None else {"m": self.m}
        for name in ("us", "tflops", "gbps", "us_stream", "baseline_us", "baseline_tflops", "baseline_us_stream",
                     "ratio"):
            out[name] = json_number(getattr(self, name))
        out.update(us_passes=[json_number(p) for p in self.us_passes], baseline=self.baseline,
                   baseline_formulation=self.baseline_formulation, baseline_epilogue=self.baseline_epilogue,
                   baseline_us_passes=[json_number(p) for p in self.baseline_us_passes],
                   baseline_candidates=[c.to_dict() for c in self.baseline_candidates])
        if self.bf16_baseline is not None:
            out["bf16_baseline"] = self.bf16_baseline
            for name in ("bf16_baseline_us", "bf16_baseline_tflops", "bf16_ratio"):
                out[name] = json_number(getattr(self, name))
        return out


@dataclass(frozen=True)
class BenchReport:
    """The harness's bench report. `row` holds the times (of the largest size for a run-time kernel, whose
    `m_rows` hold every size's); with `error` set the harness could not run and `row` is None."""

    name: str | None
    row: BenchRow | None
    error: str | None = None
    device: str | None = None
    method: str | None = None  # how the times were taken ("graph": replayed CUDA graphs)
    copy_gbps: float | None = None  # a device-to-device copy of 3x L2 in the same run
    dtype: str | None = None  # the inputs' dtype; None in reports that predate it
    # The compute roof (bench --roof 1): the baseline library's large square GEMM of the inputs' dtype in the same
    # run, and what ran ("unavailable: why" with roof_tflops None); both None when it was not asked for.
    roof_tflops: float | None = None
    roof_gemm: str | None = None
    sets: int | None = None
    reps: int | None = None
    dynamic: RunTimeRange | None = None
    m_rows: tuple[BenchRow, ...] | None = None
    epilogue: tuple[str, ...] | None = None
    output: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def rows(self) -> tuple[BenchRow, ...]:
        """One row a size: every run-time size's, or the one of a fixed-size kernel."""
        if self.m_rows is not None:
            return self.m_rows
        return (self.row,) if self.row is not None else ()

    @classmethod
    def failed(cls, error: str) -> BenchReport:
        return cls(None, None, error=error, raw={"error": error})

    @classmethod
    def from_dict(cls, data: Any, source: str = "bench report") -> BenchReport:
        f, is_error = _harness_fields(data, source, "bench")
        if is_error:
            return cls(f.get("name", str, optional=True), None, error=f.data["error"], raw=f.data)
        dynamic = f.sub("dynamic", optional=True)
        rows = f.items("m_rows", optional=True)
        return cls(name=f.get("name", str), row=BenchRow.from_fields(f), device=f.get("device", str, optional=True),
                   method=f.get("method", str, optional=True), copy_gbps=f.number("copy_gbps"),
                   dtype=f.get("dtype", str, optional=True), roof_tflops=f.number("roof_tflops"),
                   roof_gemm=f.get("roof_gemm", str, optional=True),
                   sets=f.get("sets", int, optional=True), reps=f.get("reps", int, optional=True),
                   dynamic=RunTimeRange.from_fields(dynamic) if dynamic else None,
                   m_rows=tuple(BenchRow.from_fields(r) for r in rows) if rows is not None else None,
                   epilogue=f.strings("epilogue", optional=True), output=f.get("output", str, optional=True),
                   raw=f.data)

    def to_dict(self) -> dict[str, Any]:
        """In the harness's layout (what `deepgemm bench --json` prints a kernel)."""
        row = self.row.to_dict() if self.row is not None else {f.name: None for f in fields(BenchRow) if f.name != "m"}
        return {"name": self.name, **row, "device": self.device, "error": self.error, "method": self.method,
                "copy_gbps": json_number(self.copy_gbps), "dtype": self.dtype,
                "roof_tflops": json_number(self.roof_tflops), "roof_gemm": self.roof_gemm,
                "sets": self.sets, "reps": self.reps,
                "m": self.row.m if self.row is not None else None,
                "dynamic": self.dynamic.to_dict() if self.dynamic else None,
                "m_rows": [r.to_dict() for r in self.m_rows] if self.m_rows is not None else None,
                "epilogue": list(self.epilogue) if self.epilogue is not None else None, "output": self.output}


def harness_report(command: str, data: Any, source: str) -> VerifyReport | BenchReport:
    """The report of `command` ("verify" or "bench") the harness at `source` printed."""
    return (VerifyReport if command == "verify" else BenchReport).from_dict(data, source)


# ------------------------------------------------------------------------------------------------ tuning records

@dataclass(frozen=True)
class MeasuredCandidate:
    """One candidate of a tune: the model's view of it and what was measured (`us` None: not timed)."""

    id: str  # "<family>-<model rank>", e.g. "hopper-03"
    family: str
    model_rank: int  # 0: the cost model's pick within the family
    model_us: float
    assignment: Mapping[str, Any]  # the tiling's values, as the family's constraint graph names them
    verified: bool = False
    us: float | None = None  # the median of us_rounds (entries that predate the rounds: one timing)
    error: str | None = None  # why it could not run
    skipped: str | None = None  # why it was not measured (the budget spent, a failed build)
    us_rounds: tuple[float, ...] = ()  # its time in each timing round, as they were taken (tune_run)

    @classmethod
    def fields_of(cls, f: _Fields) -> dict[str, Any]:
        return {"id": f.get("id", str), "family": f.get("family", str), "model_rank": f.get("model_rank", int),
                "model_us": f.get("model_us", float), "assignment": f.get("assignment", dict),
                "verified": f.get("verified", bool, optional=True, default=False), "us": f.number("us"),
                "error": f.get("error", str, optional=True), "skipped": f.get("skipped", str, optional=True),
                "us_rounds": f.numbers("us_rounds")}

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "family": self.family, "model_rank": self.model_rank, "model_us": self.model_us,
               "assignment": dict(self.assignment), "verified": self.verified, "us": self.us}
        out.update({k: v for k, v in (("error", self.error), ("skipped", self.skipped)) if v is not None})
        if self.us_rounds:
            out["us_rounds"] = list(self.us_rounds)
        return out


@dataclass(frozen=True)
class TuningWinner(MeasuredCandidate):
    """The winning candidate, with its final bench against cuBLAS: `us` stays the rounds' median it won on (comparable
    with the other candidates'), `bench_us` is its time in that bench, and ratio = baseline_us / bench_us."""

    ratio: float | None = None
    baseline_us: float | None = None
    baseline: str | None = None  # the baseline's formulation
    bench_us: float | None = None  # None in entries that predate it (their `us` is the final bench's)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "ratio": self.ratio, "baseline_us": self.baseline_us, "baseline": self.baseline,
                "bench_us": self.bench_us}


@dataclass(frozen=True)
class TuningRecord:
    """One tuned problem of the tuning database."""

    spec_hash: str
    name: str
    arch: str
    gpu: str
    driver: str
    generator: str
    level: int
    date: str  # ISO 8601, UTC: the newer wins a merge
    winner: TuningWinner
    measured: tuple[MeasuredCandidate, ...]
    families: tuple[str, ...] | None = ()  # the families the tune was limited to; () every one; None unrecorded

    @property
    def timed(self) -> tuple[MeasuredCandidate, ...]:  # the candidates that passed verify and were timed
        return tuple(m for m in self.measured if m.verified and m.us is not None)

    @property
    def model_pick(self) -> MeasuredCandidate | None:
        """The candidate the cost model ranks first (the least estimate; ties: the first listed), timed or not."""
        return min(self.measured, key=lambda m: m.model_us) if self.measured else None

    @classmethod
    def from_dict(cls, data: Any, source: str = "tuning database", key: str = "") -> TuningRecord:
        f = _Fields(data, source, f"entries.{key}." if key else "", RETUNE, TuningDbError)
        families = f.get("families", (str, list), optional=True)
        if isinstance(families, list) and not all(isinstance(x, str) for x in families):
            raise f.fail("families", "holds something other than family names")
        win = f.sub("winner")
        return cls(
            spec_hash=f.get("spec_hash", str), name=f.get("name", str), arch=f.get("arch", str), gpu=f.get("gpu", str),
            driver=f.get("driver", str), generator=f.get("generator", str), level=f.get("level", int),
            date=f.get("date", str),
            winner=TuningWinner(**MeasuredCandidate.fields_of(win), ratio=win.number("ratio"),
                                baseline_us=win.number("baseline_us"),
                                baseline=win.get("baseline", str, optional=True), bench_us=win.number("bench_us")),
            measured=tuple(MeasuredCandidate(**MeasuredCandidate.fields_of(m)) for m in f.items("measured")),
            families=None if families is None else () if families == "all" else tuple(families))

    def to_dict(self) -> dict[str, Any]:
        families = {} if self.families is None else {"families": list(self.families) if self.families else "all"}
        return {"spec_hash": self.spec_hash, "name": self.name, "arch": self.arch, "gpu": self.gpu,
                "driver": self.driver, "generator": self.generator, "level": self.level, "date": self.date,
                "winner": self.winner.to_dict(), "measured": [m.to_dict() for m in self.measured], **families}


@dataclass
class TuningDb:
    """The tuning database: key (tune.db_key) -> record. Mutable: tune adds records as it measures."""

    entries: dict[str, TuningRecord] = field(default_factory=dict)
    schema_version: int = TUNING_SCHEMA_VERSION

    @classmethod
    def from_dict(cls, data: Any, source: str = "tuning database") -> TuningDb:
        f = _Fields(data, source, "", RETUNE, TuningDbError)
        if f.data.get("format") != TUNING_FORMAT:
            raise f.fail("format", f"is {f.data.get('format')!r}: not a deepgemm tuning database "
                                   f"(format {TUNING_FORMAT!r} expected)")
        # "version" is the key's earlier name: a database written before it was renamed has the same layout.
        key = "schema_version" if "schema_version" in f.data or "version" not in f.data else "version"
        f.version(key, TUNING_SCHEMA_VERSION, RETUNE)
        entries = f.get("entries", dict)
        return cls({k: TuningRecord.from_dict(e, source, k) for k, e in entries.items()})

    @classmethod
    def load(cls, path: Path) -> TuningDb:
        """The database at `path`; an empty one where there is no file yet."""
        return cls.from_dict(_read_json(path, TuningDbError, RETUNE), str(path)) if path.exists() else cls()

    def to_dict(self) -> dict[str, Any]:
        return {"format": TUNING_FORMAT, "schema_version": self.schema_version,
                "entries": {k: e.to_dict() for k, e in self.entries.items()}}


@dataclass(frozen=True)
class TunedSummary:
    """What plan.json records of a tuned plan (its `tuned`), and gen prints."""

    level: int
    gpu: str
    driver: str
    date: str
    us: float
    ratio: float | None
    baseline_us: float | None
    candidate: str  # the winner's id
    measured: int  # candidates in the tune
    timed: int  # of them timed: a budget that ran out, a failed build or verify leave the others untimed

    @classmethod
    def of(cls, entry: TuningRecord) -> TunedSummary:
        w = entry.winner
        return cls(entry.level, entry.gpu, entry.driver, entry.date, w.us, w.ratio, w.baseline_us, w.id,
                   len(entry.measured), sum(m.us is not None for m in entry.measured))

    @classmethod
    def from_dict(cls, data: Any, source: str = "plan.json", prefix: str = "plan.tuned.") -> TunedSummary:
        f = _Fields(data, source, prefix, REGENERATE)
        return cls(f.get("level", int), f.get("gpu", str), f.get("driver", str), f.get("date", str),
                   f.get("us", float), f.number("ratio"), f.number("baseline_us"), f.get("candidate", str),
                   f.get("measured", int), f.get("timed", int))

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))
