"""Kernels and device functions: argument types at the call, one compile per signature, launch on
tessel's launch path (CUDA through RawKernel's, the CPU through the host compiler's)."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _compiler
from ._types import NUMBER_RULES, ArrayT, Scalar, TupleT, python_scalar_dtype, scalar_from_dtype

_ts = None


def _tessel():
    global _ts
    if _ts is None:
        import tessel
        _ts = tessel
    return _ts


# -ffast-math's parts, not the flag itself: with -ffast-math (or -Ofast, -funsafe-math-optimizations)
# GCC links crtfastmath.o into the shared object, which turns on flush-to-zero for the whole
# process when it is loaded (NumPy would then lose subnormals).
_HOST_FASTMATH = ("-fno-math-errno", "-ffinite-math-only", "-fno-signed-zeros", "-fno-trapping-math",
                  "-fassociative-math", "-freciprocal-math", "-fcx-limited-range", "-ffp-contract=fast")


def _env_debug() -> bool:
    """Bounds checks for every kernel: TESSEL_CHECK=bounds (or all), or ts.set_checks("bounds")."""
    v = os.environ.get("TESSEL_CHECK", "")
    if any(p.strip() in ("1", "all", "bounds") for p in v.split(",")):
        return True
    checks = _tessel().checks()
    return "bounds" in checks or "all" in checks


class DeviceFunction:
    """A Python function callable from kernels (``@jit(device=True)``); inlined at each call.

    Overloads by type: ``f.overload(other_function)`` adds a Python function tried when the
    argument count differs (the first whose parameter count matches is used)."""

    def __init__(self, py_func, options):
        self.py_func = py_func
        self.options = options
        self.overloads = [py_func]
        functools.update_wrapper(self, py_func)

    def overload(self, fn):
        self.overloads.append(fn)
        return self

    @property
    def numbers(self) -> str:
        """The number rules its body is typed by (jit's ``numbers``), whatever kernel calls it."""
        return self.options.get("numbers", "numpy")

    def select(self, types):
        import inspect
        for fn in self.overloads:
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                continue
            required = sum(1 for p in params if p.default is p.empty)
            if required <= len(types) <= len(params):
                return fn
        return self.py_func

    def __call__(self, *args, **kwargs):
        # Outside kernels, a device function is plain Python (useful for tests and the CPU).
        return self.py_func(*args, **kwargs)

    def __repr__(self):
        return f"<tessel device function {self.py_func.__qualname__}>"


class _Specialization:
    __slots__ = ("arg_types", "target", "source", "symbol", "raw", "host", "info", "options", "debug")

    def __init__(self, arg_types, target, source, symbol, info):
        self.arg_types = arg_types
        self.target = target
        self.source = source
        self.symbol = symbol
        self.info = info
        self.raw = None
        self.host = None


def _cuda_options(opts):
    """NVRTC's options for a kernel's compile options (lineinfo, fastmath, max_registers)."""
    # -minimal: no texture, surface or device-runtime declarations, which generated kernels never use,
    # so NVRTC parses less.
    options = ["-minimal"]
    if opts.get("lineinfo"):
        options.append("-lineinfo")
    if opts.get("fastmath"):
        options.append("--use_fast_math")
    if opts.get("max_registers"):
        options.append(f"--maxrregcount={int(opts['max_registers'])}")
    return options


def _symbol_for(name: str, arg_types, target: str) -> str:
    h = hashlib.sha1(repr((name, arg_types, target)).encode()).hexdigest()[:12]
    clean = "".join(ch if ch.isalnum() else "_" for ch in name)
    return f"tsk_{clean}_{h}"


class _Arg:
    """One launch argument after conversion: its type, the tessel array (or scalar) and what to
    do after the launch (copy a NumPy array back). A tuple has ``items`` (its converted items);
    a record array also has ``record`` (its structured NumPy dtype)."""
    __slots__ = ("type", "array", "value", "copy_back", "items", "record", "names", "one_record")

    def __init__(self, type_, array=None, value=None, copy_back=None, items=None, record=None, names=None,
                 one_record=False):
        self.type = type_
        self.array = array
        self.value = value
        self.copy_back = copy_back
        self.items = items
        self.record = record
        self.names = names   # a namedtuple's field names
        self.one_record = one_record   # a single record (np.void): copied in, and its fields back

    def leaves(self):
        """The arguments a tuple flattens into (itself when it is not a tuple)."""
        if self.items is None:
            return [self]
        return [leaf for item in self.items for leaf in item.leaves()]


class RecordArray:
    """A record (structured dtype) array as a kernel argument: ``storage`` is a tessel array whose
    last axis holds each record (its bytes as uint8, or its fields when they share one type, as
    tessel.numba's device arrays hold them), ``dtype`` the structured NumPy dtype. Kernels read
    fields as ``r[i].x`` or ``r[i]['x']`` and view a field as ``r['x']``."""

    __slots__ = ("storage", "dtype")

    def __init__(self, storage, dtype):
        dtype = np.dtype(dtype)
        if dtype.names is None:
            raise TypeError(f"RecordArray: {dtype} is not a structured dtype")
        if storage.ndim < 1 or storage.shape[-1] * storage.itemsize != dtype.itemsize:
            raise ValueError(f"RecordArray: a storage array of shape {tuple(storage.shape)} and item size "
                             f"{storage.itemsize} does not hold records of {dtype.itemsize} bytes")
        self.storage = storage
        self.dtype = dtype

    @property
    def shape(self):
        return tuple(self.storage.shape[:-1])

    @property
    def device(self):
        return self.storage.device

    def __repr__(self):
        return f"RecordArray(shape={self.shape}, dtype={self.dtype})"


def record_bytes_view(host: np.ndarray) -> np.ndarray:
    """The bytes of a structured NumPy array as a uint8 view of shape ``host.shape + (itemsize,)``
    (any strides)."""
    iface = dict(host.__array_interface__)
    iface["typestr"] = "|u1"
    iface["descr"] = [("", "|u1")]
    iface["shape"] = tuple(host.shape) + (host.dtype.itemsize,)
    iface["strides"] = tuple(host.strides) + (1,)

    class _Interface:
        __array_interface__ = iface
        base = host

    return np.asarray(_Interface())


def _record_type(dtype: np.dtype, storage, what: str):
    """The compiler's RecordT of a structured dtype held in `storage` (a tessel array)."""
    from ._types import RecordT
    fields = []
    for name in dtype.names:
        ftype, offset = dtype.fields[name][:2]
        base, shape = ftype.base, tuple(ftype.shape)
        if base.names is not None or base.kind not in "biufc" or base.byteorder == ">":
            raise TypeError(f"{what}: the record field {name!r} has dtype {ftype}; kernels read fields that are "
                            "numbers or arrays of numbers (native byte order)")
        fields.append((name, scalar_from_dtype(base), shape, int(offset)))
    item = storage.itemsize
    if storage.strides[-1] != item:
        raise ValueError(f"{what}: the records' storage is not contiguous within a record")
    ptr = storage.data_ptr if not callable(storage.data_ptr) else storage.data_ptr()
    align = 16
    for v in [ptr] + [abs(int(st)) for st, n in zip(storage.strides[:-1], storage.shape[:-1]) if n > 1]:
        while align > 1 and v % align:
            align //= 2
    descr = ", ".join(f"{n}: {dtype.fields[n][0]}" for n in dtype.names)
    return RecordT(tuple(fields), int(dtype.itemsize), scalar_from_dtype(storage.dtype), align, descr)


def _scalar_arg(v):
    if isinstance(v, np.bool_):
        return _Arg(Scalar("bool"), value=bool(v))
    name = python_scalar_dtype(v)
    if name is not None:
        return _Arg(Scalar(name), value=v)
    if isinstance(v, np.generic):
        return _Arg(scalar_from_dtype(v.dtype), value=v)
    return None


def _settle_tuple_types(c: "_Arg"):
    if c.items is not None:
        for item in c.items:
            _settle_tuple_types(item)
        c.type = TupleT(tuple(item.type for item in c.items), c.names)


def _array_type(a) -> ArrayT:
    t = scalar_from_dtype(a.dtype)
    return ArrayT(t, a.ndim, "C" if a.is_contiguous() else "A")


class Kernel:
    """A Python function compiled into a kernel (``@tessel.jit``).

    ``k[grid, block](*args)``, ``k[grid, block, stream]``, ``k[grid, block, stream, shared_bytes]``;
    ``k.forall(n)(*args)`` picks the launch shape for n threads. Each argument-type signature is
    compiled once per backend (and cached on disk)."""

    def __init__(self, py_func, options):
        self.py_func = py_func
        self.options = dict(options)
        self._specs: Dict[Any, _Specialization] = {}
        self._lock = threading.Lock()
        self._launcher = None       # the C++ launch path, made on the first launch
        self._configs = {}          # (grid, block, stream, shared) -> its configured launch
        self._raw_configs = {}      # kernel[...]'s argument, when hashable and without a stream object
        functools.update_wrapper(self, py_func)

    # ---- launch configuration -------------------------------------------------------------------
    def __getitem__(self, config):
        try:
            c = self._raw_configs.get(config)
        except TypeError:   # an unhashable config (a list): validated below every time
            c = None
        if c is not None:
            return c
        configured = self._validate_config(config)
        try:
            if len(self._raw_configs) > 256:
                self._raw_configs.clear()
            if len(config) < 3 or isinstance(config[2], (int, type(None))):
                self._raw_configs[config] = configured
        except TypeError:
            pass
        return configured

    def _validate_config(self, config):
        if not isinstance(config, tuple):
            config = (config,)
        if not 2 <= len(config) <= 4:
            raise ValueError(f"kernel '{self.__name__}': launch with kernel[grid, block], "
                             f"[grid, block, stream] or [grid, block, stream, shared_bytes]; got {len(config)} values")
        grid = _dim3(config[0], "grid", self.__name__)
        block = _dim3(config[1], "block", self.__name__)
        stream = config[2] if len(config) > 2 else None
        shared = config[3] if len(config) > 3 else 0
        if not isinstance(shared, (int, np.integer)) or shared < 0:
            raise ValueError(f"kernel '{self.__name__}': shared_bytes must be a non-negative int, got {shared!r}")
        return self._configured(grid, block, stream, int(shared))

    def _configured(self, grid, block, stream, shared):
        key = (grid, block, id(stream) if stream is not None else None, shared)
        c = self._configs.get(key)
        if c is None or c[1] is not stream:
            from .. import _tessel as core
            if self._launcher is None:
                self._launcher = core._KernelLauncher(self)
            c = (core._configure_launch(self._launcher, list(grid), list(block), stream, shared), stream)
            if len(self._configs) > 256:
                self._configs.clear()
            self._configs[key] = c
        return c[0]

    def forall(self, ntasks, tpb=0, stream=None, sharedmem=0):
        if not isinstance(ntasks, (int, np.integer)) or ntasks < 0:
            raise ValueError(f"kernel '{self.__name__}': forall(n) needs a non-negative int, got {ntasks!r}")
        block = int(tpb) if tpb else 256
        grid = max(1, (int(ntasks) + block - 1) // block)
        return self._configured((grid, 1, 1), (block, 1, 1), stream, int(sharedmem))

    def __call__(self, *args, **kwargs):
        raise TypeError(f"kernel '{self.__name__}' needs a launch configuration: "
                        f"{self.__name__}[blocks, threads](...)")

    # ---- compilation ---------------------------------------------------------------------------------
    def _convert_args(self, args, device_hint=None):
        ts = _tessel()
        state = {"device": None}   # the device of the array arguments

        def place(a, what):
            """Checks that array a is on the same device as the earlier array arguments."""
            dev = a.device
            if state["device"] is None:
                state["device"] = dev
            elif dev != state["device"]:
                raise ValueError(f"kernel '{self.__name__}': {what} is on {dev} but earlier array arguments "
                                 f"are on {state['device']}")

        def convert(a, what):
            """An argument's _Arg (a NumPy array is placed on the device once that is known)."""
            if isinstance(a, int) and not -2**63 <= a < 2**64:
                raise OverflowError(f"kernel '{self.__name__}': {what} is the Python int {a}, which neither int64 "
                                    "nor uint64 holds")
            if isinstance(a, np.void) and a.dtype.names is not None:
                # a single record, as Numba passes it: a copy on the device, written back field by field
                return _Arg(None, value=np.array(a).reshape(1), record=a.dtype, copy_back=a, one_record=True)
            s_ = _scalar_arg(a)
            if s_ is not None:
                return s_
            if isinstance(a, tuple):
                fields = getattr(type(a), "_fields", None)
                return _Arg(None, items=[convert(x, f"{what}[{k}]") for k, x in enumerate(a)],
                            names=tuple(fields) if isinstance(fields, tuple) and len(fields) == len(a) else None)
            if isinstance(a, RecordArray):
                place(a.storage, what)
                return _Arg(None, array=a.storage, record=a.dtype)
            inner = getattr(a, "__tessel_array__", None)
            if inner is not None:
                a = inner
            if isinstance(a, ts.Array):
                place(a, what)
                return _Arg(_array_type(a), array=a)
            if isinstance(a, np.ndarray):
                return _Arg(None, value=a)   # placed once the device is known
            if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__"):
                try:
                    arr = ts.from_dlpack(a) if hasattr(a, "__dlpack__") else ts.asarray(a)
                except Exception as e:  # noqa: BLE001 - reported with the kernel's name
                    raise TypeError(f"kernel '{self.__name__}': {what} ({type(a).__name__}) could not be "
                                    f"viewed as an array: {e}") from None
                place(arr, what)
                return _Arg(_array_type(arr), array=arr)
            if a is None:
                raise TypeError(f"kernel '{self.__name__}': {what} is None; kernels take arrays, numbers and "
                                "tuples (a parameter whose default is None may be left out)")
            raise TypeError(f"kernel '{self.__name__}': {what} has type {type(a).__name__}; kernels take "
                            "arrays (tessel, NumPy, CuPy, PyTorch...), numbers and tuples of those")

        converted = [convert(a, f"argument {i}") for i, a in enumerate(args)]
        device = state["device"]
        if device is None:
            device = device_hint if device_hint is not None else ts.default_device()
        for i, top in enumerate(converted):
            for c in top.leaves():
                if c.type is None and c.array is None and isinstance(c.value, np.ndarray):
                    # a NumPy array: to the device, and back after the kernel
                    host = c.value
                    if host.dtype.names is not None:
                        c.record = host.dtype
                        host = record_bytes_view(host)
                        if c.one_record:
                            host = host.reshape(-1)
                    elif host.dtype.kind not in "biufc":
                        raise TypeError(f"kernel '{self.__name__}': argument {i} has dtype {host.dtype}")
                    arr = ts.asarray(host, device=device)
                    c.array = arr
                    if host.flags.writeable and not c.one_record:
                        c.copy_back = host
                    c.value = None
                if c.record is not None:
                    rt = _record_type(c.record, c.array, f"kernel '{self.__name__}', argument {i}")
                    c.type = rt if c.one_record else ArrayT(rt, c.array.ndim - 1, "A")
                elif c.type is None and c.array is not None:
                    c.type = _array_type(c.array)
            _settle_tuple_types(top)
        return converted, device

    def _specialization(self, arg_types, device):
        """The generated source and compile options for these argument types on this backend."""
        target = "cuda" if device.type == "cuda" else "cpu"
        opts = self._compile_options()
        key = (arg_types, target, bool(opts.get("debug")))
        spec = self._specs.get(key)
        if spec is not None:
            return spec
        with self._lock:
            spec = self._specs.get(key)
            if spec is not None:
                return spec
            symbol = _symbol_for(self.py_func.__qualname__, arg_types, target)
            source, info = _compiler.generate(self.py_func, list(arg_types), target, opts, symbol)
            spec = _Specialization(arg_types, target, source, symbol, info)
            if target == "cuda":
                spec.options = _cuda_options(opts)
            else:
                # without fastmath, no contraction of a*b+c into an FMA: the CPU's results are then
                # NumPy's, and do not depend on the machine
                spec.options = list(_HOST_FASTMATH) if opts.get("fastmath") else ["-ffp-contract=off"]
            spec.debug = bool(opts.get("debug"))
            self._specs[key] = spec
            return spec

    def _compile_entry(self, args, device_name):
        """For the C++ launch path: (target, source, symbol, options) of these arguments' kernel, or
        None when their launches must take the Python path (debug mode)."""
        converted, device = self._convert_args(args)
        spec = self._specialization(tuple(c.type for c in converted), device)
        if spec.debug:
            return None
        return (spec.target, spec.source, spec.symbol, list(spec.options), bool(spec.info.get("grid_sync")))

    def _compile_options(self):
        opts = dict(self.options)
        if opts.get("debug") is None:
            opts["debug"] = _env_debug()
        return opts

    def source(self, *args, target=None):
        """The generated C++ for these arguments (``target``: "cuda" or "cpu"; default: where the
        arguments are)."""
        converted, device = self._convert_args(args)
        tgt = target or ("cuda" if device.type == "cuda" else "cpu")
        types = tuple(c.type for c in converted)
        return _compiler.generate(self.py_func, list(types), tgt, self._compile_options(),
                                  _symbol_for(self.py_func.__qualname__, types, tgt))[0]

    def ptx(self, *args, arch=None):
        """The PTX NVRTC makes of this kernel for these arguments (``arch``: "sm_90", ...; default:
        the current CUDA device's, or sm_90 without one). For reading: launches use the CUBIN."""
        converted, device = self._convert_args(args)
        types = tuple(c.type for c in converted)
        opts = self._compile_options()
        symbol = _symbol_for(self.py_func.__qualname__, types, "cuda")
        source, _ = _compiler.generate(self.py_func, list(types), "cuda", opts, symbol)
        from .. import _tessel as core
        return core._compile_ptx(source, symbol, [], arch or "")

    def inspect_types(self):
        """The compiled signatures: one tuple of argument types per specialization."""
        return [tuple(str(t) for t in k[0]) + (k[1],) for k in self._specs]

    @property
    def signatures(self):
        return [k[0] for k in self._specs]

    def _launch(self, grid, block, stream, shared, args):
        ts = _tessel()
        converted, device = self._convert_args(args)
        arg_types = tuple(c.type for c in converted)
        spec = self._specialization(arg_types, device)
        nthreads = block[0] * block[1] * block[2]
        if spec.target == "cuda" and spec.info.get("grid_sync"):
            if any(c.items is not None or c.record is not None for c in converted):
                raise NotImplementedError(f"kernel '{self.__name__}': a grid-synchronizing kernel on CUDA takes "
                                          "arrays and numbers (not tuples or record arrays)")
            if spec.debug:
                raise ValueError(f"kernel '{self.__name__}': debug mode does not check grid-synchronizing kernels "
                                 "on CUDA; run it on the CPU backend to check its indices")
            # the C++ launch path checks that the grid fits and gives the barrier its counter
            self._configured(grid, block, stream, shared)(
                *[c.array if c.array is not None else c.value for c in converted])
        elif spec.target == "cuda":
            self._launch_cuda(spec, grid, block, stream, shared, converted, device)
        else:
            if nthreads > 1024:
                raise ValueError(f"kernel '{self.__name__}': block {block} has {nthreads} threads; the most is 1024")
            params = []
            for c in converted:
                for leaf in c.leaves():
                    params += _pack_host(leaf)
            if spec.host is None:
                from .. import _tessel as core
                spec.host = core._get_host_kernel(spec.source, spec.symbol, spec.options)
            try:
                spec.host.launch(grid, block, shared, params)
            except Exception as e:  # noqa: BLE001
                raise self._debug_error(e, spec) from None
        for c in (leaf for top in converted for leaf in top.leaves()):
            if c.copy_back is not None:
                data = c.array.numpy() if hasattr(c.array, "numpy") else np.asarray(c.array)
                if c.one_record:
                    _write_record(c.copy_back, data)
                else:
                    np.copyto(c.copy_back, data)

    def _launch_cuda(self, spec, grid, block, stream, shared, converted, device):
        ts = _tessel()
        flat = []
        for c in (leaf for top in converted for leaf in top.leaves()):
            if c.array is not None:
                flat.append(c.array)
                item = c.array.itemsize
                flat += [np.int64(s) for s in c.array.shape]
                for st in c.array.strides:
                    if st % item:
                        raise ValueError(f"kernel '{self.__name__}': an array's strides {c.array.strides} are not "
                                         f"multiples of its item size {item}")
                flat += [np.int64(st // item) for st in c.array.strides]
            else:
                flat.append(_numpy_scalar(c.value, c.type))
        record = None
        if spec.debug:
            record = ts.zeros(16, dtype=ts.int64, device=device)
            flat.append(record)
        if spec.raw is None:
            spec.raw = ts.RawKernel(spec.source, spec.symbol, tuple(spec.options))
        kwargs = {"shared_mem": shared}
        if stream is not None and stream != 0:
            kwargs["stream"] = _as_stream(stream)
        spec.raw(grid, block, tuple(flat), **kwargs)
        if record is not None:
            r = record.numpy()
            if r[0] & 0xffffffff:
                raise self._index_error_from_record(r.tobytes(), spec)

    def _debug_error(self, e, spec):
        # the same exception types on every backend as the CUDA path raises: IndexError, and the
        # exceptions the kernel raises
        raised = re.search(r"exception (\d+) raised in thread \((\d+), (\d+), (\d+)\) of block "
                           r"\((\d+), (\d+), (\d+)\)", str(e))
        if raised is not None:
            k, *coords = (int(x) for x in raised.groups())
            return self._raised(spec, k, tuple(coords[:3]), tuple(coords[3:]))
        if isinstance(e, IndexError) and type(e) is not IndexError:
            return IndexError(str(e))
        return e

    def _raised(self, spec, k, thread, block):
        """The exception a kernel's raise (or failed assert) made, in debug mode."""
        cls, msg, line = spec.info["raises"][k]
        text = f"kernel '{self.__name__}' ({self._filename()}:{line}), in thread {thread} of block {block}"
        text += f": {msg}" if msg is not None else ""
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - an exception class that takes no message
            return RuntimeError(f"{cls.__name__}: {text}")

    def _index_error_from_record(self, raw: bytes, spec):
        a = np.frombuffer(raw[:64], dtype=np.int32, count=4)
        rest = np.frombuffer(raw[16:16 + 8 * 8], dtype=np.int64)
        line, array, dim = int(a[1]), int(a[2]), int(a[3])
        index, extent = int(rest[0]), int(rest[1])
        thread, blk = tuple(int(x) for x in rest[2:5]), tuple(int(x) for x in rest[5:8])
        if dim == -1:   # a raise
            return self._raised(spec, array, thread, blk)
        names = spec.info.get("array_names", [])
        name = names[array] if 0 <= array < len(names) else "?"
        return IndexError(f"kernel '{self.__name__}' ({self._filename()}:{line}): index {index} is out of bounds "
                          f"for axis {dim} with size {extent} of array '{name}', in thread {thread} of block {blk}")

    def _filename(self):
        import inspect
        try:
            return inspect.getsourcefile(self.py_func)
        except TypeError:
            return "<unknown>"

    def __repr__(self):
        return f"<tessel kernel {self.py_func.__qualname__}>"


def _write_record(rec: np.void, data: np.ndarray):
    """A single record argument's fields, from the bytes the kernel left."""
    new = np.ascontiguousarray(data).view(rec.dtype)[0]
    try:
        for name in rec.dtype.names:
            rec[name] = new[name]
    except (ValueError, TypeError):   # a read-only record: nothing to write back
        pass


def _numpy_scalar(v, t: Scalar):
    name = "float32" if t.name == "bfloat16" else t.name
    return np.dtype(name).type(v)


def _pack_host(c: _Arg):
    """The packed bytes of one argument for the CPU entry (data, shape..., strides... / value)."""
    if c.array is not None:
        a = c.array
        item = a.itemsize
        out = [np.uint64(a.data_ptr).tobytes() if not callable(a.data_ptr) else np.uint64(a.data_ptr()).tobytes()]
        out += [np.int64(s).tobytes() for s in a.shape]
        for st in a.strides:
            if st % item:
                raise ValueError(f"an array's strides {a.strides} are not multiples of its item size {item}")
        out += [np.int64(st // item).tobytes() for st in a.strides]
        return out
    t = c.type
    if t.name == "bfloat16":
        raise TypeError("bfloat16 scalar arguments are not supported; pass a float")
    return [np.dtype(t.name).type(c.value).tobytes()]


def _as_stream(stream):
    ts = _tessel()
    if isinstance(stream, ts.Stream):
        return stream
    inner = getattr(stream, "__tessel_stream__", None)
    if inner is not None:
        return inner
    return stream


def _dim3(v, what, name) -> Tuple[int, int, int]:
    if isinstance(v, (int, np.integer)):
        dims = [int(v)]
    elif isinstance(v, (tuple, list)) and 1 <= len(v) <= 3 and all(isinstance(x, (int, np.integer)) for x in v):
        dims = [int(x) for x in v]
    elif hasattr(v, "x") and hasattr(v, "y"):
        dims = [int(v.x), int(v.y), int(getattr(v, "z", 1))]
    else:
        raise ValueError(f"kernel '{name}': {what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    dims += [1] * (3 - len(dims))
    if any(d <= 0 for d in dims):
        raise ValueError(f"kernel '{name}': {what} {tuple(dims)} has a zero or negative size")
    if what == "block":
        n = dims[0] * dims[1] * dims[2]
        if n > 1024 or dims[2] > 64:
            raise ValueError(f"kernel '{name}': block {tuple(dims)} has {n} threads; the most is 1024 "
                             "(and 64 along z)")
    else:
        if dims[0] >= 2**31 or dims[1] > 65535 or dims[2] > 65535:
            raise ValueError(f"kernel '{name}': grid {tuple(dims)} exceeds (2^31-1, 65535, 65535)")
    return tuple(dims)


def jit(func=None, *, device=False, inline=False, fastmath=False, debug=None, lineinfo=False, cache=True,
        max_registers=None, opt=True, numbers="numpy", **unknown):
    """Compiles a Python function into a kernel (or, with ``device=True``, a device function).

    No type annotations: the types come from the arguments of each launch, and each new
    combination compiles once. ``numbers`` picks the typing of numbers: ``"numpy"`` (NumPy 2's
    rules: a Python literal takes the other operand's type) or ``"numba"`` (Numba's: literals are
    int64/float64, integers compute in 64 bits; what ``tessel.numba`` uses)."""
    if unknown:
        raise TypeError(f"tessel.jit: unknown option(s) {', '.join(sorted(unknown))}")
    if numbers not in NUMBER_RULES:
        raise ValueError(f"tessel.jit: numbers must be one of {', '.join(map(repr, NUMBER_RULES))}, got {numbers!r}")
    options = dict(fastmath=fastmath, debug=debug, lineinfo=lineinfo, cache=cache, max_registers=max_registers,
                   inline=inline, opt=opt, numbers=numbers)

    def wrap(f):
        if not callable(f):
            raise TypeError(f"tessel.jit decorates a function, got {f!r}")
        if device:
            return DeviceFunction(f, options)
        return Kernel(f, options)

    if func is not None:
        return wrap(func)
    return wrap
