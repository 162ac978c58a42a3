"""`Linear`, a drop-in nn.Linear whose forward and backward run deepgemm kernels, and `replace_linear`, which swaps
every nn.Linear of a model for one, keeping its parameters (the same Parameter objects: an optimizer built before
the swap still updates them)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from deepgemm.torch import ops
from deepgemm.torch.launch import ACTIVATIONS
from deepgemm.torch.problem import TensorArgumentError


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           activation: str | None = None) -> torch.Tensor:
    """torch.nn.functional.linear by a deepgemm kernel: y = activation(x W^T + b) over any leading dims of x, with
    the bias and the activation fused into the kernel's epilogue. When a gradient is wanted, the activation runs
    after the product as a torch op (its backward needs the product, which the fused kernel does not keep)."""
    if activation is not None and activation not in ACTIVATIONS:
        raise TensorArgumentError(f"activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    x, weight, bias = ops.autocast(x, weight, bias)
    if ops.eager(x, weight, bias):  # no tracer and no autograd: the kernel without the op's dispatch
        return ops.linear_result(x, weight, bias, activation or "")
    if activation and torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (x, weight, bias)):
        return ACTIVATIONS[activation](torch.ops.deepgemm.linear(x, weight, bias, ""))
    return torch.ops.deepgemm.linear(x, weight, bias, activation or "")


class Linear(nn.Linear):
    """nn.Linear with deepgemm kernels: the same constructor (plus `activation`, one of the spec's activations,
    fused after the bias), parameters and state_dict keys; f32, f16 and bf16 on CUDA (sm_80, sm_86, sm_89,
    sm_90a) and on the CPU."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 activation: str | None = None) -> None:
        if activation is not None and activation not in ACTIVATIONS:
            raise TensorArgumentError(f"activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation = activation

    @classmethod
    def from_linear(cls, module: nn.Linear, *, activation: str | None = None) -> Linear:
        """A Linear over `module`'s own parameters (shared, not copied)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = module.in_features, module.out_features
        new.weight = module.weight
        new.bias = module.bias
        new.activation = activation
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, activation=self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", activation={self.activation}" if self.activation else "")


def replace_linear(model: nn.Module, *, where: Callable[[str, nn.Linear], bool] | None = None) -> nn.Module:
    """Swap every nn.Linear in `model` (or those `where(name, module)` accepts) for a deepgemm Linear sharing its
    parameters; `model` itself when it is an nn.Linear is returned swapped. Returns the model."""
    if isinstance(model, nn.Linear) and not isinstance(model, Linear):
        return Linear.from_linear(model) if where is None or where("", model) else model
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not isinstance(child, Linear) and (where is None or where(full, child)):
                setattr(parent, child_name, Linear.from_linear(child))
    return model
