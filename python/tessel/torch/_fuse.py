"""tessel.torch.fuse: an elementwise function of torch tensors as one fused forward kernel and
one fused backward kernel computing every needed input gradient (a tessel fused kernel of several
outputs), registered as a torch custom op with autograd.

What the backward saves: the inputs its gradient expressions read, and nothing else. The
intermediates (sigmoid(x) in x * sigmoid(x) * y) are recomputed inside the backward kernel from
those inputs: an elementwise kernel is bound by memory traffic, and storing an intermediate would
cost a write in the forward and a read in the backward of a full-size tensor, while recomputing
costs a few arithmetic instructions per element on data the kernel loads anyway. The inputs
themselves are usually alive in the caller's graph, so saving them costs no memory.
"""
from __future__ import annotations

import inspect
import itertools
import math
import re
from typing import List, Optional

import torch
from torch import Tensor

from tessel import _tessel
from tessel import ones as ts_ones
from tessel import sum as ts_sum

from . import _compiled, _graph
from ._interop import check_same_device, on_cuda_stream, on_torch_stream, to_tessel, to_torch

_counter = itertools.count()
_TS_DTYPES = {torch.bool: "bool", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
              torch.int32: "int32", torch.int64: "int64", torch.uint16: "uint16", torch.uint32: "uint32",
              torch.uint64: "uint64", torch.float16: "float16",
              torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
              torch.complex64: "complex64", torch.complex128: "complex128"}


class _Kernel:
    """One expression compiled as a tessel FusedKernel over the inputs it reads."""

    def __init__(self, root):
        self.root = root
        self.reads = _graph.inputs_of(root)
        self.trivial = root.op in ("input", "const")
        if not self.trivial:
            positions = {index: position for position, index in enumerate(self.reads)}
            self.kernel = _tessel.FusedKernel(_graph.to_sym(root, positions), len(self.reads))
        self._dtypes = {}  # input dtypes -> torch's result dtype
        self._casts = {}   # input dtypes -> the tessel dtype to cast the result to ("": none)

    def result_dtype(self, tensors):
        """torch's dtype of the expression on these inputs (evaluated once per dtype tuple on meta tensors)."""
        key = tuple(tensors[i].dtype for i in self.reads)
        dtype = self._dtypes.get(key)
        if dtype is None:
            meta = [None] * (max(self.reads) + 1 if self.reads else 0)
            for i in self.reads:
                meta[i] = torch.empty((), dtype=tensors[i].dtype, device="meta")
            dtype = self._dtypes[key] = _graph.evaluate(self.root, meta).dtype
        return dtype

    def constant(self, like: Tensor) -> Tensor:
        """A constant expression (a folded derivative such as that of x * 0) shaped like `like`."""
        return torch.full_like(like, self.root.value, memory_format=torch.contiguous_format)

    def __call__(self, tensors, like: Tensor) -> Tensor:
        """The expression on real tensors, as a new tensor of torch's shape and dtype; a constant
        expression takes `like`'s shape and dtype."""
        if self.trivial:
            if self.root.op == "const":
                return self.constant(like)
            # a new tensor: custom op outputs may not alias their inputs
            return tensors[self.root.index].clone(memory_format=torch.contiguous_format)
        result = self.kernel([to_tessel(tensors[i]) for i in self.reads])
        key = tuple([tensors[i].dtype for i in self.reads])
        cast = self._casts.get(key)
        if cast is None:
            # torch's promotion differs from NumPy's for integer inputs of float functions
            # (int32 / int32 is float32 in torch, float64 in NumPy): the result takes torch's dtype.
            # Decided once per input dtypes ("" when tessel's dtype is torch's).
            name = _TS_DTYPES.get(self.result_dtype(tensors))
            cast = self._casts[key] = "" if str(result.dtype) == name else name
        if cast:
            result = result.astype(cast)
        return to_torch(result)


