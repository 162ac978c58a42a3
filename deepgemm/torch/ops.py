"""The torch custom ops (torch.library) that run deepgemm kernels, so that torch.compile traces through them (each
has a fake implementation: shapes only), CUDA graphs capture them (a launch allocates nothing but its output and
never synchronizes) and autograd differentiates them:

    deepgemm::einsum(equation, a, b, epilogue_tensors, epilogue, alpha, rows) -> Tensor
    deepgemm::einsum_out(equation, a, b, out!, epilogue_tensors, epilogue, alpha, beta, rows)
    deepgemm::linear(x, weight, bias?, activation) -> Tensor   (nn.Linear's y = x W^T + b, then the activation)

An epilogue crosses the op boundary as a string (`encode_epilogue`): its steps, with the index of each view step's
tensor in `epilogue_tensors`, since an op's schema takes tensors, numbers and strings only.
"""

from __future__ import annotations

from typing import List  # noqa: UP035 (torch.library's schema inference before 2.7 knows typing.List, not list)

import torch

from deepgemm.torch.launch import ACTIVATIONS, equation_of, run
from deepgemm.torch.problem import CANONICAL_LETTERS, EPILOGUE_VIEW_STEPS, TensorArgumentError, output_shape

LINEAR_EQUATION = "...k,nk->...n"  # y = x W^T: W is nn.Linear's [out_features, in_features]
GRAD_INPUT_EQUATION = "...n,nk->...k"  # dX = dY W
GRAD_WEIGHT_EQUATION = "...n,...k->nk"  # dW = dY^T X: a contraction over every token


def encode_epilogue(epilogue: object) -> tuple[list[torch.Tensor], str]:
    """An epilogue in einsum's form, a list of one-key mappings in the spec's vocabulary with tensors for views
    (`[{"bias": b}, {"activation": "silu"}, {"clamp": (-1, 1)}]`), as (tensors, code)."""
    if epilogue is None:
        return [], ""
    if not isinstance(epilogue, (list, tuple)):
        raise TensorArgumentError(f"epilogue: expected a list of steps, got {type(epilogue).__name__}. Fix: write "
                                  "e.g. [{'bias': b}, {'activation': 'silu'}]")
    tensors: list[torch.Tensor] = []
    parts = []
    for step in epilogue:
        if not isinstance(step, dict) or len(step) != 1:
            raise TensorArgumentError(f"epilogue: each step is a mapping with one key, got {step!r}. Fix: write "
                                      "e.g. {'bias': b}")
        (kind, value), = step.items()
        if kind in EPILOGUE_VIEW_STEPS:
            if not isinstance(value, torch.Tensor):
                raise TensorArgumentError(f"epilogue: {kind} takes a tensor, got {type(value).__name__}")
            parts.append(f"{kind}={len(tensors)}")
            tensors.append(value)
        elif kind == "activation":
            if value not in ACTIVATIONS:
                raise TensorArgumentError(f"epilogue: activation {value!r} is not one of {', '.join(ACTIVATIONS)}")
            parts.append(f"activation={value}")
        elif kind == "clamp":
            lo, hi = value
            parts.append(f"clamp={float(lo)!r},{float(hi)!r}")
        else:
            raise TensorArgumentError(f"epilogue: unknown step {kind!r}. Fix: use bias, scale, activation, clamp or "
                                      "residual")
    return tensors, ";".join(parts)


def decode_epilogue(code: str, tensors: list[torch.Tensor]) -> tuple[tuple[str, object], ...]:
    steps: list[tuple[str, object]] = []
    for part in filter(None, code.split(";")):
        kind, _, value = part.partition("=")
        if kind in EPILOGUE_VIEW_STEPS:
            steps.append((kind, tensors[int(value)]))
        elif kind == "clamp":
            lo, hi = value.split(",")
            steps.append((kind, (float(lo), float(hi))))
        else:
            steps.append((kind, value))
    return tuple(steps)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def eager(*tensors: torch.Tensor | None) -> bool:
    """Whether a call may run its kernel without the custom op: no compiler is tracing, no gradient is recorded,
    and the tensors are plain (a tracer's fake or functional tensors, and other subclasses, go through the op).
    The op's dispatch costs more than the launch itself on small problems."""
    if torch.compiler.is_compiling():
        return False
    grad = torch.is_grad_enabled()
    return all(type(t) in _PLAIN and not (grad and t.requires_grad) for t in tensors if t is not None)


def autocast(*tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """The tensors as torch.autocast would hand them to a matmul: inside an autocast region of their device, every
    floating tensor in the region's dtype (as F.linear and torch.einsum take them); outside, as they are."""
    first = next((t for t in tensors if isinstance(t, torch.Tensor)), None)
    if first is None or not torch.is_autocast_enabled(first.device.type):
        return tensors
    dtype = torch.get_autocast_dtype(first.device.type)
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in tensors)


