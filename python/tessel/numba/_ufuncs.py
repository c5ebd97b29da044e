"""``numba.vectorize`` and ``numba.guvectorize`` over tessel kernels.

The user's function becomes a tessel device function, called by a generic grid-stride kernel
(``cuda._templates``): ``out[i] = f(x0[i], ...)`` for ufuncs, ``f(a0[i], ...)`` over the loop axis
for gufuncs. The host side does what NumPy's ufunc machinery does: picks the signature, casts the
inputs to its types, broadcasts, allocates the outputs (or takes ``out=``), and flattens the
loop axes so that one kernel serves every shape.

``target="cuda"`` runs on the selected device (a GPU, else the CPU backend) with Numba's CUDA
ufunc rules: array inputs must have a signature's exact dtypes (scalars are converted), device
array inputs give device array results, host inputs host results, and ``stream=`` orders the
work. ``target="cpu"`` and ``"parallel"`` run on tessel's CPU backend with NumPy's rules (inputs
cast safely to the first signature that accepts them) and return NumPy arrays.
"""
from __future__ import annotations

import functools
import math
import re

import numpy as np

import tessel as ts
from tessel.kernel._types import python_scalar_dtype

from . import types as nbtypes

__all__ = ["vectorize", "guvectorize", "UFunc", "GUFunc"]

_TARGETS = ("cpu", "parallel", "cuda")
_OPTIONS = {"target", "identity", "nopython", "forceobj", "cache", "fastmath", "nogil", "boundscheck",
            "error_model", "locals", "writable_args", "is_dynamic"}


def _cuda():
    from . import cuda

    return cuda


def _check_options(kws, what):
    unknown = sorted(k for k in kws if k not in _OPTIONS)
    if unknown:
        raise TypeError(f"tessel.numba.{what}: unknown option(s) {', '.join(unknown)}")
    target = kws.get("target", "cpu")
    if target not in _TARGETS:
        raise ValueError(f"tessel.numba.{what}: target must be one of {', '.join(_TARGETS)}; got {target!r}")
    return target


def _signature_list(sigs):
    if isinstance(sigs, (str, nbtypes.Signature)):
        sigs = [sigs]
    result = []
    for sig in sigs:
        restype, argtypes = nbtypes.parse_signature(sig)
        result.append((restype, tuple(argtypes)))
    return result


def _dtype_of_type(t):
    if isinstance(t, nbtypes.Array):
        return t.dtype.dtype
    if isinstance(t, nbtypes.Number):
        return t.dtype
    raise TypeError(f"tessel.numba: {t} is not a number or array type")


# ---- arguments -----------------------------------------------------------------------------------
class _Arg:
    """One input: kind "device" (a device or tessel array), "host" (NumPy/array-like) or "scalar"."""

    __slots__ = ("value", "kind", "dtype", "shape", "weak")

    def __init__(self, value, device_kinds):
        self.value = value
        self.weak = False
        d = python_scalar_dtype(value)
        if d is not None:
            self.kind, self.dtype, self.shape, self.weak = "scalar", np.dtype(d), (), True
            return
        if isinstance(value, np.generic):
            self.kind, self.dtype, self.shape = "scalar", value.dtype, ()
            return
        inner = _storage(value)
        if device_kinds and inner is not None:
            self.kind, self.dtype, self.shape = "device", np.dtype(str(inner.dtype)), tuple(inner.shape)
            self.value = inner
            return
        host = np.asarray(value)
        self.kind, self.dtype, self.shape = "host", host.dtype, host.shape
        self.value = host
        if host.ndim == 0:
            self.kind = "scalar"


def _storage(value):
    inner = getattr(value, "__tessel_array__", None)
    if inner is not None:
        return inner
    if isinstance(value, ts.Array):
        return value
    if hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray):
        return ts.asarray(value)
    return None


