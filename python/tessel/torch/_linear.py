"""tessel.torch.linear: activation(x @ weight.T + bias) as one fused tessel GEMM, with autograd.

Forward: ts.matmul with the bias and the activation in its epilogue; with an activation it also
writes the epilogue's input (aux), the one tensor the backward needs besides x and weight.
Backward: dz = grad * activation'(aux) as one fused elementwise kernel (in x's dtype), then the
data gradient dz @ weight and the weight gradient dz.T @ x as two tessel GEMMs, and the bias
gradient as a column sum of dz (half dtypes: ones @ dz, a GEMM accumulating in float32).
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor

import tessel as ts

from ._autocast import register_autocast_to_region_dtype
from ._fuse import _eager_index, _is_compiling
from ._interop import check_same_device, on_cuda_stream, on_torch_stream, to_tessel, to_torch

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh")
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_OP = "tessel.torch.linear"


def activation_name(activation) -> str:
    if activation is None:
        return "none"
    if activation not in ACTIVATIONS:
        raise ValueError(f"{_OP}: unknown activation {activation!r} (expected None, 'relu', 'gelu' or 'gelu_tanh')")
    return activation


def _shape(t) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ("," if t.dim() == 1 else "") + ")"


def check_linear(x, weight, bias, *, same_dtype: bool, op: str = _OP, in_features: Optional[int] = None) -> None:
    """Devices, dtypes and shapes, with errors naming the op and the offending values.
    `same_dtype`: also require one dtype (after autocast has cast the inputs). `in_features`: the
    features of the layer's input when that is not x (a later layer of tt.mlp)."""
    names = ("x", "weight", "bias")
    tensors = (x, weight, bias)
    for name, t in zip(names, tensors):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    check_same_device(op, tensors, names)
    for name, t in zip(names, tensors):
        if t is not None and t.dtype not in _FLOATING:
            raise TypeError(f"{op}: {name} has dtype {t.dtype}; supported dtypes are float16, bfloat16, float32 and float64")
    if same_dtype:
        dtypes = {t.dtype for t in tensors if t is not None}
        if len(dtypes) > 1:
            listed = ", ".join(f"{n} {t.dtype}" for n, t in zip(names, tensors) if t is not None)
            raise TypeError(f"{op}: x, weight and bias must have one dtype, got {listed}")
    if weight.dim() != 2:
        raise ValueError(f"{op}: weight must be 2-D (out_features, in_features), got shape {_shape(weight)}")
    if x.dim() < 1:
        raise ValueError(f"{op}: x must have at least 1 dimension, got a 0-d tensor")
    if in_features is not None and in_features != weight.shape[1]:
        raise ValueError(f"{op}: weight {_shape(weight)} takes {weight.shape[1]} in_features but the layer before "
                         f"gives {in_features}")
    if in_features is None and x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{op}: x's last dimension must equal weight's in_features: x {_shape(x)}, weight {_shape(weight)}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        raise ValueError(f"{op}: bias must have shape ({weight.shape[0]},) (weight's out_features), got {_shape(bias)}")


# ---- the activation derivatives: grad * activation'(z), one fused kernel each ----
# On CUDA a fused kernel computes float16/bfloat16 operands in float (the literals too) and rounds
# once, at the store: the derivative of half inputs is evaluated in float32, as torch does, and
# written in the half dtype the GEMMs read, by one contiguous kernel (no float32 copy, no cast).
# The CPU backend evaluates a fused function op by op in the operands' dtype, so there half
# operands are widened to float32 first and the result is rounded once afterwards.
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715


@ts.fuse
def _relu_grad(g, z):
    return ts.where(z > 0, g, 0)


@ts.fuse
def _gelu_grad(g, z):
    return g * (0.5 * (1 + ts.erf(z * _SQRT1_2)) + z * ts.exp(-0.5 * z * z) * _INV_SQRT_2PI)


@ts.fuse
def _gelu_tanh_grad(g, z):
    t = ts.tanh(_SQRT_2_OVER_PI * (z + _GELU_C * z * z * z))
    return g * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_C * z * z))


_ACTIVATION_GRAD = {"relu": _relu_grad, "gelu": _gelu_grad, "gelu_tanh": _gelu_tanh_grad}


