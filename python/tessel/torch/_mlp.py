"""tessel.torch.mlp: a stack of linear layers with activations, whose backward fuses each layer's
activation derivative and bias gradient into the next layer's data-gradient GEMM.

Forward, per layer: one GEMM with the bias, the activation and aux (the activation's input), as
tt.linear. Backward, from the last layer down: the weight gradient dz_l.T @ y_(l-1), and the data
gradient dz_l @ W_l with the epilogue "<activation>_grad" reading layer l-1's aux, so that
dz_(l-1) = (dz_l @ W_l) * act'(z_(l-1)) comes out of that GEMM (cuBLASLt's DGELU epilogue for
gelu_tanh), and bias_grad its column sums (ones @ dz_(l-1)), where a stack of separate tt.linear
layers runs a derivative kernel per layer. Only the last layer's derivative (of the loss's
gradient) runs separately. On the H200, at 16384 x 4096 bfloat16, the fused GEMM took 0.89-1.03 ms
against 0.93-0.99 ms for the separate kernels (backward_gemm of torch_training, two runs): within
the spread, as the derivative is a cheap pass at that memory bandwidth.

Separate layers cannot do this: each layer's autograd node receives the gradient of its own
output, before its own activation's derivative, so the derivative cannot move into the GEMM of
the layer above. One op over the whole stack can.
"""
from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

import tessel as ts

from ._autocast import register_autocast_to_region_dtype
from ._fuse import _eager_index, _is_compiling
from ._interop import on_cuda_stream, on_torch_stream, to_tessel, to_torch
from ._linear import _linear_forward, _rows, activation_grad, activation_name, bias_gradient, check_linear

_OP = "tessel.torch.mlp"


def check_mlp(x, weights, biases, *, same_dtype: bool) -> None:
    """The layers' shapes chain (in_features of layer l == out_features of layer l-1); each layer's
    operands pass tt.linear's checks."""
    if not isinstance(weights, (list, tuple)) or len(weights) == 0:
        raise ValueError(f"{_OP}: weights must be a non-empty list of (out_features, in_features) tensors")
    if biases and len(biases) != len(weights):
        raise ValueError(f"{_OP}: {len(biases)} biases for {len(weights)} weights (give one per layer, or none)")
    features = None
    for i, w in enumerate(weights):
        check_linear(x, w, biases[i] if biases else None, same_dtype=same_dtype, op=f"{_OP} (layer {i})",
                     in_features=features)
        features = w.shape[0]


def _forward(x, weights, biases, activation, activate_last):
    """The outputs: [y, y_0 .. y_(L-2) (each layer's output, the next one's input), z_0 .. z_(L-1)
    (each activated layer's aux; an empty tensor for a layer without activation)]."""
    h, outputs, auxes = x, [], []
    last = len(weights) - 1
    for i, weight in enumerate(weights):
        act = activation if (i < last or activate_last) else "none"
        h, aux = _linear_forward(h, weight, biases[i] if biases else None, act)  # tt.linear's forward
        outputs.append(h)
        auxes.append(aux)
    return [outputs[-1]] + outputs[:-1] + auxes