def _can_take(arg, formal, exact):
    """Whether an input can go to a parameter of dtype ``formal``."""
    if arg.kind == "scalar" and arg.weak:
        order = "biufc"
        src = arg.dtype.kind
        if formal.kind == "u" and src in "bi":
            return not exact or arg.value >= 0 or isinstance(arg.value, bool)
        return order.index(src if src != "u" else "i") <= order.index(formal.kind if formal.kind != "u" else "i")
    if exact and arg.kind != "scalar":
        return arg.dtype == formal
    return np.can_cast(arg.dtype, formal, "same_kind" if arg.kind == "scalar" else "safe")


def _resolve(signatures, args, exact, what):
    """(restype, argtypes) of the signature these inputs take (Numba's CUDA rule with ``exact``:
    arrays of the exact dtypes, scalars converted, ambiguity an error; else NumPy's: the first
    signature every input casts to safely)."""
    candidates = [s for s in signatures if len(s[1]) >= len(args)]
    if exact:
        scalar_exact = [s for s in candidates if all(
            _dtype_of_type(t) == a.dtype if a.kind == "scalar" else _can_take(a, _dtype_of_type(t), True)
            for a, t in zip(args, s[1]))]
        if scalar_exact:
            return scalar_exact[0]
        matches = [s for s in candidates if all(_can_take(a, _dtype_of_type(t), True) for a, t in zip(args, s[1]))]
        if len(matches) > 1:
            raise TypeError(f"{what}: failed to resolve the ufunc's signature: too many untyped scalars; use "
                            "NumPy scalars (np.float32(x)) to pick one")
    else:
        exact_matches = [s for s in candidates if all(a.dtype == _dtype_of_type(t) for a, t in zip(args, s[1]))]
        matches = exact_matches or [s for s in candidates
                                    if all(_can_take(a, _dtype_of_type(t), False) for a, t in zip(args, s[1]))]
    if not matches:
        got = ", ".join(str(a.dtype) + (" scalar" if a.kind == "scalar" else " array") for a in args)
        have = "; ".join(f"({', '.join(map(str, s[1]))})" for s in signatures)
        rule = ("CUDA ufuncs need array arguments of the exact types (NumPy's casting='no')" if exact else
                "no signature takes these inputs with safe casting")
        raise TypeError(f"{what}: no matching version for inputs ({got}): {rule}; compiled for {have}")
    return matches[0]


def _infer_return(py_func, dtypes):
    """The result dtype of ``py_func`` for these argument dtypes, from tessel's kernel compiler's
    type inference (for ufuncs made without signatures)."""
    from tessel.kernel import _compiler
    from tessel.kernel._types import NoneT, Scalar

    root = _compiler.Root("cpu", {})
    fc = _compiler.FunctionCompiler(py_func, [Scalar(d.name) for d in dtypes], root, kernel_name=py_func.__name__,
                                    mode="function")
    fc.run_typing()
    rt = fc.unify_returns(fc.return_types, fc, None)
    if isinstance(rt, NoneT) or not isinstance(rt, Scalar):
        raise TypeError(f"tessel.numba.vectorize: '{py_func.__name__}' must return a number, returns {rt}")
    return np.dtype(rt.name)


_NO_VALUE = object()


def _axes(axis, ndim, name):
    """The axes a reduction runs over (NumPy's axis argument: None, an int or a tuple)."""
    axes = tuple(range(ndim)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"ufunc '{name}': axis {a} is out of bounds for array of dimension {ndim}")
        a = int(a) % ndim
        if a in result:
            raise ValueError(f"ufunc '{name}': duplicate value in 'axis'")
        result.append(a)
    return result


def _into(out, result):
    """``result`` written into ``out`` (NumPy's out=), or returned (a 0-d result as a scalar)."""
    if out is None:
        return result[()] if result.ndim == 0 else result
    out = out[0] if isinstance(out, tuple) else out
    np.copyto(out, result, casting="unsafe")
    return out