class _Backward:
    """The gradients of one (argument count, needs): per input its gradient expression (None when
    not needed), and one tessel kernel computing every gradient that is not trivial (a constant,
    or an input itself) as its outputs. The kernel's outputs all have the full broadcast shape of
    what it reads, the incoming gradient included: the output's shape. Gradients of broadcast
    inputs are reduced to their shapes afterwards (FusedFunction._autograd_backward)."""

    def __init__(self, grads):
        self.grads = grads
        self.outputs = [i for i, g in enumerate(grads) if g is not None and g.op not in ("input", "const")]
        roots = [grads[i] for i in self.outputs]
        self.reads = sorted({j for g in grads if g is not None for j in _graph.inputs_of(g)})
        self.kernel_reads = sorted({j for g in roots for j in _graph.inputs_of(g)})
        self.kernel = None
        if roots:
            positions = {index: position for position, index in enumerate(self.kernel_reads)}
            # One tuple of outputs: the subexpressions the gradients share (the forward's
            # intermediates) are computed once per element.
            syms = _graph.to_syms(roots, positions)
            self.kernel = _tessel.FusedKernel(tuple(syms), len(self.kernel_reads))
        # Where run's tensors (those of self.reads, in order) hold what the kernel reads
        self.kernel_positions = [self.reads.index(j) for j in self.kernel_reads]
        self._dtypes = {}  # input dtypes -> torch's dtype of each kernel output
        self._casts = {}   # input dtypes -> per output the tessel dtype to cast to (None: none), or ()
        self.only_kernel = self.outputs == [i for i, g in enumerate(grads) if g is not None]

    def result_dtypes(self, key):
        """torch's dtype of each kernel output, for the dtypes `key` of what the kernel reads
        (evaluated once per key on meta tensors)."""
        dtypes = self._dtypes.get(key)
        if dtypes is None:
            meta = [None] * (max(self.kernel_reads) + 1)
            for i, dtype in zip(self.kernel_reads, key):
                meta[i] = torch.empty((), dtype=dtype, device="meta")
            dtypes = self._dtypes[key] = [_graph.evaluate(self.grads[i], meta).dtype for i in self.outputs]
        return dtypes

    def full_shape(self, tensors):
        return torch.broadcast_shapes(*[tensors[i].shape for i in self.kernel_reads])

    def __call__(self, tensors, like: Tensor):
        """run on the tensors of every input and then the incoming gradient (None where not read)."""
        return self.run([tensors[i] for i in self.reads], like)

    def run(self, tensors, like: Tensor):
        """The needed gradients, in input order, as new tensors (constants shaped like `like`), from
        `tensors`: those of self.reads, in order (the saved inputs, then the incoming gradient)."""
        results = {}
        if self.kernel is not None:
            outs = self.kernel([to_tessel(tensors[p]) for p in self.kernel_positions])
            key = tuple([tensors[p].dtype for p in self.kernel_positions])
            casts = self._casts.get(key)
            if casts is None:  # torch's promotion where it differs from NumPy's, decided once per dtypes
                casts = [None if str(out.dtype) == _TS_DTYPES.get(dtype) else _TS_DTYPES[dtype]
                         for out, dtype in zip(outs, self.result_dtypes(key))]
                casts = self._casts[key] = casts if any(casts) else ()
            if not casts and self.only_kernel:
                return [to_torch(out) for out in outs]  # every gradient is an output of the kernel
            for j, (i, out) in enumerate(zip(self.outputs, outs)):
                if casts and casts[j] is not None:
                    out = out.astype(casts[j])
                results[i] = to_torch(out)
        grads = []
        for i, g in enumerate(self.grads):
            if g is None:
                continue
            if i in results:
                grads.append(results[i])
            elif g.op == "const":
                grads.append(torch.full_like(like, g.value, memory_format=torch.contiguous_format))
            else:  # a new tensor: custom op outputs may not alias their inputs
                grads.append(tensors[self.reads.index(g.index)].clone(memory_format=torch.contiguous_format))
        return grads

    def fake(self, tensors, like: Tensor):
        """What __call__ returns, as empty tensors of the same shapes and dtypes."""
        if self.kernel is not None:
            key = tuple([tensors[i].dtype for i in self.kernel_reads])
            dtypes = dict(zip(self.outputs, self.result_dtypes(key)))
        else:
            dtypes = {}
        grads = []
        for i, g in enumerate(self.grads):
            if g is None:
                continue
            if i in dtypes:
                grads.append(torch.empty(self.full_shape(tensors), dtype=dtypes[i], device=like.device))
            elif g.op == "const":
                grads.append(torch.full_like(like, g.value, memory_format=torch.contiguous_format))
            else:
                grads.append(torch.empty_like(tensors[g.index], memory_format=torch.contiguous_format))
        return grads


