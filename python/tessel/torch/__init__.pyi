# Type stubs of tessel.torch (also the source of its API reference; the docstrings of functions
# without one here come from the .py files).
from typing import Any, Callable, Optional, Sequence, Union, overload

import torch
from torch import Tensor

import tessel

from . import nn as nn

def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None) -> Tensor: ...
def mlp(x: Tensor, weights: Sequence[Tensor], biases: Optional[Sequence[Tensor]] = None,
        activation: Optional[str] = "gelu_tanh", activate_last: bool = True) -> Tensor: ...
@overload
def fuse(fn: Callable[..., Any]) -> FusedFunction: ...
@overload
def fuse(*, reduction: Optional[str] = None, dtype: Optional[torch.dtype] = None) -> Callable[[Callable[..., Any]], FusedFunction]: ...
def custom_op(name: str, kernel: Union[tessel.ElementwiseKernel, tessel.RawKernel, Callable[..., tessel.Array]], *,
              backward: Optional[Callable[[Sequence[Tensor], Tensor, Tensor], Sequence[Optional[Tensor]]]] = None,
              fake: Optional[Callable[..., Tensor]] = None, launch: Optional[Callable[..., tessel.Array]] = None,
              out_dtype: Optional[torch.dtype] = None) -> CustomOp: ...
def to_tessel(t: Tensor) -> tessel.Array:
    """A tessel array viewing the tensor's memory (no copy)."""
def to_torch(a: tessel.Array) -> Tensor:
    """A torch tensor viewing the tessel array's memory (no copy)."""

class FusedFunction:
    """The result of :func:`fuse`: call it with torch tensors (they broadcast)."""
    op_name: str
    def __call__(self, *tensors: Tensor) -> Tensor: ...
    def source(self, *tensors: Tensor) -> str:
        """The generated CUDA source of the forward kernel for these tensors' dtypes."""

class FusedReduction(FusedFunction):
    """The result of :func:`fuse` with ``reduction=``: call it with torch tensors; it returns a 0-d tensor."""
    reduction: str
    dtype: Optional[torch.dtype]

class CustomOp:
    """The result of :func:`custom_op`: call it with torch tensors."""
    name: str
    def __call__(self, *tensors: Tensor) -> Tensor: ...

class TraceError(TypeError):
    """A function that :func:`fuse` cannot fuse (a reduction, indexing, a cast...), raised when it is traced."""

class NotDifferentiableError(RuntimeError):
    """A gradient is needed through an operation of a fused function that has none (a comparison used as a number, floor, sign...)."""