def _launch_1d(kernel, n, args, stream):
    if n == 0:
        return
    block = 256
    grid = min((n + block - 1) // block, 65535)
    kernel[grid, block, stream](*args)


def _tessel_stream(stream, device):
    if stream is None or stream is False or (type(stream) is int and stream == 0):
        return None
    return _cuda().as_tessel_stream(stream, device)


def _on_stream(stream, device):
    from ._cuda import _streams

    return _streams.on_stream(stream, device)


def _to_tessel(arg, dtype, device, stream):
    """An input as a tessel array of ``dtype`` on ``device`` (host arrays: shared on the CPU)."""
    if arg.kind == "device":
        arr = arg.value
        if arr.device != device:
            arr = arr.to_device(device)
        return arr if np.dtype(str(arr.dtype)) == dtype else arr.astype(dtype.name)
    host = np.asarray(arg.value, dtype=dtype)
    with _on_stream(stream, device):
        return ts.asarray(host, device=device)


def _flat(arr, shape):
    """``arr`` broadcast to ``shape``, as a 1-D array (a view where it can be)."""
    n = math.prod(shape)
    if arr.size == 1:
        return ts.broadcast_to(arr.reshape(()), (n,))
    if tuple(arr.shape) != tuple(shape):
        arr = ts.broadcast_to(arr, shape).copy()
    return arr.reshape(-1)


def _wrap_device(arr):
    from ._cuda.devicearray import DeviceNDArray

    return DeviceNDArray(_array=arr)


class UFunc:
    """A vectorized function (``@vectorize``): called on arrays and numbers with NumPy's
    broadcasting; ``out=`` an output array; ``stream=`` (CUDA target) the stream."""

    def __init__(self, py_func, signatures, target, options):
        self.py_func = py_func
        functools.update_wrapper(self, py_func)
        self._signatures = list(signatures)
        self.target = target
        self._options = options
        self.identity = options.get("identity")
        self._devfn = None
        self._kernel = None
        self._fold_kernel = None
        self._at_kernel = None
        self.nin = len(signatures[0][1]) if signatures else py_func.__code__.co_argcount
        self.nout = 1
        self.nargs = self.nin + 1

    @property
    def types(self):
        """NumPy's type strings of the compiled loops (``"ff->f"``)."""
        return ["".join(_dtype_of_type(t).char for t in args) + "->" + _dtype_of_type(r).char
                for r, args in self._signatures if r is not None]

    @property
    def ntypes(self):
        return len(self._signatures)

    def _device_function(self):
        if self._devfn is None:
            from ._cuda.dispatcher import as_device_function

            self._devfn = as_device_function(self.py_func)
        return self._devfn

    def _symbol_name(self):
        return "".join(ch if ch.isalnum() else "_" for ch in self.__name__)

    def _get_kernel(self):
        if self._kernel is None:
            from ._cuda import _templates

            self._kernel = _templates.vectorize_kernel(self._device_function(), self.nin, self._symbol_name(),
                                                       fastmath=bool(self._options.get("fastmath")))
        return self._kernel

    def __call__(self, *args, out=None, stream=0, **kws):
        if kws:
            raise TypeError(f"{self.__name__}: unexpected keyword argument(s) {', '.join(sorted(kws))}")
        if len(args) == self.nin + 1 and out is None:
            args, out = args[:-1], args[-1]
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: takes {self.nin} input{'s' if self.nin != 1 else ''}, got {len(args)}")
        cuda_target = self.target == "cuda"
        inputs = [_Arg(a, cuda_target) for a in args]
        what = f"ufunc '{self.__name__}'"
        if self._signatures:
            restype, argtypes = _resolve(self._signatures, inputs, cuda_target, what)
            in_dtypes = [_dtype_of_type(t) for t in argtypes]
            out_dtype = _dtype_of_type(restype) if restype is not None else None
        else:
            in_dtypes = [a.dtype for a in inputs]
            out_dtype = None
        if out_dtype is None:
            out_dtype = _infer_return(self.py_func, in_dtypes)
        any_device = any(a.kind == "device" for a in inputs)
        if cuda_target:
            device = next((a.value.device for a in inputs if a.kind == "device"), None) or _cuda().target_device()
        else:
            device = ts.Device("cpu")
        shape = np.broadcast_shapes(*[a.shape for a in inputs])
        if cuda_target and not shape:
            shape = (1,)   # Numba's CUDA ufuncs make numbers 1-element arrays
        tessel_stream = _tessel_stream(stream, device) if cuda_target else None
        flat_inputs = [_flat(_to_tessel(a, d, device, stream), shape) for a, d in zip(inputs, in_dtypes)]
        # the output: a given device array (written in place when it is contiguous), else a new one
        out_inner = _storage(out) if out is not None and (cuda_target or not isinstance(out, np.ndarray)) else None
        host_out = out if out is not None and out_inner is None else None
        if host_out is not None:
            host_out = np.asarray(host_out)
            if host_out.shape != shape:
                raise ValueError(f"{what}: out has shape {host_out.shape}, the result has shape {shape}")
        if out_inner is not None:
            if tuple(out_inner.shape) != shape:
                raise ValueError(f"{what}: out has shape {tuple(out_inner.shape)}, the result has shape {shape}")
            result = out_inner if out_inner.is_contiguous() and np.dtype(str(out_inner.dtype)) == out_dtype else None
        elif host_out is not None and device.type == "cpu" and host_out.flags.c_contiguous and \
                host_out.dtype == out_dtype:
            result = ts.asarray(host_out, device=device)  # the NumPy output's own memory
        else:
            result = None
        if result is None:
            with _on_stream(stream, device):
                result = ts.empty(shape, dtype=out_dtype.name, device=device)
        _launch_1d(self._get_kernel(), math.prod(shape), flat_inputs + [result.reshape(-1)], tessel_stream)
        # hand back
        if out_inner is not None:
            if result is not out_inner:
                with _on_stream(stream, device):
                    out_inner[...] = result.astype(out_inner.dtype) if result.dtype != out_inner.dtype else result
            return out
        if host_out is not None:
            if not (device.type == "cpu" and result.data_ptr == host_out.ctypes.data):
                with _on_stream(stream, device):
                    np.copyto(host_out, result.numpy(), casting="unsafe")
            return out
        if cuda_target and any_device:
            return _wrap_device(result)
        with _on_stream(stream, device):
            host = result.numpy()
        if not shape and not cuda_target:
            return host[()]
        return host

    def reduce(self, array, *args, **kws):
        """``target="cuda"``: Numba's CUDA ufunc ``reduce(arr, stream=0)``, a pairwise reduction of a
        1-D array. CPU targets: NumPy's ``reduce(array, axis=0, dtype=None, out=None,
        keepdims=False, initial=...)``, folding the elements in order."""
        if self.target == "cuda":
            return self._device_reduce(array, *args, **kws)
        return self._host_reduce(array, *args, **kws)

    def _device_reduce(self, arr, stream=0):
        if self.nin != 2:
            raise ValueError(f"reduce only supported for binary functions, '{self.__name__}' takes {self.nin}")
        from ._cuda._reduction import Reduce, _as_tessel

        if getattr(self, "_reducer", None) is None:
            self._reducer = Reduce(self.py_func)
        inner = _as_tessel(arr, stream)
        if inner.ndim != 1:
            raise TypeError("must use 1d array")
        if inner.size == 0:
            raise TypeError("Reduction on an empty array.")
        return self._reducer._run(inner, 0, False, None, stream)

    def _host_reduce(self, array, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
        x = self._host_input(array, "reduce")
        if where is not True:
            raise NotImplementedError(f"tessel.numba: ufunc '{self.__name__}'.reduce(where=...) is not supported")
        if x.ndim == 0:
            x = x.reshape(1)
        axes = _axes(axis, x.ndim, self.__name__)
        in_dt, out_dt = self._fold_types(np.dtype(dtype) if dtype is not None else x.dtype)
        keep = [d for d in range(x.ndim) if d not in axes]
        rest = tuple(x.shape[d] for d in keep)
        n = math.prod(x.shape[d] for d in axes)
        rows = np.ascontiguousarray(np.transpose(x, keep + list(axes)).reshape(math.prod(rest), n), dtype=in_dt)
        if initial is not _NO_VALUE:
            rows = np.concatenate([np.full((rows.shape[0], 1), initial, in_dt), rows], axis=1)
        elif n == 0:
            if self.identity in (None, "reorderable"):
                raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
            rows = np.full((rows.shape[0], 1), self.identity, in_dt)
        result = self._fold(rows, out_dt, False)[:, 0].reshape(rest)
        if keepdims:
            result = np.expand_dims(result, tuple(axes))
        return _into(out, result)

    def accumulate(self, array, axis=0, dtype=None, out=None):
        """NumPy's ``ufunc.accumulate`` (CPU targets): the results of folding the elements along
        ``axis`` in order."""
        x = self._host_input(array, "accumulate")
        if x.ndim == 0:
            raise TypeError("cannot accumulate on a scalar")
        (axis,) = _axes(axis, x.ndim, self.__name__)
        in_dt, out_dt = self._fold_types(np.dtype(dtype) if dtype is not None else x.dtype)
        moved = np.moveaxis(x, axis, -1)
        rows = np.ascontiguousarray(moved.reshape(-1, moved.shape[-1]), dtype=in_dt)
        result = np.moveaxis(self._fold(rows, out_dt, True).reshape(moved.shape), -1, axis)
        return _into(out, result)

    def outer(self, a, b, **kws):
        """NumPy's ``ufunc.outer`` (CPU targets): ``f(a[i, ...], b[j, ...])`` for every pair."""
        self._host_input(a, "outer")
        a, b = np.asarray(a), np.asarray(b)
        return self(a.reshape(a.shape + (1,) * b.ndim), b, **kws)

    def at(self, a, indices, b=None):
        """NumPy's ``ufunc.at`` (CPU targets): ``a[indices] = f(a[indices], b)`` in place, unbuffered
        (an index that repeats is applied again)."""
        self._host_input(a, "at")
        if not isinstance(a, np.ndarray):
            raise TypeError(f"ufunc '{self.__name__}'.at: the first argument must be a NumPy array")
        if (b is None) != (self.nin == 1):
            raise TypeError(f"ufunc '{self.__name__}'.at takes {'no' if self.nin == 1 else 'a'} second operand")
        positions = np.arange(a.size, dtype=np.int64).reshape(a.shape)[indices].reshape(-1)
        work = np.ascontiguousarray(a)
        cpu = ts.Device("cpu")
        args = [ts.asarray(work.reshape(-1), device=cpu), ts.asarray(positions, device=cpu)]
        if b is not None:
            b = np.asarray(b)
            _, argtypes = self._resolve_host([a[:0], b.reshape(-1)[:0]], "at")
            args.append(ts.asarray(np.ascontiguousarray(np.broadcast_to(b, positions.shape),
                                                        dtype=_dtype_of_type(argtypes[1])), device=cpu))
        if self._at_kernel is None:
            from ._cuda import _templates

            self._at_kernel = _templates.at_kernel(self._device_function(), self.nin, self._symbol_name(),
                                                   fastmath=bool(self._options.get("fastmath")))
        self._at_kernel[1, 1](*args)
        if work is not a:
            np.copyto(a, work)

    def reduceat(self, *args, **kws):
        raise NotImplementedError(f"tessel.numba: ufunc '{self.__name__}'.reduceat is not supported (reduce, "
                                  "accumulate, outer and at are)")

    def _host_input(self, array, what):
        if self.target == "cuda":
            raise NotImplementedError(f"tessel.numba: CUDA ufunc '{self.__name__}' has no {what} (Numba's CUDA "
                                      "ufuncs have reduce only; CPU targets have NumPy's methods)")
        if what not in ("at",) and self.nin != 2:
            raise ValueError(f"{what} only supported for binary functions, '{self.__name__}' takes {self.nin}")
        return np.asarray(array)

    def _resolve_host(self, arrays, what):
        inputs = [_Arg(x, False) for x in arrays]
        if self._signatures:
            restype, argtypes = _resolve(self._signatures, inputs, False, f"ufunc '{self.__name__}'.{what}")
            return _dtype_of_type(restype), argtypes
        dtypes = [x.dtype for x in arrays]
        return _infer_return(self.py_func, dtypes), tuple(nbtypes.from_dtype(d) for d in dtypes)

    def _fold_types(self, dtype):
        """(element dtype, result dtype) of folding elements of ``dtype``: the loop for two of them."""
        empty = np.empty(0, dtype)
        out_dt, argtypes = self._resolve_host([empty, empty], "reduce")
        return _dtype_of_type(argtypes[1]), out_dt

    def _fold(self, rows, out_dt, accumulate):
        """Each row of the 2-D NumPy array folded in order (see _templates.fold_kernel)."""
        if self._fold_kernel is None:
            from ._cuda import _templates

            self._fold_kernel = _templates.fold_kernel(self._device_function(), self._symbol_name(),
                                                       fastmath=bool(self._options.get("fastmath")))
        cpu = ts.Device("cpu")
        result = ts.empty(rows.shape if accumulate else (rows.shape[0], 1), dtype=out_dt.name, device=cpu)
        if rows.size:
            _launch_1d(self._fold_kernel, rows.shape[0], [ts.asarray(rows, device=cpu), result, accumulate], None)
        return result.numpy()

    def __repr__(self):
        return f"<tessel.numba {self.target} ufunc '{self.__name__}'>"


# ---- gufuncs -------------------------------------------------------------------------------------
_GROUP = re.compile(r"\(([^()]*)\)")


def _parse_layout(layout):
    """``"(m,n),(n)->(m)"`` -> ([("m", "n"), ("n",)], [("m",)]); a dimension is a name or an int."""
    if not isinstance(layout, str) or "->" not in layout:
        raise ValueError(f"tessel.numba.guvectorize: the layout must look like '(m,n),(n)->(m)', got {layout!r}")
    left, right = layout.replace(" ", "").split("->")

    def groups(side):
        found = _GROUP.findall(side)
        if _GROUP.sub("", side).strip(",") or (side and not found):
            raise ValueError(f"tessel.numba.guvectorize: cannot read the layout {layout!r}")
        result = []
        for g in found:
            dims = tuple(d for d in g.split(",") if d)
            for d in dims:
                if not (d.isidentifier() or d.isdigit()):
                    raise ValueError(f"tessel.numba.guvectorize: bad dimension {d!r} in {layout!r}")
            result.append(tuple(int(d) if d.isdigit() else d for d in dims))
        return result

    ins, outs = groups(left), groups(right)
    if not outs:
        raise ValueError(f"tessel.numba.guvectorize: the layout {layout!r} has no output")
    return ins, outs


class GUFunc:
    """A generalized ufunc (``@guvectorize``): ``g(*inputs)`` returns the output(s);
    ``g(*inputs, *outputs)`` or ``out=`` writes into given ones; ``stream=`` (CUDA target)."""

    def __init__(self, py_func, signatures, layout, target, options):
        self.py_func = py_func
        functools.update_wrapper(self, py_func)
        self._signatures = list(signatures)
        self.layout = layout
        self._ins, self._outs = _parse_layout(layout)
        self.target = target
        self._options = options
        self.nin, self.nout = len(self._ins), len(self._outs)
        self.nargs = self.nin + self.nout
        self.signature = layout
        for restype, argtypes in self._signatures:
            if len(argtypes) != self.nargs:
                raise TypeError(f"guvectorize '{py_func.__name__}': a signature has {len(argtypes)} arguments, the "
                                f"layout {layout!r} {self.nargs}")
        self._kernel = None

    def _get_kernel(self):
        if self._kernel is None:
            from ._cuda import _templates
            from ._cuda.dispatcher import as_device_function

            name = "".join(ch if ch.isalnum() else "_" for ch in self.__name__)
            self._kernel = _templates.guvectorize_kernel(as_device_function(self.py_func), self.nargs, name,
                                                         fastmath=bool(self._options.get("fastmath")))
        return self._kernel

    def __call__(self, *args, out=None, stream=0, **kws):
        if kws:
            raise TypeError(f"{self.__name__}: unexpected keyword argument(s) {', '.join(sorted(kws))}")
        what = f"gufunc '{self.__name__}'"
        outputs = None
        if len(args) == self.nargs:
            args, outputs = args[:self.nin], list(args[self.nin:])
        elif len(args) != self.nin:
            raise TypeError(f"{what}: takes {self.nin} inputs (and optionally {self.nout} outputs), got {len(args)}")
        if out is not None:
            if outputs is not None:   # Numba's CUDA gufuncs raise ValueError, NumPy's gufuncs TypeError
                raise (ValueError if self.target == "cuda" else TypeError)(
                    f"{what}: cannot specify argument 'out' as both positional and keyword")
            outputs = list(out) if isinstance(out, tuple) else [out]
            if len(outputs) != self.nout:
                raise TypeError(f"{what}: out= needs {self.nout} arrays")
        cuda_target = self.target == "cuda"
        inputs = [_Arg(a, cuda_target) for a in args]
        out_args = [_Arg(o, True) for o in outputs] if outputs is not None else None
        if self._signatures:
            _, argtypes = _resolve(self._signatures, inputs, cuda_target, what)
        elif out_args is not None:
            argtypes = tuple(nbtypes.from_dtype(a.dtype) for a in inputs + out_args)
        else:
            raise TypeError(f"{what}: a guvectorize without signatures needs its outputs passed (as NumPy's dynamic "
                            "gufuncs do)")
        # core dimensions
        sizes = {}

        def bind(dims, shape, name):
            core = shape[len(shape) - len(dims):] if dims else ()
            if len(shape) < len(dims):
                raise ValueError(f"{what}: {name} has {len(shape)} dimensions, its core layout {dims} needs "
                                 f"{len(dims)}")
            for d, n in zip(dims, core):
                want = d if isinstance(d, int) else sizes.setdefault(d, n)
                if want != n:
                    raise ValueError(f"{what}: {name}: dimension {d!r} is {n} here and {want} elsewhere")
            return tuple(shape[:len(shape) - len(dims)])

        loops = [bind(dims, a.shape, f"input {i}") for i, (dims, a) in enumerate(zip(self._ins, inputs))]
        loop_shape = np.broadcast_shapes(*loops) if loops else ()
        if out_args is not None:
            for i, (dims, o) in enumerate(zip(self._outs, out_args)):
                if bind(dims, o.shape, f"output {i}") != loop_shape:
                    raise ValueError(f"{what}: output {i} has shape {o.shape}, the loop shape is {loop_shape}")
        for dims in self._outs:
            for d in dims:
                if not isinstance(d, int) and d not in sizes:
                    raise ValueError(f"{what}: the output dimension {d!r} appears in no input; pass the output")
        n = math.prod(loop_shape)
        if cuda_target:
            device = next((a.value.device for a in inputs if a.kind == "device"), None) or _cuda().target_device()
        else:
            device = ts.Device("cpu")
        any_device = any(a.kind == "device" for a in inputs)
        tessel_stream = _tessel_stream(stream, device) if cuda_target else None
        kernel_args = []
        for dims, a, t in zip(self._ins, inputs, argtypes[:self.nin]):
            core = tuple(d if isinstance(d, int) else sizes[d] for d in dims)
            arr = _to_tessel(a, _dtype_of_type(t), device, stream)
            full = loop_shape + core
            if tuple(arr.shape) != full:
                arr = ts.broadcast_to(arr, full).copy()
            if not core and isinstance(t, nbtypes.Array):
                core = (1,)
            kernel_args.append(arr.reshape((n,) + core))
        results, backs = [], []
        for k, (dims, t) in enumerate(zip(self._outs, argtypes[self.nin:])):
            core = tuple(d if isinstance(d, int) else sizes[d] for d in dims)
            dtype = _dtype_of_type(t)
            given = out_args[k] if out_args is not None else None
            arr = None
            if given is not None and given.kind == "device" and given.value.is_contiguous() and given.dtype == dtype:
                arr = given.value
            elif given is not None and given.kind == "host" and device.type == "cpu" and \
                    given.value.flags.c_contiguous and given.dtype == dtype:
                arr = ts.asarray(given.value, device=device)
            if arr is None:
                with _on_stream(stream, device):
                    arr = ts.empty(loop_shape + core, dtype=dtype.name, device=device)
                if given is not None:
                    backs.append((given, arr))
            results.append(arr)
            kernel_args.append(arr.reshape((n,) + (core or (1,))))
        _launch_1d(self._get_kernel(), n, kernel_args, tessel_stream)
        for given, arr in backs:
            with _on_stream(stream, device):
                if given.kind == "device":
                    given.value[...] = arr.astype(given.value.dtype)
                else:
                    np.copyto(given.value, arr.numpy(), casting="unsafe")
        if outputs is not None:
            return outputs[0] if self.nout == 1 else tuple(outputs)
        if cuda_target and any_device:
            made = [_wrap_device(r) for r in results]
        else:
            with _on_stream(stream, device):
                made = [r.numpy() for r in results]
            if not cuda_target:
                made = [m[()] if m.ndim == 0 else m for m in made]
        return made[0] if self.nout == 1 else tuple(made)

    def __repr__(self):
        return f"<tessel.numba {self.target} gufunc '{self.__name__}' {self.layout}>"


# ---- decorators ----------------------------------------------------------------------------------
def vectorize(ftylist_or_function=(), **kws):
    """Numba's ``vectorize``: ``@vectorize``, ``@vectorize(["float32(float32, float32)", ...],
    target="cuda" | "cpu" | "parallel")``. See the module docstring."""
    target = _check_options(kws, "vectorize")
    if callable(ftylist_or_function) and not isinstance(ftylist_or_function, (nbtypes.Type, nbtypes.Signature)):
        return UFunc(ftylist_or_function, [], target, kws)
    signatures = _signature_list(ftylist_or_function)
    for restype, argtypes in signatures:
        if any(not isinstance(t, nbtypes.Number) for t in argtypes) or \
                (restype is not None and not isinstance(restype, nbtypes.Number)):
            raise TypeError(f"tessel.numba.vectorize: signatures of numbers only, got {restype}({argtypes})")
    if signatures and len({len(a) for _, a in signatures}) != 1:
        raise TypeError("tessel.numba.vectorize: the signatures have different numbers of arguments")

    def wrap(func):
        return UFunc(getattr(func, "py_func", func), signatures, target, kws)

    return wrap


def guvectorize(*args, **kws):
    """Numba's ``guvectorize``: ``@guvectorize([signatures], "(m,n),(n)->(m)", target=...)`` or
    ``@guvectorize("(n)->()")`` (no signatures: outputs are passed)."""
    target = _check_options(kws, "guvectorize")
    if len(args) == 1:
        signatures, layout = [], args[0]
    elif len(args) == 2:
        signatures, layout = _signature_list(args[0]), args[1]
    else:
        raise TypeError("guvectorize() takes one or two positional arguments")
    _parse_layout(layout)
    for restype, argtypes in signatures:
        if restype is not None and restype != nbtypes.void:
            sig = f"{restype}({', '.join(map(str, argtypes))})"
            raise TypeError(f"guvectorized functions cannot return values: signature {sig} specifies "
                            f"{restype} return type")
    if target == "cuda" and not kws.get("nopython", True):
        raise TypeError("nopython flag must be True")

    def wrap(func):
        return GUFunc(getattr(func, "py_func", func), signatures, layout, target, kws)

    return wrap