def activation_grad(activation, g, z):
    """grad * activation'(z) for tessel arrays g and z of one dtype, in that dtype (half dtypes
    computed in float32 and rounded once)."""
    dtype = g.dtype
    if dtype in (ts.float16, ts.bfloat16) and g.device.type != "cuda":
        return _ACTIVATION_GRAD[activation](g.astype(ts.float32), z.astype(ts.float32)).astype(dtype)
    return _ACTIVATION_GRAD[activation](g, z)


_ones = {}  # (tessel device, dtype, length) -> a vector of ones


def _ones_vector(device, dtype, n):
    key = (str(device), str(dtype), n)
    ones = _ones.get(key)
    if ones is None:
        ones = _ones[key] = ts.ones((n,), dtype=dtype, device=device)
    return ones


def _rows(x: Tensor) -> int:
    return math.prod(x.shape[:-1])


def bias_gradient(dz):
    """The column sums of dz (rows x out_features), the bias gradient, as a torch tensor."""
    if dz.dtype in (ts.float16, ts.bfloat16):
        # ones @ dz: a GEMM reads dz once in its dtype, accumulates in float32 and rounds once
        # (a sum of half dz would first widen all of it to float32: one more pass over dz).
        return to_torch(ts.matmul(_ones_vector(dz.device, dz.dtype, dz.shape[0]), dz))
    return to_torch(ts.sum(dz, axis=0))


@torch.library.custom_op("tessel::linear", mutates_args=())
def _linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str) -> Tuple[Tensor, Tensor]:
    check_linear(x, weight, bias, same_dtype=True)
    activation = activation_name(None if activation == "none" else activation)
    with on_torch_stream(x.device):
        return _linear_forward(x, weight, bias, activation)


def _linear_forward(x, weight, bias, activation):
    rows, out_features = _rows(x), weight.shape[0]
    x2 = to_tessel(x).reshape((rows, x.shape[-1]))
    w = to_tessel(weight)
    b = to_tessel(bias) if bias is not None else None
    result_shape = tuple(x.shape[:-1]) + (out_features,)
    if activation == "none":
        d = ts.matmul(x2, w.T, bias=b)
        aux = x.new_empty((0,))
    else:
        d, aux_array = ts.matmul(x2, w.T, bias=b, epilogue=activation, aux=True)
        aux = to_torch(aux_array.reshape(result_shape))
    return to_torch(d.reshape(result_shape)), aux


@_linear.register_fake
def _(x, weight, bias, activation):
    check_linear(x, weight, bias, same_dtype=True)
    activation_name(None if activation == "none" else activation)
    result_shape = tuple(x.shape[:-1]) + (weight.shape[0],)
    y = x.new_empty(result_shape)
    aux = x.new_empty((0,)) if activation == "none" else x.new_empty(result_shape)
    return y, aux


@torch.library.custom_op("tessel::linear_backward", mutates_args=())
def _linear_backward(grad: Tensor, x: Tensor, weight: Tensor, aux: Tensor, activation: str,
                     needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    with on_torch_stream(x.device):
        return _linear_backward_gemms(grad, x, weight, aux, activation, needs)


def _linear_backward_gemms(grad, x, weight, aux, activation, needs):
    rows, in_features, out_features = _rows(x), x.shape[-1], weight.shape[0]
    dz = to_tessel(grad).reshape((rows, out_features))
    if activation != "none":
        dz = activation_grad(activation, dz, to_tessel(aux).reshape((rows, out_features)))
    empty = x.new_empty((0,))
    gx = gw = gb = empty
    if needs[0]:
        gx = to_torch(ts.matmul(dz, to_tessel(weight)).reshape(tuple(x.shape)))
    if needs[1]:
        gw = to_torch(ts.matmul(dz.T, to_tessel(x).reshape((rows, in_features))))
    if needs[2]:
        gb = bias_gradient(dz)
    return gx, gw, gb


@_linear_backward.register_fake
def _(grad, x, weight, aux, activation, needs):
    gx = torch.empty_like(x, memory_format=torch.contiguous_format) if needs[0] else x.new_empty((0,))
    gw = weight.new_empty(weight.shape) if needs[1] else x.new_empty((0,))
    gb = weight.new_empty((weight.shape[0],)) if needs[2] else x.new_empty((0,))
    return gx, gw, gb


def _setup_context(ctx, inputs, output):
    x, weight, bias, activation = inputs
    _, aux = output
    ctx.activation = activation
    ctx.has_bias = bias is not None
    ctx.mark_non_differentiable(aux)
    # aux has no gradient: without this autograd would fill a zero tensor of aux's size for it on
    # every backward (0.04 ms a layer for 16384 x 4096 bfloat16 on the H100, in torch_training's MLP).
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, aux)


