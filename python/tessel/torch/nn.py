"""Modules over tessel's fused ops: tessel.torch.nn.Linear and tessel.torch.nn.MLP."""
from __future__ import annotations

import torch

from ._linear import activation_name, linear
from ._mlp import mlp


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


class MLP(torch.nn.Module):
    """A stack of :class:`Linear` layers with one activation, run as one op (:func:`tessel.torch.mlp`).

    ``MLP([4096, 4096, 4096], activation="gelu_tanh")`` is ``Linear(4096, 4096, activation=...)``
    twice, with the same parameters (``layers[i].weight``, ``layers[i].bias``) and the same
    values and gradients; its backward fuses each layer's activation derivative and bias
    gradient into the data-gradient GEMM of the layer above.

    Args:
        sizes: the feature counts, input first: ``len(sizes) - 1`` layers.
        activation: None, ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
        bias: whether the layers have biases.
        activate_last: False leaves the last layer without activation (a regression head).
    """

    def __init__(self, sizes, activation="gelu_tanh", bias: bool = True, activate_last: bool = True, device=None,
                 dtype=None):
        super().__init__()
        sizes = list(sizes)
        if len(sizes) < 2:
            raise ValueError(f"tessel.torch.nn.MLP: sizes needs at least 2 entries (input and output), got {sizes}")
        self.activation = activation_name(activation)
        self.activate_last = activate_last
        self.layers = torch.nn.ModuleList(
            Linear(i, o, bias=bias, device=device, dtype=dtype, activation=activation) for i, o in zip(sizes, sizes[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = [layer.weight for layer in self.layers]
        biases = [layer.bias for layer in self.layers] if self.layers[0].bias is not None else None
        return mlp(x, weights, biases, None if self.activation == "none" else self.activation, self.activate_last)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, activate_last={self.activate_last}"
