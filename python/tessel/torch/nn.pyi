from typing import Any, Optional, Sequence

import torch

class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` followed by an activation, run as one fused tessel GEMM.

    A drop-in for ``torch.nn.Linear`` (same parameters, initialization and state dict) with one
    more argument, ``activation``: None, ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
    """
    activation: str
    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None,
                 activation: Optional[str] = None) -> None: ...
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...

class MLP(torch.nn.Module):
    """A stack of :class:`Linear` layers with one activation, run as one op (``tessel.torch.mlp``).

    ``MLP(sizes)`` has ``len(sizes) - 1`` layers, ``layers[i]`` a :class:`Linear` of
    ``sizes[i]`` to ``sizes[i + 1]`` features, with the values and gradients of those layers run
    one by one. Its backward fuses each layer's activation derivative and bias gradient into the
    data-gradient GEMM of the layer above (cuBLASLt's DGELU epilogue for ``"gelu_tanh"``).
    ``activate_last=False`` leaves the last layer without activation.
    """
    activation: str
    activate_last: bool
    layers: torch.nn.ModuleList
    def __init__(self, sizes: Sequence[int], activation: Optional[str] = "gelu_tanh", bias: bool = True,
                 activate_last: bool = True, device: Any = None, dtype: Any = None) -> None: ...
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