def _backward(grad, x, weights, has_bias, hidden, auxes, activation, activate_last, needs_x):
    """[gx (or empty), gw_0 .. gw_(L-1), gb_0 .. gb_(L-1) (when has_bias)]."""
    rows, layers = _rows(x), len(weights)
    empty = x.new_empty((0,))
    gws, gbs = [None] * layers, [None] * layers
    last = layers - 1
    dz = to_tessel(grad).reshape((rows, weights[last].shape[0]))
    if activate_last and activation != "none":
        dz = activation_grad(activation, dz, to_tessel(auxes[last]).reshape((rows, weights[last].shape[0])))
    if has_bias:  # the last layer's bias gradient: no GEMM above it to fuse into
        gbs[last] = bias_gradient(dz)
    gx = empty
    for i in range(last, -1, -1):
        inputs = x if i == 0 else hidden[i - 1]
        gws[i] = to_torch(ts.matmul(dz.T, to_tessel(inputs).reshape((rows, inputs.shape[-1]))))
        w = to_tessel(weights[i])
        if i > 0:
            # layer i-1's activation derivative in this GEMM's epilogue, and its bias gradient
            if activation == "none":
                result = ts.matmul(dz, w, bias_grad=has_bias)
            else:
                z = to_tessel(auxes[i - 1]).reshape((rows, weights[i - 1].shape[0]))
                result = ts.matmul(dz, w, epilogue=activation + "_grad", aux=z, bias_grad=has_bias)
            if has_bias:
                dz, gb = result
                gbs[i - 1] = to_torch(gb)
            else:
                dz = result
        elif needs_x:
            gx = to_torch(ts.matmul(dz, w).reshape(tuple(x.shape)))
    return [gx] + gws + (gbs if has_bias else [])


@torch.library.custom_op("tessel::mlp", mutates_args=())
def _mlp(x: Tensor, weights: List[Tensor], biases: List[Tensor], activation: str, activate_last: bool) -> List[Tensor]:
    check_mlp(x, weights, biases, same_dtype=True)
    activation = activation_name(None if activation == "none" else activation)
    with on_torch_stream(x.device):
        return _forward(x, weights, biases, activation, activate_last)


@_mlp.register_fake
def _(x, weights, biases, activation, activate_last):
    check_mlp(x, weights, biases, same_dtype=True)
    activation = activation_name(None if activation == "none" else activation)
    lead, last = tuple(x.shape[:-1]), len(weights) - 1
    outputs = [x.new_empty(lead + (w.shape[0],)) for w in weights]
    auxes = [x.new_empty(lead + (w.shape[0],)) if activation != "none" and (i < last or activate_last)
             else x.new_empty((0,)) for i, w in enumerate(weights)]
    return [outputs[-1]] + outputs[:-1] + auxes


@torch.library.custom_op("tessel::mlp_backward", mutates_args=())
def _mlp_backward(grad: Tensor, x: Tensor, weights: List[Tensor], has_bias: bool, hidden: List[Tensor],
                  auxes: List[Tensor], activation: str, activate_last: bool, needs_x: bool) -> List[Tensor]:
    with on_torch_stream(x.device):
        return _backward(grad, x, weights, has_bias, hidden, auxes, activation, activate_last, needs_x)


@_mlp_backward.register_fake
def _(grad, x, weights, has_bias, hidden, auxes, activation, activate_last, needs_x):
    gx = torch.empty_like(x, memory_format=torch.contiguous_format) if needs_x else x.new_empty((0,))
    gws = [w.new_empty(w.shape) for w in weights]
    gbs = [w.new_empty((w.shape[0],)) for w in weights] if has_bias else []
    return [gx] + gws + gbs


def _split(outputs, layers):
    return outputs[0], list(outputs[1:layers]), list(outputs[layers:])


def _setup_context(ctx, inputs, output):
    x, weights, biases, activation, activate_last = inputs
    layers = len(weights)
    _, hidden, auxes = _split(output, layers)
    ctx.layers, ctx.has_bias = layers, bool(biases)
    ctx.activation, ctx.activate_last = activation, activate_last
    ctx.mark_non_differentiable(*hidden, *auxes)
    ctx.set_materialize_grads(False)  # no zero gradients for the saved outputs
    ctx.save_for_backward(x, *weights, *hidden, *auxes)


def _saved(ctx):
    saved = ctx.saved_tensors
    layers = ctx.layers
    x, weights = saved[0], list(saved[1:1 + layers])
    hidden = list(saved[1 + layers:2 * layers])
    auxes = list(saved[2 * layers:])
    return x, weights, hidden, auxes