class _GradInfo:
    """What the autograd of one (argument count, needs) decides once: which inputs to save, which
    gradients are the incoming gradient itself (x in x + y: no kernel), and the plan computing the
    others."""
    __slots__ = ("count", "needs", "read", "needed", "passthrough", "op_needs", "op_plan")

    def __init__(self, fused, count, needs):
        self.count, self.needs = count, needs
        plan = fused._backward_plan(count, needs)  # NotDifferentiableError here, at the forward
        self.read = [i for i in plan.reads if i < count]
        self.needed = [i for i in range(count) if needs[i]]
        self.passthrough = [g is not None and g.op == "input" and g.index == count for g in plan.grads]
        self.op_needs = tuple([n and not p for n, p in zip(needs, self.passthrough)])
        self.op_plan = fused._backward_plan(count, self.op_needs) if any(self.op_needs) else None
        # The saved tensors then the incoming gradient are what op_plan.run takes: the gradients
        # left out of op_plan (the incoming gradient itself) read no input.
        assert self.op_plan is None or [i for i in self.op_plan.reads if i < count] == self.read


def _fixed_arity(fn):
    """The number of positional parameters of fn when that is all it takes (else None)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or any(p.kind not in positional or p.default is not inspect.Parameter.empty for p in params):
        return None
    return len(params)


def _name(fn) -> str:
    base = re.sub(r"\W", "_", getattr(fn, "__name__", "fn"))
    return f"{base}_{next(_counter)}"


class FusedFunction:
    """The result of :func:`fuse`: call it with torch tensors."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "fused")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._graphs = {}     # argument count -> root Node
        self._kernels = {}    # argument count -> forward _Kernel
        self._backward = {}   # (argument count, needs) -> _Backward
        self._infos = {}      # (argument count, needs) -> _GradInfo
        self._plans = {}      # (dtype, requires_grad) per argument -> the compiled op's plan id, or None
        name = _name(fn)
        self.op_name = f"tessel_fuse::{name}"
        # A function of a fixed number of tensors gets an op with that many Tensor arguments: torch's
        # autograd wrapper of a custom op flattens list arguments with pytree on every call, which
        # about doubles its per-call cost (measured on the CPU: 143 against 72 us forward+backward).
        # A function of *args takes a Tensor[] instead.
        self.arity = _fixed_arity(fn)
        if self.arity is not None:
            names = [f"x{i}" for i in range(self.arity)]
            schema = "(" + ", ".join(f"Tensor {n}" for n in names) + ") -> Tensor"
            backward_schema = "(Tensor grad, " + ", ".join(f"Tensor? {n}" for n in names) + ", bool[] needs) -> Tensor[]"
            forward_impl = lambda *xs: self._forward_impl(list(xs))  # noqa: E731
            forward_fake = lambda *xs: self._forward_fake(list(xs))  # noqa: E731
            backward_impl = lambda grad, *rest: self._backward_impl(grad, list(rest[:-1]), rest[-1])  # noqa: E731
            backward_fake = lambda grad, *rest: self._backward_fake(grad, list(rest[:-1]), rest[-1])  # noqa: E731
        else:
            schema = "(Tensor[] inputs) -> Tensor"
            backward_schema = "(Tensor grad, Tensor?[] inputs, bool[] needs) -> Tensor[]"
            forward_impl, forward_fake = self._forward_impl, self._forward_fake
            backward_impl, backward_fake = self._backward_impl, self._backward_fake
        self._op = torch.library.custom_op(self.op_name, forward_impl, mutates_args=(), schema=schema)
        self._op.register_fake(forward_fake)
        self._backward_op = torch.library.custom_op(f"tessel_fuse::{name}_backward", backward_impl,
                                                    mutates_args=(), schema=backward_schema)
        self._backward_op.register_fake(backward_fake)
        self._op.register_autograd(self._autograd_backward, setup_context=self._setup_context)
        self._call = getattr(torch.ops.tessel_fuse, name).default  # the OpOverload: one Python call less per use
        self._call_backward = getattr(torch.ops.tessel_fuse, f"{name}_backward").default
        self._label = f"tessel.torch.fuse({self.__name__})"

    # ---- tracing ----
    def graph(self, count: int):
        root = self._graphs.get(count)
        if root is None:
            tracers = [_graph.Tracer(_graph.inp(i), self.__name__) for i in range(count)]
            result = self.fn(*tracers)
            if not isinstance(result, _graph.Tracer):
                raise _graph.TraceError(f"tessel.torch.fuse({self.__name__}): the function must return one tensor "
                                        f"computed from its arguments, got {type(result).__name__}")
            if result.node.op == "const":
                raise _graph.TraceError(f"tessel.torch.fuse({self.__name__}): the result does not depend on the arguments")
            root = self._graphs[count] = result.node
        return root

    def _forward_kernel(self, count):
        kernel = self._kernels.get(count)
        if kernel is None:
            kernel = self._kernels[count] = _Kernel(self.graph(count))
        return kernel

    def _backward_plan(self, count, needs) -> _Backward:
        key = (count, tuple(needs))
        plan = self._backward.get(key)
        if plan is None:
            grads = _graph.gradients(self.graph(count), count, needs, self.__name__)
            plan = self._backward[key] = _Backward(grads)
        return plan

    # ---- the ops ----
    def _check(self, inputs):
        check_same_device(f"tessel.torch.fuse({self.__name__})", inputs, [f"input {i}" for i in range(len(inputs))])
        self._check_dtypes(inputs)

    def _check_dtypes(self, inputs):
        """TypeError naming the op and the first input of a dtype tessel has no kernels for."""
        for i, t in enumerate(inputs):
            if t is not None and t.dtype not in _TS_DTYPES:
                raise TypeError(f"{self._label}: input {i} is {t.dtype}, which tessel does not support (supported: "
                                f"{', '.join(str(d) for d in _TS_DTYPES)})")

    def _forward_impl(self, inputs: List[Tensor]) -> Tensor:
        self._check(inputs)
        try:
            with on_torch_stream(inputs[0].device):
                return self._forward_kernel(len(inputs))(inputs, like=inputs[0])
        except (TypeError, ValueError) as e:
            raise self._named(e) from None

    def _named(self, e):
        """e (a tessel error: shapes that do not broadcast, a dtype) with this function's name first."""
        return e if str(e).startswith(self._label) else type(e)(f"{self._label}: {e}")

    def _forward_fake(self, inputs):
        self._check(inputs)
        kernel = self._forward_kernel(len(inputs))  # traces, so that a function that cannot be fused fails here too
        return torch.empty_like(_graph.evaluate(kernel.root, inputs), memory_format=torch.contiguous_format)

    def _backward_impl(self, grad: Tensor, inputs: List[Optional[Tensor]], needs: List[bool]) -> List[Tensor]:
        tensors = list(inputs) + [grad]
        with on_torch_stream(grad.device):
            return self._backward_plan(len(inputs), needs)(tensors, like=grad)

    def _backward_fake(self, grad, inputs, needs):
        return self._backward_plan(len(inputs), needs).fake(list(inputs) + [grad], like=grad)

    # ---- autograd ----
    def _setup_context(self, ctx, inputs, output):
        self._save(ctx, inputs if self.arity is not None else inputs[0])

    def _save(self, ctx, tensors):
        """What the registered op's backward needs: the inputs its gradients read, and the shapes and
        dtypes of those that need a gradient (to sum a broadcast gradient and cast it back)."""
        info = self._grad_info(len(tensors), [t.requires_grad and t.is_floating_point() for t in tensors])
        ctx.info = info
        ctx.shapes = [tensors[i].shape for i in info.needed]
        ctx.dtypes = [tensors[i].dtype for i in info.needed]
        ctx.save_for_backward(*[tensors[i] for i in info.read])

    def _grad_info(self, count, needs) -> "_GradInfo":
        needs = tuple(needs)
        info = self._infos.get(needs)
        if info is None:
            info = self._infos[needs] = _GradInfo(self, count, needs)
        return info

    def _autograd_backward(self, ctx, grad):
        # ctx.needs_input_grad is what the forward saw (requires_grad), as ctx.info.needs is
        info = ctx.info
        grads = self._call_backward_op(grad, ctx.saved_tensors, info) if info.op_plan is not None else ()
        return self._grads(self._input_grads(info, grads, ctx.shapes, ctx.dtypes, grad))

    def _call_backward_op(self, grad, saved, info):
        """The backward kernels through the registered backward op (torch.compile's path), on the
        saved tensors (those of info.read)."""
        inputs = [None] * info.count
        for i, t in zip(info.read, saved):
            inputs[i] = t
        if self.arity is not None:
            return self._call_backward(grad, *inputs, list(info.op_needs))
        return self._call_backward(grad, inputs, list(info.op_needs))

    @staticmethod
    def _input_grads(info, grads, shapes, dtypes, grad):
        """One gradient (or None) per input: the incoming gradient where it is the gradient, else
        the next of `grads` (info.op_plan's), summed to the input's shape and cast to its dtype.
        `shapes` and `dtypes`: those of the inputs of info.needed."""
        result = [None] * info.count
        grads = iter(grads)
        for i, shape, dtype in zip(info.needed, shapes, dtypes):
            g = grad if info.passthrough[i] else next(grads)
            if g.shape != shape:
                g = g.sum_to_size(shape)  # broadcast inputs: the gradient sums over their copies
            if g.dtype != dtype:
                g = g.to(dtype)
            result[i] = g
        return result

    def _grads(self, grads):
        """The backward's return value: one per argument, or one list for a Tensor[] op."""
        return tuple(grads) if self.arity is not None else (grads,)

    # ---- eager: the compiled op (_compiled) ----
    def _compiled_plan(self, xs):
        """The compiled op's plan for these arguments' dtypes and requires_grad: its id, or None
        where the registered op runs them (no compiled op, or gradients that are constants or
        inputs' copies). Decided and registered once per key."""
        key = tuple([(t.dtype, t.requires_grad) for t in xs])
        plan = self._plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            self._check_dtypes(xs)
            # _grad_info raises NotDifferentiableError here, before any work
            info = self._grad_info(len(xs), [t.requires_grad and t.is_floating_point() for t in xs])
            plan = self._plans[key] = self._add_plan(xs, info) if _compiled.add_plan is not None else None
        return plan

    def _add_plan(self, xs, info):
        forward = self._forward_kernel(len(xs))
        if forward.trivial:
            return None
        result_dtype = forward.result_dtype(xs)
        return self._register_plan(xs, info, forward.kernel, forward.reads, result_dtype, 0, result_dtype,
                                   result_dtype, [t.dtype for t in xs] + [result_dtype])

    def _register_plan(self, xs, info, kernel, reads, result_dtype, reduction, accumulate, function_dtype,
                       operand_dtypes):
        """add_plan of _compiled: `operand_dtypes` are those of the backward kernel's operands (the
        inputs, then the incoming gradient or a reduction's hi and lo)."""
        plan = info.op_plan
        if plan is not None and not plan.only_kernel:
            return None
        if plan is not None:
            backward, backward_reads = plan.kernel._address, plan.kernel_reads
            gradient_dtypes = plan.result_dtypes(tuple([operand_dtypes[i] for i in plan.kernel_reads]))
        else:
            backward, backward_reads, gradient_dtypes = 0, [], []
        source, output = [], 0
        for i in info.needed:  # the incoming gradient itself (-1), or the next of the kernel's outputs
            source.append(-1 if info.passthrough[i] else output)
            output += 0 if info.passthrough[i] else 1
        names = lambda dtypes: [str(d) for d in dtypes]  # noqa: E731
        return _compiled.add_plan(self._label, kernel._address, list(reads), str(result_dtype), reduction, str(accumulate),
                                  str(function_dtype), backward, list(info.read), list(backward_reads), list(info.needed),
                                  source, names(gradient_dtypes), names([xs[i].dtype for i in info.needed]), len(xs))

    def __call__(self, *args):
        if (len(args) == self.arity or self.arity is None and args) and not _is_compiling():
            index = _eager_index(args)
            if index is not None:
                # Eager: the op's implementation called directly when no tensor needs grad; with
                # grad, the compiled op (the same kernels, forward and backward called from C++).
                # The registered op, which torch.compile traces, runs what neither takes.
                if _grad_enabled() and _needs_grad(args):
                    plan = self._compiled_plan(args)
                    if plan is not None:
                        return _compiled.fuse(plan, args)
                else:
                    kernel = self._forward_kernel(len(args))
                    try:
                        if index < 0:
                            return kernel(args, args[0])
                        with on_cuda_stream(index):
                            return kernel(args, args[0])
                    except (TypeError, ValueError, BufferError) as e:
                        self._check_dtypes(args)  # the error names the input when a dtype is the cause
                        raise self._named(e) from None
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                raise TypeError(f"tessel.torch.fuse({self.__name__}): argument {i} must be a torch.Tensor, got "
                                f"{type(a).__name__} (Python constants go inside the function)")
        if self.arity is not None:
            if len(args) != self.arity:
                raise TypeError(f"tessel.torch.fuse({self.__name__}): takes {self.arity} tensors, got {len(args)}")
        elif not args:
            raise TypeError(f"tessel.torch.fuse({self.__name__}): needs at least one tensor argument")
        # torch.compile (and modes, subclasses, transforms, other devices): the registered op.
        return self._call(*args) if self.arity is not None else self._call(list(args))

    def source(self, *args):
        """The generated CUDA source of the forward kernel for these tensors' dtypes."""
        kernel = self._forward_kernel(len(args))
        return kernel.kernel.source([_TS_DTYPES[args[i].dtype] for i in kernel.reads])


