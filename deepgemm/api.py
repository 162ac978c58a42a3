"""Specs from Python: a dict in the YAML's schema (`spec_from_dict`), or a builder (`gemm`, `contraction`, `view`)
that writes that dict and parses it. Every path ends in `dgemm_cli.spec.parse_spec`, so validation, defaults and
each SpecError (its key, problem and fix) are the YAML file's."""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dgemm_cli.spec import Spec, load_spec, parse_spec

DICT_SOURCE = "<dict>"  # what a SpecError names in place of a file

# A size: a number, or a range sized at run time as (min, max) or {"min": .., "max": ..}.
Size = int | tuple[int, int] | Mapping[str, int]


@dataclass(frozen=True)
class View:
    """An operand's view in the spec's operand keys; a key left None is left out (the spec's default applies)."""

    strides: tuple[int, ...] | None = None  # element strides, in the operand's letter order
    byte_strides: tuple[int, ...] | None = None
    layout: str | None = None  # "row" | "col"
    offset: int | None = None  # elements from the base pointer
    dtype: str | None = None
    align: int | None = None  # bytes the caller promises for the base pointer

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def view(strides: Sequence[int] | None = None, *, byte_strides: Sequence[int] | None = None,
         layout: str | None = None, offset: int | None = None, dtype: str | None = None,
         align: int | None = None) -> View:
    """One operand's view: `view([802816, 3136, 56, 1])`, `view(layout="col", align=16)`."""
    return View(tuple(strides) if strides is not None else None,
                tuple(byte_strides) if byte_strides is not None else None, layout, offset, dtype, align)


def spec_from_dict(data: Mapping[str, Any], source: str = DICT_SOURCE) -> Spec:
    """A Spec from a mapping in the YAML's schema, validated as `deepgemm gen` validates a file; a SpecError names
    `source` where gen names the file. Tuples read as lists and numpy scalars as Python numbers."""
    return parse_spec(_plain(data), source)


def spec_from_yaml(path: str | Path) -> Spec:
    """A Spec from a YAML file, exactly as `deepgemm gen` reads it."""
    return load_spec(path)


def gemm(m: Size, n: Size, k: Size, *, batch: int | None = None, dtype: str = "bf16", a_layout: str = "row",
         b_layout: str = "col", c_layout: str = "row", arch: str = "sm_90a", name: str | None = None,
         A: View | Mapping[str, Any] | None = None, B: View | Mapping[str, Any] | None = None,
         C: View | Mapping[str, Any] | None = None, D: View | Mapping[str, Any] | None = None,
         accum: str | None = None, alpha: float | None = None, beta: float | None = None,
         epilogue: Sequence[Mapping[str, Any]] | None = None, scales: Mapping[str, Any] | None = None,
         plan: Mapping[str, Any] | None = None) -> Spec:
    """C[m,n] = alpha·A[m,k]·B[k,n] + beta·C, the spec's `gemm:` form. The layouts are the operands' unless a
    view (A=, B=, C=) gives strides or a layout of its own; `m` may be a run-time range (1, 256). Without `name`,
    one is made from the sizes and a hash of the rest (the C function and the folder are named after it)."""
    sizes: dict[str, Any] = {"m": _size(m), "n": _size(n), "k": _size(k)}
    if batch is not None:
        sizes["batch"] = batch
    operands = {op: _operand(given, layout)
                for op, given, layout in (("A", A, a_layout), ("B", B, b_layout), ("C", C, c_layout))}
    if D is not None:
        operands["D"] = _operand(D, None)
    doc = _document(arch=arch, dtype=dtype, accum=accum, alpha=alpha, beta=beta, epilogue=epilogue, scales=scales,
                    plan=plan)
    doc.update(gemm=sizes, operands=operands)
    labels = [_size_label(sizes[x]) for x in ("m", "n", "k")]
    stem = "gemm_" + "x".join(labels) if all(labels) else "gemm"  # a size that is not one: parse_spec reports it
    return spec_from_dict({"name": name if name is not None else default_name(stem, doc), **doc})


def contraction(equation: str, *, sizes: Mapping[str, Size], A: View | Mapping[str, Any] | None = None,
                B: View | Mapping[str, Any] | None = None, C: View | Mapping[str, Any] | None = None,
                D: View | Mapping[str, Any] | None = None, dtype: str = "bf16", arch: str = "sm_90a",
                name: str | None = None, accum: str | None = None, alpha: float | None = None,
                beta: float | None = None, epilogue: Sequence[Mapping[str, Any]] | None = None,
                scales: Mapping[str, Any] | None = None, plan: Mapping[str, Any] | None = None) -> Spec:
    """Any two-operand contraction, the spec's `contraction:` form: `contraction("nchw,kc->nkhw", sizes={...},
    A=view([...]))`. An operand not given is dense in its letter order."""
    operands = {op: _operand(given, None) for op, given in (("A", A), ("B", B), ("C", C), ("D", D))
                if given is not None}
    doc = _document(arch=arch, dtype=dtype, accum=accum, alpha=alpha, beta=beta, epilogue=epilogue, scales=scales,
                    plan=plan)
    doc.update(contraction=equation, sizes={x: _size(s) for x, s in sizes.items()} if isinstance(sizes, Mapping)
               else sizes)
    if operands:
        doc["operands"] = operands
    return spec_from_dict({"name": name if name is not None else default_name("contraction", doc), **doc})


def _document(**keys: Any) -> dict[str, Any]:
    """The top-level keys that were given (None: left out, so the spec's default applies)."""
    return {k: v for k, v in keys.items() if v is not None}


def _operand(given: View | Mapping[str, Any] | None, layout: str | None) -> dict[str, Any]:
    """An operand's mapping: the view's keys, with `layout` where the view says nothing of its strides."""
    keys = given.to_dict() if isinstance(given, View) else dict(given or {})
    if layout is not None and not {"strides", "byte_strides", "layout"} & set(keys):
        keys["layout"] = layout
    return keys


def _size(value: Any) -> Any:
    """(min, max) -> the spec's run-time range; anything else as given, for parse_spec to check."""
    if isinstance(value, tuple) and len(value) == 2:
        return {"min": value[0], "max": value[1]}
    return value


def _size_label(value: Any) -> str | None:
    """A size in a name: 4096, or 1to256 for a run-time range; None for what is not a size."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    if isinstance(value, Mapping) and all(isinstance(value.get(x), int) and value[x] >= 0 for x in ("min", "max")):
        return f"{value['min']}to{value['max']}"
    return None


def default_name(stem: str, doc: Mapping[str, Any]) -> str:
    """`stem` and 8 hex digits of the document: two specs of one shape but other views get two names."""
    digest = hashlib.sha256(json.dumps(_plain(doc), sort_keys=True, default=repr).encode()).hexdigest()
    return f"{stem}_{digest[:8]}"


def _plain(value: Any) -> Any:
    """`value` as YAML would give it: mappings as dicts, tuples as lists, numpy integers and floats as Python's."""
    if isinstance(value, View):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value
