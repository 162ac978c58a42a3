"""deepgemm for PyTorch tensors (torch is an optional extra: `pip install ".[torch]"`).

    import deepgemm.torch as dgt
    y = dgt.einsum("bshd,bthd->bhst", q, k)              # over q's and k's own strides: no .contiguous()
    y = dgt.matmul(a, b, epilogue=[{"bias": b0}, {"activation": "gelu_tanh"}])
    model = dgt.replace_linear(model)                    # every nn.Linear -> deepgemm.torch.Linear

Each call's spec is built from the tensors' shapes, strides, data pointers' alignment and dtypes
(deepgemm/torch/problem.py); its kernel comes from the kernel cache (built once a machine, one line on stderr while
it builds), and runs on the current CUDA stream (CPU tensors: the host kernels). The ops are torch custom ops
(deepgemm::einsum, deepgemm::einsum_out, deepgemm::linear) with fake implementations and autograd, so
torch.compile(fullgraph=True) and CUDA-graph capture take them.
"""

from __future__ import annotations

import torch

from deepgemm.torch import ops
from deepgemm.torch.launch import ROW_POLICIES, arch_of, contraction_for, kernel_for, run, spec_of
from deepgemm.torch.linear import Linear, linear, replace_linear
from deepgemm.torch.problem import ROW_RANGES, TensorArgumentError, run_time_span
from dgemm_cli.spec import Spec


def einsum(equation: str, a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None,
           alpha: float = 1.0, beta: float = 0.0, epilogue: list | None = None, rows: str = "auto") -> torch.Tensor:
    """torch.einsum of two tensors by one deepgemm kernel, over their own views: out = epilogue(alpha * einsum +
    beta * out). `epilogue`: the spec's steps with tensors for views, each broadcast to the output
    (`[{"bias": b}, {"scale": s}, {"activation": "silu"}, {"clamp": (lo, hi)}, {"residual": r}]`). `out`: written
    in place (any strides; its dtype may differ from the inputs'); beta needs it. `rows`: "auto" sizes the one row
    letter (in a and the output, not in b: the tokens) at run time once it has changed between calls, "dynamic"
    always, "static" never."""
    for what, t in (("a", a), ("b", b), ("out", out)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TensorArgumentError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
    if out is None:  # an out given fixes the result's dtype; without one, autocast picks it as for torch.einsum
        a, b = ops.autocast(a, b)
    tensors, code = ops.encode_epilogue(epilogue)
    direct = ops.eager(a, b, out, *tensors)  # no tracer and no autograd: the kernel without the op's dispatch
    if out is None:
        if beta != 0.0:
            raise TensorArgumentError(f"beta={beta} scales out, and no out was given. Fix: pass out=, or beta=0")
        if direct:
            return ops.einsum_result(equation, a, b, tensors, code, float(alpha), rows)
        return torch.ops.deepgemm.einsum(equation, a, b, tensors, code, float(alpha), rows)
    if direct:
        run(equation, a, b, out, ops.decode_epilogue(code, tensors), alpha=float(alpha), beta=float(beta),
                rows=rows)
    else:
        torch.ops.deepgemm.einsum_out(equation, a, b, out, tensors, code, float(alpha), float(beta), rows)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, alpha: float = 1.0,
           beta: float = 0.0, epilogue: list | None = None, rows: str = "auto") -> torch.Tensor:
    """torch.matmul by a deepgemm kernel (1-D operands and broadcast batch dims as torch.matmul takes them), with
    einsum's out, alpha, beta, epilogue and rows."""
    if a.dim() == 0 or b.dim() == 0:
        raise TensorArgumentError("matmul: both arguments need at least 1 dim (torch.matmul refuses scalars too)")
    left = "...mk" if a.dim() > 1 else "k"
    right = "...kn" if b.dim() > 1 else "k"
    result = ("..." if max(a.dim(), b.dim()) > 2 else "") + ("m" if a.dim() > 1 else "") + ("n" if b.dim() > 1 else "")
    if a.dim() <= 2:
        left = left.replace("...", "")
    if b.dim() <= 2:
        right = right.replace("...", "")
    return einsum(f"{left},{right}->{result}", a, b, out=out, alpha=alpha, beta=beta, epilogue=epilogue, rows=rows)


def spec_for(equation: str, a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, beta: float = 0.0,
             epilogue: list | None = None, rows: str = "static", arch: str | None = None,
             name: str | None = None) -> Spec:
    """The spec `einsum` builds for these tensors: its kernel, generated into a folder of its own
    (`deepgemm.generate(spec, "generated")`), is the standalone CUDA (or C++) a C++ project can vendor. `out`
    defaults to a new contiguous, 16-byte aligned tensor, as einsum allocates it; `rows="dynamic"` sizes the one row
    letter at run time over the range that holds its size; `arch` defaults to the tensors' device's."""
    if rows not in ("static", "dynamic"):
        raise TensorArgumentError(f"rows={rows!r}: a spec is static or dynamic")
    c = contraction_for(equation, a, b, out, tuple(kv for step in epilogue or () for kv in step.items()))
    span = None
    if rows == "dynamic":
        if len(c.row_letters) != 1:
            raise TensorArgumentError(f"rows='dynamic': the product has {len(c.row_letters)} row letters (in a and the "
                                      "output, not in b); a run-time size takes exactly one. Fix: rows='static'")
        found = run_time_span(c)
        if found is None:
            raise TensorArgumentError(f"rows='dynamic': {c.size(c.row_letters)} rows are past the largest range "
                                      f"({ROW_RANGES[-1][1]}). Fix: rows='static'")
        span = found[1]
    return spec_of(c, arch or arch_of(a.device), reads_c=beta != 0.0, rows=span, name=name)


__all__ = ["Linear", "ROW_POLICIES", "ROW_RANGES", "TensorArgumentError", "arch_of", "einsum", "kernel_for",
           "linear", "matmul", "replace_linear", "spec_for"]
