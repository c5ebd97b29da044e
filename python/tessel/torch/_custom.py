"""tessel.torch.custom_op: a user's tessel kernel, with a user-supplied backward, as a torch op."""
from __future__ import annotations

import re
from typing import Callable, List, Optional

import torch
from torch import Tensor

import tessel as ts

from ._interop import check_same_device, on_torch_stream, to_tessel, to_torch


class CustomOp:
    """The result of :func:`custom_op`: call it with torch tensors."""

    def __init__(self, qualname, run, fake, backward):
        self.name = qualname
        self._run = run
        self._fake = fake
        self._backward = backward
        self._op = torch.library.custom_op(qualname, self._impl, mutates_args=(), schema="(Tensor[] inputs) -> Tensor")
        self._op.register_fake(self._fake_impl)
        if backward is not None:
            self._op.register_autograd(self._autograd_backward, setup_context=self._setup_context)

    def _impl(self, inputs: List[Tensor]) -> Tensor:
        check_same_device(self.name, inputs, [f"input {i}" for i in range(len(inputs))])
        with on_torch_stream(inputs[0].device):
            result = self._run(*[to_tessel(t) for t in inputs])
            if not isinstance(result, ts.Array):
                raise TypeError(f"{self.name}: the kernel must return one tessel array, got {type(result).__name__}")
            out = to_torch(result)
        # a kernel may hand back one of its inputs (an in-place update): the op's output must be new
        if any(out.data_ptr() == t.data_ptr() and out.numel() and t.numel() for t in inputs):
            out = out.clone()
        return out

    def _fake_impl(self, inputs):
        check_same_device(self.name, inputs, [f"input {i}" for i in range(len(inputs))])
        return self._fake(*inputs)

    def _setup_context(self, ctx, inputs, output):
        (tensors,) = inputs
        ctx.count = len(tensors)
        ctx.save_for_backward(*tensors, output)

    def _autograd_backward(self, ctx, grad):
        saved = ctx.saved_tensors
        inputs, output = saved[:-1], saved[-1]
        grads = self._backward(inputs, output, grad)
        if isinstance(grads, Tensor):
            grads = (grads,)
        grads = list(grads)
        if len(grads) != ctx.count:
            raise ValueError(f"{self.name}: backward returned {len(grads)} gradients for {ctx.count} inputs")
        return (grads,)

    def __call__(self, *tensors):
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"{self.name}: argument {i} must be a torch.Tensor, got {type(t).__name__}")
        if not tensors:
            raise TypeError(f"{self.name}: needs at least one tensor argument")
        return self._op(list(tensors))


def _broadcast_fake(out_dtype):
    def fake(*inputs):
        shape = torch.broadcast_shapes(*[t.shape for t in inputs])
        dtype = out_dtype if out_dtype is not None else inputs[0].dtype
        return inputs[0].new_empty(shape, dtype=dtype)
    return fake


def custom_op(name: str, kernel, *, backward: Optional[Callable] = None, fake: Optional[Callable] = None,
              launch: Optional[Callable] = None, out_dtype: Optional[torch.dtype] = None) -> CustomOp:
    """Registers a tessel kernel as the torch op ``name`` (``"namespace::op"``, or ``"op"`` in the
    ``tessel_user`` namespace), called with torch tensors.

    Args:
        kernel: a :class:`tessel.ElementwiseKernel` with one output (called with the inputs), a
            :class:`tessel.RawKernel` (then ``launch`` is required), or any function of tessel
            arrays returning one array (e.g. a :func:`tessel.fuse` function).
        backward: ``backward(inputs, output, grad) -> gradients``, one per input (None where
            there is none), computed with torch ops or other tessel.torch ops; the inputs and the
            output are saved for it. Without it the op is not differentiable.
        fake: ``fake(*inputs) -> Tensor``, the output's shape and dtype for torch.compile and meta
            tensors. Default: the inputs' broadcast shape in ``out_dtype`` (default: the first
            input's dtype), which fits elementwise kernels.
        launch: for a RawKernel, ``launch(kernel, *arrays) -> Array``: allocates the output and
            launches the kernel (grid, block, arguments).
    """
    if "::" not in name:
        name = f"tessel_user::{name}"
    if not re.fullmatch(r"\w+::\w+", name):
        raise ValueError(f"tessel.torch.custom_op: name {name!r} must be 'namespace::op' with identifier parts")
    if isinstance(kernel, ts.RawKernel):
        if launch is None:
            raise TypeError(f"{name}: a RawKernel needs launch=lambda kernel, *arrays: ... (grid, block and "
                            "arguments are the caller's), returning the output array")
        def run(*arrays):
            for i, a in enumerate(arrays):
                if a.device.type != "cuda":
                    raise ts.DeviceError(f"{name}: a RawKernel needs a CUDA device; input {i} is on {a.device}")
            return launch(kernel, *arrays)
    elif launch is not None:
        run = lambda *arrays: launch(kernel, *arrays)  # noqa: E731
    elif callable(kernel):
        run = kernel
    else:
        raise TypeError(f"{name}: kernel must be a tessel ElementwiseKernel, RawKernel or a function of tessel "
                        f"arrays, got {type(kernel).__name__}")
    if fake is None:
        if isinstance(kernel, ts.RawKernel):
            raise TypeError(f"{name}: a RawKernel needs fake=lambda *inputs: <empty output tensor> (its output "
                            "shape is not known from its source)")
        fake = _broadcast_fake(out_dtype)
    return CustomOp(name, run, fake, backward)