def _registered_backward(ctx, grads):
    grad = grads[0]
    if grad is None:
        return None, None, None, None, None
    x, weights, hidden, auxes = _saved(ctx)
    needs_x = ctx.needs_input_grad[0]
    result = torch.ops.tessel.mlp_backward(grad, x, weights, ctx.has_bias, hidden, auxes, ctx.activation,
                                           ctx.activate_last, needs_x)
    layers = ctx.layers
    gx = result[0] if needs_x else None
    gws = list(result[1:1 + layers])
    gbs = list(result[1 + layers:]) if ctx.has_bias else None
    return gx, gws, gbs, None, None


_mlp.register_autograd(_registered_backward, setup_context=_setup_context)
register_autocast_to_region_dtype(torch.ops.tessel.mlp.default, "mlp")


class _EagerMLP(torch.autograd.Function):
    """tt.mlp's eager autograd: the registered op's implementations without the dispatcher's
    custom-op layers, as tt.linear's eager calls (torch.compile, autocast, modes and transforms
    see the registered op). Inputs: x, the activation, activate_last, the device index, the
    number of layers, then the weights and the biases."""

    @staticmethod
    def forward(ctx, x, activation, activate_last, index, layers, *params):
        weights, biases = list(params[:layers]), list(params[layers:])
        if index >= 0:
            with on_cuda_stream(index):
                outputs = _forward(x, weights, biases, activation, activate_last)
        else:
            outputs = _forward(x, weights, biases, activation, activate_last)
        y, hidden, auxes = _split(outputs, layers)
        ctx.layers, ctx.has_bias, ctx.index = layers, bool(biases), index
        ctx.activation, ctx.activate_last = activation, activate_last
        ctx.save_for_backward(x, *weights, *hidden, *auxes)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weights, hidden, auxes = _saved(ctx)
        needs_x = ctx.needs_input_grad[0]
        args = (grad, x, weights, ctx.has_bias, hidden, auxes, ctx.activation, ctx.activate_last, needs_x)
        if torch.is_grad_enabled():  # create_graph=True: the registered backward op (no double backward)
            result = torch.ops.tessel.mlp_backward(*args)
        elif ctx.index >= 0:
            with on_cuda_stream(ctx.index):
                result = _backward(*args)
        else:
            result = _backward(*args)
        layers = ctx.layers
        gws = result[1:1 + layers]
        gbs = result[1 + layers:] if ctx.has_bias else []
        return (result[0] if needs_x else None, None, None, None, None, *gws, *gbs)


def mlp(x: Tensor, weights: List[Tensor], biases: Optional[List[Tensor]] = None, activation: Optional[str] = "gelu_tanh",
        activate_last: bool = True) -> Tensor:
    """A stack of ``tt.linear`` layers as one op: ``y = act(... act(x @ W0.T + b0) ... @ W(L-1).T + b(L-1))``.

    Args:
        x: ``(..., in_features)``.
        weights: per layer ``(out_features, in_features)``, each layer's in_features the previous
            layer's out_features.
        biases: one ``(out_features,)`` tensor per layer, or None for none.
        activation: None, ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``, after every layer.
        activate_last: False leaves the last layer without activation.

    The same values and gradients as the layers run one by one, with fewer kernels in the
    backward: each layer's activation derivative and bias gradient are fused into the data
    gradient GEMM of the layer above it.
    """
    act = activation_name(activation)
    biases = list(biases) if biases else []
    weights = list(weights)
    if not _is_compiling():
        index = _eager_index([x] + weights + biases)
        if index is not None and not torch.is_autocast_enabled("cuda" if index >= 0 else "cpu"):
            check_mlp(x, weights, biases, same_dtype=True)
            return _EagerMLP.apply(x, act, activate_last, index, len(weights), *weights, *biases)
    check_mlp(x, weights, biases, same_dtype=False)
    return torch.ops.tessel.mlp(x, weights, biases, act, activate_last)[0]
