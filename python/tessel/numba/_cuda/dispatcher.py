"""``cuda.jit`` for tessel.numba: Numba's decorator forms and dispatcher API over tessel's kernel
compiler (``tessel.kernel``).

- :class:`CUDADispatcher` is a :class:`tessel.kernel.Kernel`: compilation, the specializations and
  the launch path are tessel's. What this class adds is Numba's surface: ``kernel[grid, block,
  stream, shared_bytes]`` with Numba's streams, Numba's device arrays and NumPy arrays as
  arguments (NumPy arrays go to the selected device, ``cuda.select_device``, and come back after
  the kernel), eager compilation for declared signatures (and then only those signatures, with
  scalars cast to the declared types, as Numba), ``specialize``, ``signatures``, ``overloads``,
  ``inspect_types`` and ``inspect_asm`` (the PTX NVRTC makes of the kernel's CUDA source).
- :class:`CUDADeviceFunction` is a :class:`tessel.kernel.DeviceFunction`; declared with a scalar
  signature, it is inlined through a shim that casts its arguments and result to those types.
- ``In``, ``Out``, ``InOut``: Numba's argument hints for NumPy arrays.

Launches with device arrays, tessel arrays and numbers take tessel's C++ launch path; the
arguments are unwrapped here (``d.__tessel_array__``), never copied.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import types as pytypes

import numpy as np

import tessel as ts
from tessel.kernel import _compiler
from tessel.kernel import _dispatch as _kdispatch
from tessel.kernel._types import ArrayT, RecordT, Scalar, TupleT, python_scalar_dtype

from .. import types as nbtypes
from ..core import errors as _errors
from . import _streams, _templates
from ._devices import target_device
from ._unsupported import error as _unsupported_error
from .devicearray import DeviceNDArrayBase

__all__ = ["jit", "CUDADispatcher", "CUDADeviceFunction", "In", "Out", "InOut", "as_device_function",
           "numba_type_of_kernel_type", "compile_ptx", "compile_ptx_for_current_device", "compile_kernel",
           "compile_for_current_device"]

_JIT_OPTIONS = ("fastmath", "max_registers", "extensions", "boundscheck")


# ---- types: Numba's <-> the kernel compiler's --------------------------------------------------------
def kernel_type(t, *, eager=False):
    """The kernel compiler's type for a Numba type. ``eager``: the layout to compile ahead for a
    declared array type (``float32[:]`` is compiled for C-contiguous arrays, which launches
    almost always pass; other layouts compile when first launched)."""
    if isinstance(t, nbtypes.Array):
        if isinstance(t.dtype, nbtypes.Record):
            raise TypeError(f"tessel.numba.cuda.jit: a declared signature cannot name the record array type {t} "
                            "(tessel types record arrays when a kernel is launched with one): declare the kernel "
                            "without a signature")
        layout = "C" if t.layout == "C" or (eager and t.layout == "A") else "A"
        return ArrayT(Scalar(t.dtype.dtype.name), t.ndim, layout)
    if isinstance(t, nbtypes.Number):
        return Scalar(t.dtype.name)
    if isinstance(t, nbtypes.BaseTuple):
        return TupleT(tuple(kernel_type(x, eager=eager) for x in t.types))
    raise TypeError(f"tessel.numba.cuda.jit: a kernel parameter of type {t} is not supported (numbers, arrays of "
                    "numbers and tuples of them are)")


def numba_type_of_kernel_type(t):
    """Numba's type for one of the kernel compiler's types (bfloat16 has none: its name)."""
    if isinstance(t, ArrayT):
        if isinstance(t.dtype, RecordT):
            return nbtypes.Array(nbtypes.Record(_record_dtype(t.dtype)), t.ndim, "A")
        return nbtypes.Array(numba_type_of_kernel_type(t.dtype), t.ndim, "C" if t.layout == "C" else "A")
    if isinstance(t, RecordT):
        return nbtypes.Record(_record_dtype(t))
    if isinstance(t, Scalar):
        if t.name == "bfloat16":
            return "bfloat16"
        return nbtypes.from_dtype(np.dtype(t.name))
    if isinstance(t, TupleT):
        items = tuple(numba_type_of_kernel_type(x) for x in t.items)
        if all(isinstance(x, (nbtypes.Number, nbtypes.BaseTuple)) for x in items):
            return nbtypes.Tuple(items)
    return str(t)


def _record_dtype(t):
    """The structured NumPy dtype of the kernel compiler's record type."""
    return np.dtype({"names": [f[0] for f in t.fields],
                     "formats": [(np.dtype(f[1].name), f[2]) if f[2] else np.dtype(f[1].name) for f in t.fields],
                     "offsets": [f[3] for f in t.fields], "itemsize": t.itemsize})


def _scalar_dtype(value):
    """The NumPy dtype of a number argument (Python numbers as Numba types them), else None."""
    if isinstance(value, np.generic):
        return value.dtype
    name = python_scalar_dtype(value)
    return np.dtype(name) if name is not None else None


def _array_numba_type(value):
    value = value.value if isinstance(value, _ArgHint) else value
    if _scalar_dtype(value) is not None:
        return None
    try:
        return nbtypes.typeof(value)
    except (TypeError, NotImplementedError):
        return None


def _describe(value):
    t = _array_numba_type(value)
    if t is not None:
        return str(t)
    d = _scalar_dtype(value)
    return str(nbtypes.from_dtype(d)) if d is not None else type(value).__name__


# ---- argument hints ----------------------------------------------------------------------------------
class _ArgHint:
    copy_in = True
    copy_out = True

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"{type(self).__name__}({self.value!r})"


class In(_ArgHint):
    """``cuda.In(ary)``: a NumPy argument copied to the device before the kernel, not back."""
    copy_out = False


class Out(_ArgHint):
    """``cuda.Out(ary)``: a NumPy argument copied back after the kernel (on a GPU, not copied in)."""
    copy_in = False


class InOut(_ArgHint):
    """``cuda.InOut(ary)``: copied in and back, as a plain NumPy argument is."""


# ---- launches ----------------------------------------------------------------------------------------
_NUMBER_TYPES = frozenset([bool, int, float, complex, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                           np.uint16, np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
                           np.complex128])