def _result(equation: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    shape = output_shape(equation_of(equation, a.dim(), b.dim()), tuple(a.shape), tuple(b.shape))
    return a.new_empty(shape)


def einsum_result(equation: str, a: torch.Tensor, b: torch.Tensor, epilogue_tensors: list[torch.Tensor],
                  epilogue: str, alpha: float, rows: str) -> torch.Tensor:
    """deepgemm::einsum's implementation: a new output, written by the kernel."""
    out = _result(equation, a, b)
    run(equation, a, b, out, decode_epilogue(epilogue, epilogue_tensors), alpha=alpha, rows=rows)
    return out


@torch.library.custom_op("deepgemm::einsum", mutates_args=())
def einsum_op(equation: str, a: torch.Tensor, b: torch.Tensor, epilogue_tensors: List[torch.Tensor],  # noqa: UP006
              epilogue: str, alpha: float, rows: str) -> torch.Tensor:
    return einsum_result(equation, a, b, epilogue_tensors, epilogue, alpha, rows)


@einsum_op.register_fake
def _einsum_fake(equation, a, b, epilogue_tensors, epilogue, alpha, rows):
    return _result(equation, a, b)


@torch.library.custom_op("deepgemm::einsum_out", mutates_args=("out",))
def einsum_out_op(equation: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                  epilogue_tensors: List[torch.Tensor],  # noqa: UP006
                  epilogue: str, alpha: float, beta: float, rows: str) -> None:
    run(equation, a, b, out, decode_epilogue(epilogue, epilogue_tensors), alpha=alpha, beta=beta, rows=rows)


@einsum_out_op.register_fake
def _einsum_out_fake(equation, a, b, out, epilogue_tensors, epilogue, alpha, beta, rows):
    return None


def _einsum_setup(ctx, inputs, output):
    equation, a, b, epilogue_tensors, epilogue, alpha, rows = inputs
    ctx.alpha, ctx.rows, ctx.shapes = alpha, rows, (tuple(a.shape), tuple(b.shape))
    ctx.epilogue_count = len(epilogue_tensors)
    ctx.grad_equations = grad_equations(equation_of(equation, a.dim(), b.dim())) if not epilogue else None
    # dA reads b and dB reads a: each is kept only when the other's gradient is wanted.
    ctx.save_for_backward(b if ctx.needs_input_grad[1] else None, a if ctx.needs_input_grad[2] else None)


def _einsum_backward(ctx, grad):
    if ctx.grad_equations is None:
        raise TensorArgumentError("this deepgemm.torch.einsum has no gradient here (an epilogue, a diagonal, or a "
                                  "letter summed within one input). Fix: when training, write it as a plain "
                                  "einsum whose letters each appear in the output or the other input, and apply "
                                  "epilogue steps with torch ops")
    b, a = ctx.saved_tensors
    grad_a_eq, grad_b_eq = ctx.grad_equations
    grad_a = grad_b = None
    if ctx.needs_input_grad[1]:
        grad_a = _unbroadcast(torch.ops.deepgemm.einsum(grad_a_eq, grad, b, [], "", ctx.alpha, ctx.rows),
                              ctx.shapes[0])
    if ctx.needs_input_grad[2]:
        grad_b = _unbroadcast(torch.ops.deepgemm.einsum(grad_b_eq, grad, a, [], "", ctx.alpha, "static"),
                              ctx.shapes[1])
    return None, grad_a, grad_b, [None] * ctx.epilogue_count, None, None, None


def _unbroadcast(grad: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The gradient of an input that was broadcast (a dim of size 1 against n): summed over those dims."""
    dims = tuple(i for i, (g, n) in enumerate(zip(grad.shape, shape)) if n == 1 and g != 1)
    return grad.sum(dim=dims, keepdim=True) if dims else grad


def grad_equations(eq) -> tuple[str, str] | None:
    """(dA's, dB's) equations: dA = einsum(out, b -> a) with grad in out's place, and dB likewise; None where
    that rule does not hold (a letter in one input only, a diagonal)."""
    names: dict[str, str] = {}
    free = iter(x for x in CANONICAL_LETTERS if x not in eq.a + eq.b)
    for x in (*eq.a, *eq.b):
        if x not in names:
            names[x] = next(free) if x.startswith("…") else x
    a, b, out = ("".join(names[x] for x in dims) for dims in (eq.a, eq.b, eq.out))
    if len(set(a)) != len(a) or len(set(b)) != len(b):
        return None
    if any(x not in out + b for x in a) or any(x not in out + a for x in b):
        return None
    return f"{out},{b}->{a}", f"{out},{a}->{b}"


einsum_op.register_autograd(_einsum_backward, setup_context=_einsum_setup)


def linear_result(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str) -> torch.Tensor:
    """deepgemm::linear's implementation: y = activation(x W^T + b), a new output."""
    out = x.new_empty((*x.shape[:-1], weight.shape[0]))
    steps = (() if bias is None else (("bias", bias),)) + ((("activation", activation),) if activation else ())
    run(LINEAR_EQUATION, x, weight, out, steps)
    return out


@torch.library.custom_op("deepgemm::linear", mutates_args=())
def linear_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str) -> torch.Tensor:
    return linear_result(x, weight, bias, activation)


@linear_op.register_fake
def _linear_fake(x, weight, bias, activation):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation = inputs
    if activation:
        raise TensorArgumentError(f"deepgemm::linear fuses activation {activation!r} only without gradients. Fix: "
                                  "call deepgemm.torch.linear, which applies it after the product when training")
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    grad_x = torch.ops.deepgemm.einsum(GRAD_INPUT_EQUATION, grad, weight, [], "", 1.0, "auto") \
        if ctx.needs_input_grad[0] else None
    grad_w = torch.ops.deepgemm.einsum(GRAD_WEIGHT_EQUATION, grad, x, [], "", 1.0, "static") \
        if ctx.needs_input_grad[1] else None
    # db = the sum of dY over the tokens: a reduction, which no spec's epilogue writes; torch's sum does it.
    grad_b = grad.sum(dim=tuple(range(grad.dim() - 1))) if ctx.needs_input_grad[2] else None
    return grad_x, grad_w, grad_b, None


linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)
