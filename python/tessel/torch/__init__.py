"""tessel.torch: tessel's fused kernels as PyTorch ops, with autograd, torch.compile and autocast.

    import tessel.torch as tt
    y = tt.linear(x, weight, bias, activation="gelu_tanh")   # one fused GEMM
    layer = tt.nn.Linear(1024, 1024, activation="relu")        # drop-in for torch.nn.Linear
    model = tt.nn.MLP([1024, 4096, 1024], activation="gelu_tanh")  # layers fused in the backward
    @tt.fuse
    def swish_gate(x, y):
        return x * torch.sigmoid(x) * y                        # one kernel forward, fused backward
    @tt.fuse(reduction="mean", dtype=torch.float32)
    def mean_square(y):
        return y * y                                           # a loss: (y * y).mean(dtype=torch.float32)

Every op is a ``torch.library.custom_op`` with a fake (meta) implementation and autograd, so
``torch.compile(fullgraph=True)`` sees one op per call. Tensors cross to tessel through DLPack
without copies, and tessel's kernels run on torch's current CUDA stream. Importing this module
imports torch; ``import tessel`` does not.
"""
from __future__ import annotations

import torch  # noqa: F401  (the reason this is a separate module)

from . import nn  # noqa: F401
from ._custom import CustomOp, custom_op  # noqa: F401
from ._fuse import FusedFunction, FusedReduction, fuse  # noqa: F401
from ._graph import NotDifferentiableError, TraceError  # noqa: F401
from ._interop import to_tessel, to_torch  # noqa: F401
from ._linear import linear  # noqa: F401
from ._mlp import mlp  # noqa: F401

__all__ = ["linear", "mlp", "nn", "fuse", "custom_op", "to_tessel", "to_torch", "FusedFunction", "FusedReduction", "CustomOp",
           "TraceError", "NotDifferentiableError"]