def _device_array_types():
    from . import devicearray

    return frozenset([devicearray.DeviceNDArray, devicearray.MappedNDArray, devicearray.DeviceRecord])


_DEVICE_ARRAY_TYPES = _device_array_types()


def _is_default_stream(stream):
    return stream is None or stream is False or (type(stream) is int and stream == 0)


class _Launch:
    """``kernel[grid, block, stream, shared_bytes]``: call it with the kernel's arguments."""

    __slots__ = ("dispatcher", "inner", "grid", "block", "stream", "tessel_stream", "shared")

    def __init__(self, dispatcher, inner, grid, block, stream, tessel_stream, shared):
        self.dispatcher = dispatcher
        self.inner = inner
        self.grid, self.block, self.shared = grid, block, shared
        self.stream, self.tessel_stream = stream, tessel_stream

    def __call__(self, *args):
        # The per-launch path: kept to a few type checks so that the C++ launcher does the rest.
        d = self.dispatcher
        if args and args[-1] is None:
            args = d._without_trailing_nones(args)
        if d._declared and not d._compile_enabled:
            args = d._conform(args)
        values = list(args)
        first = None      # the first tessel array among the arguments
        pending = None    # positions of NumPy arguments (and In/Out/InOut hints)
        arrays = False
        for i, a in enumerate(args):
            t = type(a)
            if t in _NUMBER_TYPES:
                continue
            if t in _DEVICE_ARRAY_TYPES:
                if a._record is not None and a._record != _rng_dtype():
                    # a record array: the kernel reads its fields (the RNG states stay uint64 pairs)
                    values[i] = _kdispatch.RecordArray(a.__tessel_array__, a._record)
                    arrays = True
                    if first is None:
                        first = a.__tessel_array__
                    continue
                a = values[i] = a.__tessel_array__
            elif t is np.ndarray or isinstance(a, _ArgHint):
                pending = (pending or []) + [i]
                continue
            elif t is not ts.Array:
                if _scalar_dtype(a) is not None:
                    continue
                inner = getattr(a, "__tessel_array__", None)
                arrays = True
                if inner is None:
                    continue  # a foreign array (CuPy, PyTorch...): tessel.kernel views it
                a = values[i] = inner
            arrays = True
            if first is None:
                first = a
        if pending:
            backs = d._numpy_in(values, pending, first.device if first is not None else target_device(), self.stream,
                                d.__name__)
            self.inner(*values)
            for host, arr in backs:
                d._numpy_out(host, arr, self.stream)
            return
        if not arrays and ts.cuda_available() and target_device().type == "cpu":
            # Numbers only, with the CPU backend selected on a GPU machine: the C++ path would pick
            # the GPU, so this launch takes the Python launcher (which asks target_device()).
            d._launch(self.grid, self.block, self.tessel_stream, self.shared, tuple(values))
            return
        self.inner(*values)

    def __repr__(self):
        return (f"<launch of {self.dispatcher.__name__}: grid {self.grid}, block {self.block}, "
                f"shared {self.shared} bytes>")