_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_functorch = torch._C._are_functorch_transforms_active
_tracing_state = torch._C._get_tracing_state
_PLAIN = (Tensor, torch.nn.Parameter)


def _eager_index(args):
    """Where an eager call may skip the dispatcher: -1 when `args` are plain tensors (no subclass)
    on the CPU, the device index when they are on one CUDA device, and None otherwise, or when a
    torch dispatch or function mode, functorch transform or TorchScript trace is active (those see
    the registered op). Tensor.is_cpu, is_cuda and get_device() rather than Tensor.device: about
    0.04 us each where Tensor.device and torch.device.type cost 0.06 and 0.22 us (CPU measurement)."""
    if _dispatch_modes() or _function_mode() or _functorch() or _tracing_state() is not None:
        return None
    first = args[0]
    if type(first) not in _PLAIN:
        return None
    if first.is_cpu:
        for a in args:
            if type(a) not in _PLAIN or not a.is_cpu:
                return None
        return -1
    if first.is_cuda:
        index = first.get_device()
        for a in args:
            if type(a) not in _PLAIN or not a.is_cuda or a.get_device() != index:
                return None
        return index
    return None


def _needs_grad(args):
    for a in args:
        if a.requires_grad:
            return True
    return False


_UNPLANNED = object()


class FusedReduction(FusedFunction):
    """The result of :func:`fuse` with a reduction: ``fn(*tensors).sum()`` or ``.mean()`` (with
    ``dtype=``, as torch.sum's: the accumulation and result dtype) as one fused elementwise kernel
    and one reduction forward, and one fused kernel backward. The values are summed as the kernel
    computes them (in float for half inputs), not rounded to the function's dtype first.

    The backward's incoming gradient is a scalar: it reaches the gradient kernel as a uniform
    operand, never expanded in memory. It is passed as two numbers of the function's result dtype,
    hi + lo * 2^-11 = grad (/ N for the mean), which the kernel adds in float: the gradient is then
    written in the inputs' dtype by the kernel itself (a float32 scalar would promote a bfloat16
    gradient to float32 and need a second pass to cast it back), without rounding the scalar to
    bfloat16 (up to 2^-8 relative, the same bias in every element). lo is scaled up so that it
    stays a normal number in float16 where hi is one."""

    def __init__(self, fn, reduction, dtype):
        self.reduction, self.dtype = reduction, dtype
        self._reduced_dtypes = {}  # input dtypes -> (elementwise result dtype, reduced result dtype)
        self._summands = {}  # argument count -> (FusedKernel of fn * one, the inputs it reads)
        self._ones = {}  # (tessel device, torch dtype) -> 0-d tessel array of 1
        super().__init__(fn)
        self._label = f"tessel.torch.fuse({self.__name__}, reduction={reduction!r})"

    def _backward_plan(self, count, needs) -> _Backward:
        key = (count, tuple(needs))
        plan = self._backward.get(key)
        if plan is None:
            seed = _graph.add(_graph.inp(count), _graph.mul(_graph.inp(count + 1), _graph.const(_LO_SCALE)))
            grads = _graph.gradients(self.graph(count), count, needs, self.__name__, seed=seed)
            plan = self._backward[key] = _Backward(grads)
        return plan

    def _dtypes(self, inputs):
        """torch's dtypes of fn(*inputs) and of its reduction (evaluated once per input dtypes on
        meta tensors): the reduction's errors are torch's (mean of integers), naming the op."""
        key = tuple([t.dtype for t in inputs])
        dtypes = self._reduced_dtypes.get(key)
        if dtypes is None:
            meta = [torch.empty((), dtype=t.dtype, device="meta") for t in inputs]
            value = _graph.evaluate(self._forward_kernel(len(inputs)).root, meta)
            try:
                reduced = value.sum(dtype=self.dtype) if self.reduction == "sum" else value.mean(dtype=self.dtype)
            except RuntimeError as e:
                raise TypeError(f"{self._label}: {e}") from None
            dtypes = self._reduced_dtypes[key] = (value.dtype, reduced.dtype)
        return dtypes

    def _summand(self, count):
        """fn's graph times one more input, a 0-d array of the accumulation dtype: the fused kernel
        then writes its values in that dtype (computed in float for half inputs, not rounded to
        half first), and the sum reads them as they are, with no cast pass in between."""
        kernel = self._summands.get(count)
        if kernel is None:
            root = self.graph(count)
            reads = _graph.inputs_of(root)
            positions = {index: position for position, index in enumerate(reads)}
            positions[count] = len(reads)
            summand = _graph.mul(root, _graph.inp(count))
            kernel = self._summands[count] = (_tessel.FusedKernel(_graph.to_sym(summand, positions), len(reads) + 1), reads)
        return kernel

    def _one(self, device, dtype):
        key = (str(device), dtype)
        one = self._ones.get(key)
        if one is None:
            one = self._ones[key] = ts_ones((), dtype=_TS_DTYPES[dtype], device=device)
        return one

    def _forward_impl(self, inputs: List[Tensor]) -> Tensor:
        self._check(inputs)
        _, result_dtype = self._dtypes(inputs)
        # Half results are summed in float32, as torch sums them.
        accumulate = torch.float32 if result_dtype in (torch.float16, torch.bfloat16) else result_dtype
        kernel, reads = self._summand(len(inputs))
        if not inputs[0].is_cuda:
            # The CPU backend evaluates op by op in the operands' dtype: half operands are widened
            # first, so that the values are computed in float as on CUDA.
            inputs = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in inputs]
        try:
            with on_torch_stream(inputs[0].device):
                arrays = [to_tessel(inputs[i]) for i in reads]
                values = kernel(arrays + [self._one(arrays[0].device, accumulate)])
        except (TypeError, ValueError) as e:
            raise self._named(e) from None
        with on_torch_stream(inputs[0].device):
            total = to_torch(ts_sum(values, dtype=_TS_DTYPES[accumulate]))
        if self.reduction == "mean":
            total = total / values.size
        return total.to(result_dtype)

    def _forward_fake(self, inputs):
        self._check(inputs)
        return torch.empty((), dtype=self._dtypes(inputs)[1], device=inputs[0].device)

    def _backward_impl(self, grad: Tensor, inputs: List[Optional[Tensor]], needs: List[bool]) -> List[Tensor]:
        # grad: (2, *shape), hi and lo broadcast over the function's shape (stride 0)
        hi, lo = grad[0], grad[1]
        plan = self._backward_plan(len(inputs), needs)
        if hi.is_cuda:
            with on_torch_stream(hi.device):
                return plan(list(inputs) + [hi, lo], like=hi)
        if hi.dtype in (torch.float16, torch.bfloat16):
            # The CPU backend evaluates op by op in the operands' dtype: half operands are widened
            # to float32 (hi + lo exactly), and the caller rounds each gradient once.
            wide = [None if t is None else t.float() if t.dtype == hi.dtype else t for t in inputs]
            total = hi.float() + lo.float() * _LO_SCALE
            return plan(wide + [total, torch.zeros_like(total)], like=total)
        return plan(list(inputs) + [hi, lo], like=hi)

    def _backward_fake(self, grad, inputs, needs):
        return self._backward_plan(len(inputs), needs).fake(list(inputs) + [grad[0], grad[1]], like=grad[0])

    def _save_reduction(self, ctx, tensors):
        self._save(ctx, tensors)
        ctx.shape = torch.broadcast_shapes(*[t.shape for t in tensors])
        ctx.function_dtype = self._dtypes(tensors)[0]

    def _setup_context(self, ctx, inputs, output):
        self._save_reduction(ctx, inputs if self.arity is not None else inputs[0])

    def _scalar_pair(self, ctx, grad):
        """The incoming 0-d gradient (/ N for the mean) as hi and lo of the function's dtype,
        broadcast over its shape: (2, *shape), every stride of the shape 0."""
        shape = ctx.shape
        if self.reduction == "mean":
            grad = grad / math.prod(shape)
        low = ctx.function_dtype if ctx.function_dtype.is_floating_point else grad.dtype
        hi = grad.to(low)
        lo = ((grad - hi.to(grad.dtype)) / _LO_SCALE).to(low)
        return torch.stack([hi, lo]).reshape((2,) + (1,) * len(shape)).expand((2,) + tuple(shape))

    def _autograd_backward(self, ctx, grad):
        info = ctx.info
        if info.op_plan is None:
            return self._grads([None] * info.count)
        grads = self._call_backward_op(self._scalar_pair(ctx, grad), ctx.saved_tensors, info)
        return self._grads(self._input_grads(info, grads, ctx.shapes, ctx.dtypes, None))

    # ---- eager: the compiled op, as FusedFunction's ----
    def _add_plan(self, xs, info):
        function_dtype, result_dtype = self._dtypes(xs)
        accumulate = torch.float32 if result_dtype in (torch.float16, torch.bfloat16) else result_dtype
        kernel, reads = self._summand(len(xs))
        # hi and lo: the function's dtype (_scalar_pair), or the gradient's (the result's) for
        # functions of integer results
        low = function_dtype if function_dtype.is_floating_point else result_dtype
        reduction = 1 if self.reduction == "sum" else 2
        return self._register_plan(xs, info, kernel, reads, result_dtype, reduction, accumulate, function_dtype,
                                   [t.dtype for t in xs] + [low, low])

    def __call__(self, *args):
        if (len(args) == self.arity or self.arity is None and args) and not _is_compiling() \
                and _eager_index(args) is not None:
            if not (_grad_enabled() and _needs_grad(args)):
                return self._forward_impl(list(args))
            plan = self._compiled_plan(args)
            if plan is not None:
                return _compiled.fuse(plan, args)
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                raise TypeError(f"{self._label}: argument {i} must be a torch.Tensor, got {type(a).__name__} "
                                "(Python constants go inside the function)")
        if self.arity is not None:
            if len(args) != self.arity:
                raise TypeError(f"{self._label}: takes {self.arity} tensors, got {len(args)}")
            return self._call(*args)
        if not args:
            raise TypeError(f"{self._label}: needs at least one tensor argument")
        return self._call(list(args))


