from typing import Any, Optional

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