class _ForAll:
    """``kernel.forall(ntasks, tpb, stream, sharedmem)``: call it with the kernel's arguments."""

    __slots__ = ("dispatcher", "ntasks", "tpb", "stream", "sharedmem")

    def __init__(self, dispatcher, ntasks, tpb, stream, sharedmem):
        self.dispatcher, self.ntasks, self.tpb, self.stream, self.sharedmem = dispatcher, ntasks, tpb, stream, sharedmem

    def __call__(self, *args):
        if self.ntasks == 0:
            return
        d = self.dispatcher
        tpb = self.tpb or d._forall_tpb
        while True:
            try:
                d[(self.ntasks + tpb - 1) // tpb, tpb, self.stream, self.sharedmem](*args)
                return
            except Exception as failure:  # noqa: BLE001 - only a launch out of resources is retried
                text = str(failure).lower()
                if self.tpb or tpb <= 32 or "resources" not in text:
                    raise
                tpb //= 2
                d._forall_tpb = tpb


class CUDADispatcher(_kdispatch.Kernel):
    """Numba's kernel dispatcher (``@cuda.jit``) as a tessel kernel; see the module docstring."""

    def __init__(self, py_func, options, signatures=None, specialized=False):
        super().__init__(py_func, options)
        self._declared = []            # Numba argument-type tuples compiled ahead (then the only ones)
        self._compile_enabled = True
        self._specialized = bool(specialized)
        self._numba_launches = {}      # kernel[...] argument -> its launch
        self._specializations = {}     # argument types -> a specialized dispatcher
        self._forall_tpb = 1024        # forall's block size (halved when a launch runs out of resources)
        self._overload_objects = {}    # id(specialization) -> its Overload
        if signatures:
            for sig in signatures:
                self.compile(sig)
            self._compile_enabled = False

    # ---- the hook into tessel.kernel: NumPy-only and number-only launches go to the selected device
    def _convert_args(self, args, device_hint=None):
        return super()._convert_args(args, target_device() if device_hint is None else device_hint)

    # ---- Numba's dispatcher API ---------------------------------------------------------------------
    @property
    def specialized(self):
        """True for a dispatcher made for one signature (``cuda.jit(sig)`` or ``specialize``)."""
        return self._specialized

    @property
    def signatures(self):
        """The argument types (Numba's types) of the compiled specializations."""
        seen = list(self._declared)
        for key in self._specs:  # (argument types, target, ...)
            sig = tuple(numba_type_of_kernel_type(t) for t in key[0])
            if sig not in seen and not any(_covers(d, sig) for d in self._declared):
                seen.append(sig)
        return seen

    @property
    def overloads(self):
        """{argument types: the compiled kernel}: Numba's kernel objects (:class:`Overload`, with
        ``max_cooperative_grid_blocks``, ``regs_per_thread``, ... and tessel's ``.source`` and
        ``.target``)."""
        found = _Overloads()
        here = "cuda" if target_device().type == "cuda" else "cpu"
        for key, spec in self._specs.items():
            sig = tuple(numba_type_of_kernel_type(t) for t in key[0])
            if dict.__contains__(found, sig) and dict.__getitem__(found, sig).target == here and spec.target != here:
                continue   # compiled for both backends: the selected device's
            wrapped = self._overload_objects.get(id(spec))
            if wrapped is None or wrapped.spec is not spec:
                wrapped = self._overload_objects[id(spec)] = Overload(self, spec)
            found[sig] = wrapped
        return found

    definitions = overloads

    # ---- the compiled kernels' attributes (Numba's get_* methods) ----------------------------------
    def _per_overload(self, attribute, signature):
        """Numba's rule: the value for ``signature`` (a Signature or a tuple of argument types),
        for the one compiled kernel of a specialized dispatcher, else {argument types: value}."""
        overloads = self.overloads
        if signature is not None:
            key = tuple(signature.args) if isinstance(signature, nbtypes.Signature) else tuple(signature)
            if key not in overloads:
                raise KeyError(f"kernel '{self.__name__}' has no compiled kernel for {key}; compiled: "
                               f"{list(overloads)}")
            return attribute(overloads[key])
        if self.specialized:
            if not overloads:
                raise ValueError(f"kernel '{self.__name__}' has no compiled kernel yet")
            return attribute(next(iter(overloads.values())))
        return {sig: attribute(o) for sig, o in overloads.items()}

    def get_regs_per_thread(self, signature=None):
        """Registers per thread of the compiled kernel(s) (0 on the CPU backend, which has none)."""
        return self._per_overload(lambda o: o.regs_per_thread, signature)

    def get_shared_mem_per_block(self, signature=None):
        """Static shared memory per block, in bytes."""
        return self._per_overload(lambda o: o.shared_mem_per_block, signature)

    def get_local_mem_per_thread(self, signature=None):
        """Local memory per thread, in bytes (on the CPU backend, the kernel's local arrays)."""
        return self._per_overload(lambda o: o.local_mem_per_thread, signature)

    def get_max_threads_per_block(self, signature=None):
        """The largest block the compiled kernel(s) can be launched with."""
        return self._per_overload(lambda o: o.max_threads_per_block, signature)

    def get_const_mem_size(self, signature=None):
        """Constant memory of the compiled kernel(s), in bytes (the globals frozen as arrays)."""
        return self._per_overload(lambda o: o.const_mem_size, signature)

    def max_cooperative_grid_blocks(self, blockdim, dynsmemsize=0, signature=None):
        """The most blocks a grid-synchronizing launch of ``blockdim`` threads per block can have
        (Numba has this on the compiled kernels, ``kernel.overloads[sig]``): an int when one
        kernel is compiled (or ``signature`` picks one), else {argument types: blocks}."""
        if signature is None and len(self.overloads) == 1:
            return next(iter(self.overloads.values())).max_cooperative_grid_blocks(blockdim, dynsmemsize)
        if signature is None and not self.overloads:
            raise ValueError(f"kernel '{self.__name__}' has no compiled kernel yet: launch it, or compile it with a "
                             "signature (cuda.jit(sig) or kernel.compile(sig)), first")
        return self._per_overload(lambda o: o.max_cooperative_grid_blocks(blockdim, dynsmemsize), signature)

    def _without_trailing_nones(self, args):
        """Arguments that are None for parameters whose default is None are left out, so the
        kernel compiles with the default (Numba types them as none and prunes the branches that
        test them: ``if weights is not None``). Elsewhere None is an error naming the parameter."""
        params = list(inspect.signature(self.py_func).parameters.values())
        args = list(args)
        while args and args[-1] is None and len(args) <= len(params) and params[len(args) - 1].default is None:
            args.pop()
        for i, a in enumerate(args):
            if a is None:
                name = params[i].name if i < len(params) else f"#{i}"
                raise TypeError(f"kernel '{self.__name__}': argument {i} ('{name}') is None; tessel.numba takes None "
                                "only for trailing parameters whose default is None (if x is None: ... is then "
                                "decided when the kernel compiles)")
        return tuple(args)

    def _specialization(self, arg_types, device):
        try:
            return super()._specialization(arg_types, device)
        except _compiler.KernelCompileError as failure:
            if isinstance(failure, _errors.KernelTypingError):
                raise
            raise _errors.KernelTypingError(*failure.args) from None

    def compile(self, sig):
        """Compiles the kernel now for a signature (``"void(float32[:], int32)"``, a Numba signature
        or a tuple of types) on the selected device; returns the specialization."""
        restype, argtypes = nbtypes.parse_signature(sig)
        if restype is not None and restype is not nbtypes.void:
            raise TypeError("CUDA kernel must have void return type.")
        argtypes = tuple(argtypes)
        if any(_has_record(t) for t in argtypes):
            # records (arrays of them, single ones): typed when a launch passes them (their alignment is
            # the array's), so the signature only selects launches
            if argtypes not in self._declared:
                self._declared.append(argtypes)
                self._numba_launches.clear()
            return None
        kernel_types = tuple(kernel_type(t, eager=True) for t in argtypes)
        device = target_device()
        spec = self._specialization(kernel_types, device)
        _build(spec, device)
        if argtypes not in self._declared:
            self._declared.append(argtypes)
            self._numba_launches.clear()
        return spec

    def disable_compile(self, val=True):
        """After this, launches must match a compiled (declared) signature."""
        self._compile_enabled = not val
        self._numba_launches.clear()

    @property
    def specializations(self):
        """{argument types: the dispatcher that ``specialize`` made for them}."""
        return self._specializations

    def specialize(self, *args):
        """A dispatcher compiled for the types of these arguments (and only those); an argument may
        also be a Numba type (``float32[::1]``), as in Numba."""
        if self._specialized or self._declared:
            raise RuntimeError(f"kernel '{self.__name__}': Dispatcher already specialized (by a signature or by "
                               "specialize)")
        argtypes = tuple(a if isinstance(a, nbtypes.Type) else
                         nbtypes.from_dtype(_scalar_dtype(a)) if _scalar_dtype(a) is not None
                         else _array_numba_type(a) for a in args)
        if any(t is None for t in argtypes):
            raise TypeError(f"kernel '{self.__name__}'.specialize: arguments are arrays, numbers or Numba types")
        found = self._specializations.get(argtypes)
        if found is None:
            found = CUDADispatcher(self.py_func, self.options, [argtypes], specialized=True)
            self._specializations[argtypes] = found
        return found

    def inspect_asm(self, signature=None):
        """The PTX per signature, as Numba's: NVRTC compiles the kernel's CUDA source for the current
        device's architecture (sm_90 without a GPU) to PTX. ``signature``: the PTX for those
        argument types (a tuple of Numba types)."""
        from ... import _tessel as core

        def ptx(spec):
            if spec.target == "cuda":
                return core._compile_ptx(spec.source, spec.symbol, list(spec.options), "")
            return self._cuda_ptx(spec.arg_types)

        if signature is None:
            return {sig: ptx(spec) for sig, spec in self.overloads.items()}
        key = tuple(signature.args) if isinstance(signature, nbtypes.Signature) else tuple(signature)
        spec = self.overloads.get(key)
        if spec is None:
            spec = self._specialization(tuple(kernel_type(t, eager=True) for t in key), target_device())
        return ptx(spec)

    def _cuda_ptx(self, types, arch=""):
        """NVRTC's PTX of this kernel for the kernel compiler's argument types, generated for CUDA
        whatever the selected device (``arch``: "sm_80", ...; "": the current GPU's, else sm_90)."""
        from ... import _tessel as core

        opts = self._compile_options()
        symbol = _kdispatch._symbol_for(self.py_func.__qualname__, types, "cuda")
        source, _ = _kdispatch._compiler.generate(self.py_func, list(types), "cuda", opts, symbol)
        return core._compile_ptx(source, symbol, _kdispatch._cuda_options(opts), arch)

    def inspect_types(self, file=None, signature=None, pretty=False, **kwargs):
        """Writes each compiled signature and the kernel's Python source (to stdout by default;
        ``pretty`` and Numba's other formatting options change nothing)."""
        file = sys.stdout if file is None else file
        try:
            source = textwrap.dedent(inspect.getsource(self.py_func))
        except (OSError, TypeError):
            source = "<source not available>\n"
        for sig in self.signatures if signature is None else [tuple(signature)]:
            print(f"{self.__name__} ({', '.join(map(str, sig))})", file=file)
            print("-" * 80, file=file)
            print(source, file=file)
            print("=" * 80, file=file)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        reason = _DISPATCHER_UNSUPPORTED.get(name, "not a part of Numba's dispatcher API that tessel provides")
        raise _unsupported_error(f"Dispatcher.{name}", reason)

    # ---- launch configuration -------------------------------------------------------------------
    def __getitem__(self, config):
        try:
            hit = self._numba_launches.get(config)
        except TypeError:  # unhashable (a list)
            return self._make_launch(config)
        if hit is None:
            hit = self._make_launch(config)
            if len(self._numba_launches) > 256:
                self._numba_launches.clear()
            self._numba_launches[config] = hit
        return hit

    def _make_launch(self, config):
        if not isinstance(config, tuple):
            config = (config,)
        if not 2 <= len(config) <= 4:
            raise ValueError(f"kernel '{self.__name__}': launch with kernel[grid, block], [grid, block, stream] or "
                             f"[grid, block, stream, shared_bytes]; got {len(config)} values")
        stream = config[2] if len(config) > 2 else 0
        shared = config[3] if len(config) > 3 else 0
        tessel_stream = None if _is_default_stream(stream) else _streams.as_tessel_stream(stream)
        inner = self._validate_config((config[0], config[1], tessel_stream, shared))
        grid = _kdispatch._dim3(config[0], "grid", self.__name__)
        block = _kdispatch._dim3(config[1], "block", self.__name__)
        launch = _Launch(self, inner, grid, block, stream, tessel_stream, int(shared))
        if self._declared and not self._compile_enabled:
            return launch     # arguments are conformed to the declared types first
        # tessel arrays, device arrays and numbers launch in C++; the rest goes to `launch`
        from tessel import _tessel as core
        return core._configure_launch(self._launcher, list(grid), list(block), tessel_stream, int(shared), launch)

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """A launch of ``ntasks`` threads (at least) in blocks of ``tpb``. Without ``tpb``, blocks of
        1024 threads, the size CUDA's occupancy calculator gives Numba for most kernels (programs
        written for Numba's ``forall`` may rely on one block covering 1024 tasks); where a kernel
        cannot launch that many threads per block on the GPU, the size halves until it can."""
        if not isinstance(ntasks, (int, np.integer)) or ntasks < 0:
            raise ValueError(f"kernel '{self.__name__}': forall(n) needs a non-negative int, got {ntasks!r}")
        return _ForAll(self, int(ntasks), int(tpb), stream, int(sharedmem))

    def __call__(self, *args, **kwargs):
        raise ValueError(f"kernel '{self.__name__}' needs a launch configuration: "
                         f"{self.__name__}[blocks, threads_per_block](...)")

    @staticmethod
    def _numpy_in(values, positions, device, stream, name="kernel"):
        """NumPy arguments (and In/Out/InOut hints) as tessel arrays on ``device``: on the CPU
        backend over the same memory where tessel can, else copies. Returns what to copy back."""
        backs = []
        for i in positions:
            a = values[i]
            hint = a if isinstance(a, _ArgHint) else None
            host = np.asarray(hint.value if hint is not None else a)
            record = None
            rng = host.dtype == _rng_dtype() and host.flags.c_contiguous
            if rng:
                # the RNG's states: the kernel takes them as uint64 pairs, over the same memory
                host = host.view(np.uint64).reshape(host.shape + (2,))
            elif host.dtype.names is not None:
                # a record array: its bytes go to the device (and back); the kernel reads fields
                record = host.dtype
                host = _kdispatch.record_bytes_view(host)
            elif host.dtype.kind not in "biufc":
                raise TypeError(f"kernel '{name}': argument {i} has dtype {host.dtype}; "
                                "kernels take arrays of numbers and record arrays")
            if host.dtype.byteorder == ">":
                host = host.astype(host.dtype.newbyteorder("="))
            if hint is not None and not hint.copy_in and device.type != "cpu":
                with _streams.on_stream(stream, device):
                    arr = ts.empty(host.shape, dtype=host.dtype.name, device=device)
            else:
                if hint is not None and not hint.copy_out and device.type == "cpu":
                    host = host.copy()  # cuda.In: the kernel's writes must not reach the host array
                with _streams.on_stream(stream, device):
                    arr = ts.asarray(host, device=device)
            values[i] = arr if record is None else _kdispatch.RecordArray(arr, record)
            copy_out = hint.copy_out if hint is not None else host.flags.writeable
            if copy_out and not (device.type == "cpu" and _same_memory(arr, host)):
                target = host if record is not None or rng else (hint.value if hint is not None else a)
                backs.append((target, arr))
        return backs

    @staticmethod
    def _numpy_out(host, arr, stream):
        with _streams.on_stream(stream, arr.device):
            np.copyto(host, arr.numpy().reshape(host.shape), casting="unsafe")

    def _conform(self, args):
        """With declared signatures only: the best-matching one (Numba's rule: arrays of the
        declared dtype and rank, numbers converted; fewest unsafe, then safe, then promoting
        conversions), its numbers cast to the declared types. Two best signatures that rate the
        same are Numba's TypeError (ambiguous overloading)."""
        rated = []
        for argtypes in self._declared:
            if len(argtypes) != len(args):
                continue
            score, values = (0, 0, 0), list(args)
            for i, (t, a) in enumerate(zip(argtypes, args)):
                found = _conform_one(t, a)
                if found is None:
                    break
                score = tuple(x + y for x, y in zip(score, found[0]))
                values[i] = found[1]
            else:
                rated.append((score, len(rated), argtypes, values))
        if not rated:
            raise TypeError(f"No matching definition for argument type(s) {', '.join(_describe(a) for a in args)} "
                            f"in kernel '{self.__name__}' (compiled for: "
                            f"{'; '.join('(' + ', '.join(map(str, d)) + ')' for d in self._declared)})")
        rated.sort(key=lambda r: (r[0], r[1]))
        if len(rated) > 1 and rated[0][0] == rated[1][0]:
            raise TypeError(f"Ambiguous overloading for kernel '{self.__name__}' "
                            f"({', '.join(_describe(a) for a in args)}):\n"
                            + "\n".join("(" + ", ".join(map(str, r[2])) + ") -> none" for r in rated[:2]))
        return rated[0][3]

    def __repr__(self):
        return f"<tessel.numba CUDADispatcher {self.py_func.__qualname__}>"


def _has_record(t):
    if isinstance(t, nbtypes.Record):
        return True
    if isinstance(t, nbtypes.Array):
        return isinstance(t.dtype, nbtypes.Record)
    if isinstance(t, nbtypes.BaseTuple):
        return any(_has_record(x) for x in t.types)
    return False


def _conform_one(t, a):
    """((unsafe, safe, promoting) conversion counts, the value converted) of argument a for a declared type t,
    or None."""
    if isinstance(t, nbtypes.Record):
        a_ = a.value if isinstance(a, _ArgHint) else a
        return ((0, 0, 0), a) if isinstance(a_, np.void) and a_.dtype == t.dtype else None
    if isinstance(t, nbtypes.Array):
        at = _array_numba_type(a)
        if at is None or at.dtype is not t.dtype or at.ndim != t.ndim or (t.layout != "A" and at.layout != t.layout):
            return None
        return (0, 0, 0), a
    if isinstance(t, nbtypes.BaseTuple):
        if not isinstance(a, tuple) or len(a) != len(t.types):
            return None
        score, items = (0, 0, 0), []
        for tt, x in zip(t.types, a):
            found = _conform_one(tt, x)
            if found is None:
                return None
            score = tuple(x + y for x, y in zip(score, found[0]))
            items.append(found[1])
        return score, tuple(items)
    d = _scalar_dtype(a)
    kind = None if d is None else _conversion(d, t.dtype)
    if kind is None:
        return None
    return kind, (t.cast(a) if d != t.dtype or not isinstance(a, np.generic) else a)


_DISPATCHER_UNSUPPORTED = {
    "inspect_llvm": "tessel compiles generated C++, not LLVM IR; kernel.inspect_asm() returns that source",
    "inspect_sass": "tessel does not expose SASS; kernel.inspect_asm() returns the generated source",
    "inspect_sass_cfg": "tessel does not expose SASS",
    "enable_caching": "compiled kernels are always cached on disk by tessel",
    "get_call_template": "Numba's typing machinery is not part of tessel",
}


class _Overloads(dict):
    """{argument types: compiled kernel}; a declared signature's types find the kernel compiled for
    them (a declared float32[:] is compiled for C-contiguous arrays), and a Signature its args."""

    def _key(self, key):
        if isinstance(key, nbtypes.Signature):
            key = key.args
        key = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        if dict.__contains__(self, key):
            return key
        variant = tuple(_c_variant(t) for t in key)
        return variant if dict.__contains__(self, variant) else None

    def __getitem__(self, key):
        found = self._key(key)
        if found is None:
            raise KeyError(key)
        return dict.__getitem__(self, found)

    def __contains__(self, key):
        try:
            return self._key(key) is not None
        except TypeError:
            return False

    def get(self, key, default=None):
        found = self._key(key)
        return default if found is None else dict.__getitem__(self, found)


def _c_variant(t):
    """A declared array type's C-contiguous variant (what a declared float32[:] compiles for)."""
    if isinstance(t, nbtypes.Array) and t.layout == "A":
        return nbtypes.Array(t.dtype, t.ndim, "C", t.readonly)
    return t


class Overload:
    """One compiled kernel (Numba's ``kernel.overloads[sig]``): ``max_cooperative_grid_blocks``,
    the kernel's attributes (``regs_per_thread``, ``shared_mem_per_block``,
    ``local_mem_per_thread``, ``max_threads_per_block``, ``const_mem_size``), ``argument_types``,
    ``entry_name``, ``inspect_asm()``; and tessel's ``source``, ``target`` (``"cuda"`` or
    ``"cpu"``) and ``symbol``.

    On CUDA the attributes are the CUDA driver's for the kernel's code (its PTX loaded for the
    current device); the CPU backend reports those of a device of compute capability 9.0 (the
    limits ``get_current_device()`` reports): no registers, the kernel's shared, local and
    constant arrays, 1024 threads per block, and for a grid-synchronizing launch at most
    ``min(32, 2048 // threads per block)`` blocks per "multiprocessor" (fewer when the shared
    memory of a block asks for it) times ``MULTIPROCESSOR_COUNT`` (the CPU's cores), within the
    2**24 threads the CPU backend runs at once."""

    def __init__(self, dispatcher, spec):
        self.dispatcher = dispatcher
        self.spec = spec
        self._attributes = None

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.spec, name)

    @property
    def argument_types(self):
        return tuple(numba_type_of_kernel_type(t) for t in self.spec.arg_types)

    @property
    def cooperative(self):
        """Whether the kernel synchronizes its grid (cg.this_grid().sync()), as Numba's."""
        return bool(self.spec.info.get("grid_sync"))

    @property
    def signature(self):
        return nbtypes.Signature(nbtypes.void, list(self.argument_types))

    @property
    def entry_name(self):
        return self.spec.symbol

    @property
    def py_func(self):
        return self.dispatcher.py_func

    def _cuda(self):
        if self._attributes is None:
            self._attributes = _CudaFunction(self.spec, target_device())
        return self._attributes

    @property
    def regs_per_thread(self):
        return 0 if self.spec.target == "cpu" else self._cuda().attribute(4)

    @property
    def shared_mem_per_block(self):
        if self.spec.target == "cpu":
            return int(self.spec.info.get("static_shared_bytes", 0))
        return self._cuda().attribute(1)

    @property
    def local_mem_per_thread(self):
        if self.spec.target == "cpu":
            return int(self.spec.info.get("local_bytes", 0))
        return self._cuda().attribute(3)

    @property
    def max_threads_per_block(self):
        return 1024 if self.spec.target == "cpu" else self._cuda().attribute(0)

    @property
    def const_mem_size(self):
        if self.spec.target == "cpu":
            return int(self.spec.info.get("const_bytes", 0))
        return self._cuda().attribute(2)

    def max_cooperative_grid_blocks(self, blockdim, dynsmemsize=0):
        """The most blocks of ``blockdim`` threads (an int or a tuple) with ``dynsmemsize`` bytes of
        dynamic shared memory that a grid-synchronizing launch of this kernel can have: the blocks
        resident at once per multiprocessor times the multiprocessors."""
        dims = _kdispatch._dim3(blockdim, "block", self.dispatcher.__name__)
        threads = dims[0] * dims[1] * dims[2]
        dynsmemsize = int(dynsmemsize)
        if self.spec.target == "cuda":
            device = target_device()
            per_sm = self._cuda().active_blocks(threads, dynsmemsize)
            from ._devices import Device

            return per_sm * Device(device).MULTIPROCESSOR_COUNT
        from ._devices import _CPU_ATTRIBUTES

        per_sm = min(32, _CPU_ATTRIBUTES["MAX_THREADS_PER_MULTIPROCESSOR"] // threads)
        shared = int(self.spec.info.get("static_shared_bytes", 0)) + dynsmemsize
        if shared > _CPU_ATTRIBUTES["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]:
            return 0
        if shared:
            per_sm = min(per_sm, _CPU_SHARED_PER_SM // shared)
        return min(per_sm * _CPU_ATTRIBUTES["MULTIPROCESSOR_COUNT"], (1 << 24) // threads)

    def inspect_asm(self):
        return self.dispatcher.inspect_asm(self.argument_types)

    def __repr__(self):
        return f"<compiled kernel {self.dispatcher.__name__}{self.argument_types} ({self.spec.target})>"


_CPU_SHARED_PER_SM = 228 * 1024   # compute capability 9.0


class _CudaFunction:
    """The kernel as launches load it (tessel's one compile cache): its attributes and occupancy."""

    def __init__(self, spec, device):
        from ... import _tessel as core

        self._core = core
        self._key = (spec.source, spec.symbol, list(spec.options or []), device.index)
        self._attributes = None

    def attribute(self, code):
        """0 max threads per block, 1 static shared bytes, 2 constant bytes, 3 local bytes, 4 registers."""
        if self._attributes is None:
            self._attributes = self._core._cuda_kernel_attributes(*self._key)
        return int(self._attributes[code])

    def active_blocks(self, threads, dynamic_shared):
        return int(self._core._cuda_kernel_active_blocks(*self._key, int(threads), int(dynamic_shared)))


def _covers(declared, sig):
    """True when a compiled signature is the C-contiguous variant of a declared one."""
    if len(declared) != len(sig):
        return False
    for d, s in zip(declared, sig):
        if d == s:
            continue
        if isinstance(d, nbtypes.Array) and isinstance(s, nbtypes.Array) and d.dtype is s.dtype and d.ndim == s.ndim:
            continue
        return False
    return True


def _rng_dtype():
    from . import random

    return random.xoroshiro128p_dtype


def _same_memory(arr, host):
    try:
        return arr.data_ptr == host.ctypes.data and tuple(arr.strides) == tuple(host.strides)
    except Exception:  # noqa: BLE001 - anything unexpected: copy back
        return False


def _build(spec, device):
    """Compiles a specialization now (else its first launch would)."""
    if spec.target == "cpu":
        if spec.host is None:
            from tessel import _tessel as core

            spec.host = core._get_host_kernel(spec.source, spec.symbol, list(spec.options))
    else:
        if spec.raw is None:
            spec.raw = ts.RawKernel(spec.source, spec.symbol, tuple(spec.options))
        spec.raw.compile(device)


# ---- device functions ----------------------------------------------------------------------------------
class CUDADeviceFunction(_kdispatch.DeviceFunction):
    """A device function (``@cuda.jit(device=True)``): inlined into the kernels that call it. With
    one signature of numbers (``"float32(float32, int32)"``), calls cast the arguments to those
    types and the result to the return type, as Numba's compiled device function does. Called
    outside a kernel, it runs as plain Python."""

    def __init__(self, py_func, options, signatures=()):
        super().__init__(py_func, options)
        self._signatures = []
        for sig in signatures:
            restype, argtypes = nbtypes.parse_signature(sig)
            self._signatures.append((restype, tuple(argtypes)))
        # one shim per signature of numbers: the arguments cast to its types, the result to its
        # return type (without one, the type the function returns for those arguments)
        self._shims = []
        raw = _kdispatch.DeviceFunction(py_func, options)
        for restype, argtypes in self._signatures:
            if (restype is None or _castable(restype)) and all(_castable(t) for t in argtypes) \
                    and len(argtypes) <= _templates.MAX_SHIM_ARGS:
                result = _SAME if restype is None else restype
                self._shims.append((argtypes, _templates.cast_shim(raw, result, argtypes)))

    @property
    def signatures(self):
        return [argtypes for _, argtypes in self._signatures]

    def select(self, types):
        """Numba's choice among the declared signatures: the one whose conversions of the arguments
        rate best (fewest unsafe, then safe, then promoting conversions; the first declared among
        equals, as Numba resolves device functions). Numbers that convert to no declared signature
        (a complex to a real type) are Numba's typing error."""
        candidates = [(argtypes, shim) for argtypes, shim in self._shims if len(argtypes) == len(types)]
        if not candidates:
            return super().select(types)
        rated = [(_rating(types, argtypes), i) for i, (argtypes, _) in enumerate(candidates)]
        if all(r is not None for r, _ in rated):
            usable = [(r, i) for r, i in rated if r != _NO_CONVERSION]
            if not usable:
                raise _compiler.KernelCompileError(
                    f"Invalid use of type device function '{self.py_func.__qualname__}' with parameters "
                    f"({', '.join(map(str, types))}); its declared signatures: "
                    + "; ".join("(" + ", ".join(map(str, a)) + ")" for a, _ in candidates))
            return candidates[min(usable)[1]][1]
        return candidates[0][1]

    def __getitem__(self, config):
        raise RuntimeError(f"Cannot compile a device function as a kernel: '{self.py_func.__qualname__}' is "
                           "a device function (cuda.jit(device=True)); call it from a kernel, or decorate "
                           "it with cuda.jit to launch it")

    def __repr__(self):
        return f"<tessel.numba device function {self.py_func.__qualname__}>"


def _same(value):
    return value


_SAME = _kdispatch.DeviceFunction(_same, {})


_NO_CONVERSION = (float("inf"),)


def _conversion(src, dst):
    """Numba's kind of conversion of a number of dtype src to dtype dst, as (unsafe, safe,
    promoting) counts: (0, 0, 0) none needed, promoting within a kind, safe across kinds, unsafe
    where values may change; None where Numba converts not at all (a complex to a real)."""
    if src == dst:
        return (0, 0, 0)
    if src.kind == "c" and dst.kind != "c":
        return None
    if not np.can_cast(src, dst, "safe"):
        return (1, 0, 0)
    return (0, 0, 1) if src.kind == dst.kind else (0, 1, 0)


def _rating(types, argtypes):
    """The summed conversions (_conversion) of kernel argument types to declared Numba number
    types, as Numba rates overloads; _NO_CONVERSION if one is impossible, None where an argument
    is not a number."""
    counts = (0, 0, 0)
    for t, d in zip(types, argtypes):
        if not isinstance(t, Scalar) or not isinstance(d, nbtypes.Number):
            return None
        kind = _conversion(np.dtype("float32" if t.name == "bfloat16" else t.name), np.dtype(str(d)))
        if kind is None:
            return _NO_CONVERSION
        counts = tuple(x + y for x, y in zip(counts, kind))
    return counts


def _castable(t):
    """Numbers and tuples of numbers: types a device function's shim casts to."""
    if isinstance(t, nbtypes.Number):
        return True
    return isinstance(t, nbtypes.BaseTuple) and all(_castable(x) for x in t.types)


def _compiles_to(node, code):
    """Whether the lambda `node`, with code's free variables as closure cells, compiles to code's
    bytecode."""
    text = f"def _outer({', '.join(code.co_freevars)}):\n    return {ast.unparse(node)}\n"
    outer = next(c for c in compile(text, "<lambda>", "exec").co_consts if isinstance(c, pytypes.CodeType))
    inner = next(c for c in outer.co_consts if isinstance(c, pytypes.CodeType))
    return (inner.co_code, inner.co_consts, inner.co_names) == (code.co_code, code.co_consts, code.co_names)


def _lambda_as_function(fn):
    """A lambda as an equivalent ``def`` whose source the kernel compiler can read (its source line
    parsed, the ``def`` registered with linecache); other functions unchanged."""
    if getattr(fn, "__name__", None) != "<lambda>":
        return fn
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise TypeError(f"tessel.numba: the source of a lambda is not available ({e})") from None
    body = source.strip()
    tree = None
    # the lambda's statement may be part of a longer one (an argument list, a continuation line)
    for text in (source, body.rstrip(",;\\"), "(" + body.rstrip(",;\\") + ")", "(" + body.rstrip(",;\\)") + ")",
                 "def f():\n" + textwrap.indent(source, " ")):
        try:
            tree = ast.parse(text)
            break
        except SyntaxError:
            continue
    code = fn.__code__
    params = list(code.co_varnames[:code.co_argcount])
    found = [] if tree is None else [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                                     and [a.arg for a in n.args.args] == params]
    if len(found) > 1:   # several such lambdas in the statement: the one that compiles to fn's code
        found = [n for n in found if _compiles_to(n, code)][:1]
    if len(found) != 1:
        raise TypeError("tessel.numba: cannot read this lambda's source (write it as a def)")
    node = found[0]
    free = list(code.co_freevars)
    name = f"lambda_{abs(hash((code.co_filename, code.co_firstlineno, node.col_offset))):x}"
    text = (f"def _tessel_outer({', '.join(free)}):\n"
            f"    def {name}({ast.unparse(node.args)}):\n"
            f"        return {ast.unparse(node.body)}\n"
            f"    return {name}\n")
    filename = f"<tessel.numba lambda {code.co_filename}:{code.co_firstlineno}:{name}>"
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    module_code = compile(text, filename, "exec")
    outer_code = next(c for c in module_code.co_consts if isinstance(c, pytypes.CodeType))
    outer = pytypes.FunctionType(outer_code, fn.__globals__, "_tessel_outer")
    values = [cell.cell_contents for cell in (fn.__closure__ or ())]
    made = outer(*values)
    made.__defaults__ = fn.__defaults__
    return made


def as_device_function(fn, options=None):
    """A tessel device function for ``fn``: itself when it is one, else the Python function (a
    lambda too) wrapped."""
    if isinstance(fn, _kdispatch.DeviceFunction):
        return fn
    if isinstance(fn, _kdispatch.Kernel):
        raise TypeError(f"kernel '{fn.__name__}' is a kernel; a device function is needed here")
    if not callable(fn):
        raise TypeError(f"expected a function, got {fn!r}")
    py_func = getattr(fn, "py_func", fn)
    return CUDADeviceFunction(_lambda_as_function(py_func), {"numbers": "numba", **(options or {})})


# ---- the decorator -------------------------------------------------------------------------------------
def _is_signature(obj):
    return isinstance(obj, (str, tuple, nbtypes.Signature))


def jit(func_or_sig=None, device=False, inline="never", forceinline=False, link=(), debug=None, opt=None,
        lineinfo=False, cache=False, launch_bounds=None, lto=None, **kws):
    """Numba's ``cuda.jit``: ``@cuda.jit``, ``@cuda.jit(device=True)``, ``@cuda.jit("void(float32[:])")``,
    ``@cuda.jit([sig, ...])``, with ``fastmath``, ``debug``, ``lineinfo``, ``cache``,
    ``max_registers``, ``opt``, ``inline``. Kernels are :class:`CUDADispatcher` objects (tessel
    kernels), device functions :class:`CUDADeviceFunction` objects. ``debug=True`` (or
    ``boundscheck=True``) checks array indices and raises IndexError. ``launch_bounds`` and ``lto``
    are accepted and change nothing."""
    unknown = sorted(k for k in kws if k not in _JIT_OPTIONS)
    if unknown:
        raise TypeError(f"tessel.numba.cuda.jit: unknown option(s) {', '.join(unknown)}")
    if link:
        raise _unsupported_error("jit(link=...)", "linking external PTX or CUDA C++ into kernels is not supported")
    if kws.get("extensions"):
        raise _unsupported_error("jit(extensions=...)", "Numba's argument extensions are not supported")
    if kws.get("boundscheck"):
        debug = True
    if isinstance(inline, str) and inline not in ("never", "always"):
        raise ValueError(f"tessel.numba.cuda.jit: inline must be 'never', 'always' or a bool, got {inline!r}")
    options = dict(fastmath=bool(kws.get("fastmath", False)), debug=debug, lineinfo=bool(lineinfo),
                   cache=bool(cache), max_registers=kws.get("max_registers"),
                   inline=bool(forceinline) or inline is True or inline == "always",
                   opt=True if opt is None else bool(opt), numbers="numba")

    if _is_signature(func_or_sig):
        signatures, specialized = [func_or_sig], True
    elif isinstance(func_or_sig, list):
        signatures, specialized = list(func_or_sig), False
    else:
        signatures, specialized = None, False

    def make(func):
        if isinstance(func, (_kdispatch.Kernel, _kdispatch.DeviceFunction)):
            func = func.py_func
        if not callable(func):
            raise TypeError(f"tessel.numba.cuda.jit decorates a function, got {func!r}")
        if device:
            return CUDADeviceFunction(_lambda_as_function(func), options, signatures or ())
        if signatures:
            for sig in signatures:
                restype, _ = nbtypes.parse_signature(sig)
                if restype is not None and restype is not nbtypes.void:
                    raise TypeError("CUDA kernel must have void return type.")
        return CUDADispatcher(func, options, signatures, specialized)

    if signatures is not None or func_or_sig is None:
        return make
    return make(func_or_sig)


def compile_ptx(pyfunc, sig, debug=False, lineinfo=False, device=False, fastmath=False, cc=None, opt=None,
                abi="numba", abi_info=None, output="ptx", forceinline=False, launch_bounds=None):
    """Numba's ``cuda.compile_ptx``: the PTX of ``pyfunc`` as a kernel for the signature, and its
    return type (``void``). NVRTC compiles tessel's generated CUDA C++ for compute capability
    ``cc`` (a tuple; default the current GPU's, else 9.0). A device function is compiled into each
    kernel that calls it, so ``device=True`` is not supported."""
    if device:
        raise _unsupported_error("compile_ptx(device=True)", "a device function is compiled into each kernel that "
                                 "calls it; compile that kernel")
    if output != "ptx":
        raise _unsupported_error(f"compile(output={output!r})", "tessel produces PTX only")
    if isinstance(pyfunc, (_kdispatch.Kernel, _kdispatch.DeviceFunction)):
        pyfunc = pyfunc.py_func
    restype, argtypes = nbtypes.parse_signature(sig)
    if restype is not None and restype is not nbtypes.void:
        raise TypeError("CUDA kernel must have void return type.")
    if cc is not None and (not isinstance(cc, tuple) or len(cc) != 2 or not all(isinstance(c, int) for c in cc)):
        raise ValueError(f"tessel.numba.cuda.compile_ptx: cc is a compute capability (major, minor), got {cc!r}")
    kernel = jit(pyfunc, debug=debug, lineinfo=lineinfo, opt=opt, fastmath=fastmath)
    types = tuple(kernel_type(t, eager=True) for t in argtypes)
    return kernel._cuda_ptx(types, f"sm_{cc[0]}{cc[1]}" if cc else ""), nbtypes.void


def compile_ptx_for_current_device(pyfunc, sig, **kws):
    """``compile_ptx`` for the current GPU's compute capability (9.0 without a GPU)."""
    return compile_ptx(pyfunc, sig, cc=_current_cc(), **kws)


# Numba's cuda.compile and compile_for_current_device (output="ptx", the only output tessel produces).
compile_kernel = compile_ptx
compile_for_current_device = compile_ptx_for_current_device


def _current_cc():
    import tessel as ts

    if not ts.cuda_available():
        return None
    from ._devices import Device

    return Device(target_device()).compute_capability if target_device().type == "cuda" else None


def declare_device(name, sig, link=None, use_cooperative=False):
    raise _unsupported_error("declare_device", "calling foreign (linked) device functions is not supported")


# Names of Numba's warp-vote intrinsics that tessel.kernel spells as any_sync/all_sync/eq_sync/ballot_sync.
def _vote_aliases():
    from tessel import kernel

    return {"vote_sync_any": kernel.any_sync, "vote_sync_all": kernel.all_sync, "vote_sync_uni": kernel.eq_sync,
            "vote_sync_ballot": kernel.ballot_sync}