_REDUCTIONS = (None, "sum", "mean")
_LO_SCALE = 2.0 ** -11  # FusedReduction's hi + lo * _LO_SCALE: float16's 11 significant bits


def fuse(fn=None, *, reduction: Optional[str] = None, dtype: Optional[torch.dtype] = None):
    """Decorator: an elementwise function of torch tensors becomes one fused tessel kernel forward
    and one fused kernel backward computing every needed input gradient (derived symbolically),
    registered as a torch custom op (``torch.compile`` sees one op).

    The function may use the operators, torch's elementwise functions and Tensor methods
    (``torch.exp``, ``torch.sigmoid``, ``torch.where``, ``torch.clamp``, ``F.gelu``, ``x.tanh()``,
    ...) and Python numbers; anything else (reductions, indexing, shape changes, casts) is a
    TypeError naming it when the function is first called. Inputs broadcast as torch's do.

    ``reduction="sum"`` or ``"mean"`` reduces the function's result to a 0-d tensor, as
    ``fn(...).sum(dtype=dtype)`` or ``.mean(dtype=dtype)`` would (a loss); ``dtype`` is then the
    dtype the reduction accumulates in and returns, as torch.sum's. The backward is one fused
    kernel over the inputs, the scalar gradient read as a constant operand.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"tessel.torch.fuse: reduction must be None, 'sum' or 'mean', got {reduction!r}")
    if dtype is not None:
        if reduction is None:
            raise ValueError("tessel.torch.fuse: dtype= is the reduction's dtype; it needs reduction='sum' or 'mean'")
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"tessel.torch.fuse: dtype must be a torch.dtype, got {type(dtype).__name__}")

    def wrap(f):
        return FusedFunction(f) if reduction is None else FusedReduction(f, reduction, dtype)
    return wrap if fn is None else wrap(fn)