def _needs(ctx):
    """Which of x, weight and bias need a gradient (the bias only when there is one)."""
    return [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]


def _backward(ctx, grad, _grad_aux):
    x, weight, aux = ctx.saved_tensors
    needs = _needs(ctx)
    if grad is None or not any(needs):
        return None, None, None, None
    gx, gw, gb = torch.ops.tessel.linear_backward(grad, x, weight, aux, ctx.activation, needs)
    return (gx if needs[0] else None), (gw if needs[1] else None), (gb if needs[2] else None), None


_linear.register_autograd(_backward, setup_context=_setup_context)
register_autocast_to_region_dtype(torch.ops.tessel.linear.default, "linear")


class _EagerLinear(torch.autograd.Function):
    """tt.linear's eager autograd: the registered op's forward and backward implementations
    (_linear_forward, _linear_backward_gemms: the same kernels, the same saved tensors) without the
    dispatcher's custom-op layers in between, as tt.fuse's eager calls; torch.compile, autocast,
    modes and transforms see the registered op."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation, index):
        if index >= 0:
            with on_cuda_stream(index):
                y, aux = _linear_forward(x, weight, bias, activation)
        else:
            y, aux = _linear_forward(x, weight, bias, activation)
        ctx.activation, ctx.has_bias, ctx.index = activation, bias is not None, index
        ctx.save_for_backward(x, weight, aux)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, aux = ctx.saved_tensors
        needs = _needs(ctx)
        if not any(needs):
            return None, None, None, None, None
        if torch.is_grad_enabled():  # create_graph=True: the registered backward op (no double backward)
            gx, gw, gb = torch.ops.tessel.linear_backward(grad, x, weight, aux, ctx.activation, needs)
        elif ctx.index >= 0:
            with on_cuda_stream(ctx.index):
                gx, gw, gb = _linear_backward_gemms(grad, x, weight, aux, ctx.activation, needs)
        else:
            gx, gw, gb = _linear_backward_gemms(grad, x, weight, aux, ctx.activation, needs)
        return (gx if needs[0] else None), (gw if needs[1] else None), (gb if needs[2] else None), None, None


def _eager_device(x, weight, bias):
    """_eager_index of the operands (-1: CPU, else the CUDA device; None: the registered op), or
    None under autocast, whose cast the registered op's autocast rule does."""
    index = _eager_index((x, weight) if bias is None else (x, weight, bias))
    if index is None or torch.is_autocast_enabled("cuda" if index >= 0 else "cpu"):
        return None
    return index


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None) -> Tensor:
    """``activation(x @ weight.T + bias)`` as one fused tessel GEMM (``torch.nn.functional.linear``
    followed by the activation).

    Args:
        x: ``(..., in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.
        activation: None, ``"relu"``, ``"gelu"`` (erf form) or ``"gelu_tanh"`` (tanh approximation).

    Float16, bfloat16, float32 and float64 on the CPU and CUDA; under ``torch.autocast`` the
    inputs are cast to the region's dtype, as ``torch.nn.functional.linear``'s are. Differentiable
    in x, weight and bias.
    """
    act = activation_name(activation)
    if not _is_compiling():
        index = _eager_device(x, weight, bias)
        if index is not None:  # no autocast: the operands' dtypes are the op's
            check_linear(x, weight, bias, same_dtype=True)
            return _EagerLinear.apply(x, weight, bias, act, index)
    check_linear(x, weight, bias, same_dtype=False)  # before autocast casts them
    return torch.ops.tessel.linear(x, weight, bias, act)[0]
