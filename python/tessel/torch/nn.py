"""Modules over tessel's fused ops: tessel.torch.nn.Linear."""
from __future__ import annotations

import torch

from ._linear import activation_name, linear


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` followed by an activation, run as one fused tessel GEMM.

    A drop-in for ``torch.nn.Linear`` (same parameters, initialization and state dict) with one
    more argument, ``activation``: None, ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 activation=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation_name(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, None if self.activation == "none" else self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation!r}"
