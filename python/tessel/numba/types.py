"""Numba's type objects for tessel: ``float32``, ``int64``, ..., ``float32[:, ::1]`` and signatures.

``import tessel.numba as numba`` gives ``numba.float32`` etc. (also ``numba.types.float32`` and
``numba.cuda.types.float32``). Each scalar type

- has ``.dtype``, the NumPy dtype (``np.dtype("float32")``; tessel's dtypes compare equal to
  it), ``.tessel_dtype`` (``ts.float32``) and ``.name`` (``"float32"``, Numba's name);
- casts in plain Python as NumPy's scalar types do, with C's wrap-around for integers
  (``int8(300) == np.int8(44)``); inside a kernel the compiler reads the call as a cast;
- makes a signature when called with types: ``float32(float32, int32)``, ``void(float32[:])``;
- makes an array type when indexed with slices: ``float32[:]`` (any layout), ``float32[::1]``
  and ``float32[:, ::1]`` (C-contiguous), ``float32[::1, :]`` (Fortran-contiguous).

:func:`parse_signature` turns what ``cuda.jit`` accepts as a signature (a string such as
``"void(float32[:], float32[:])"``, a :class:`Signature`, or a tuple of argument types) into
``(return type, [argument types])``.
"""
from __future__ import annotations

import ast

import numpy as np

__all__ = [
    "Type", "Number", "Boolean", "Integer", "Float", "Complex", "NoneType", "Array", "Record", "Signature", "BaseTuple",
    "UniTuple", "Tuple",
    "parse_signature", "from_dtype", "typeof",
    "boolean", "bool_", "b1",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "byte", "intc", "uintc", "intp", "uintp",
    "ssize_t", "size_t", "int_", "uint", "long_", "ulong", "longlong", "ulonglong", "short", "ushort",
    "char", "uchar",
    "float16", "float32", "float64", "f2", "f4", "f8", "half", "float_", "double",
    "complex64", "complex128", "c8", "c16", "cfloat", "cdouble",
    "void", "none", "float32x",
]


class Type:
    """Base of the type objects. Types are singletons compared by identity; ``str`` is Numba's name."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __call__(self, *args):
        if all(isinstance(a, Type) for a in args):
            return Signature(self, list(args))
        raise TypeError(f"tessel.numba.{self.name} is not callable with values")

    def __getitem__(self, key):
        raise TypeError(f"{self.name}[...]: only scalar number types make array types")


class NoneType(Type):
    """``void`` / ``none``: the return type of kernels."""

    dtype = None
    tessel_dtype = None


class Number(Type):
    """A scalar type with a NumPy dtype."""

    def __init__(self, name, np_name):
        super().__init__(name)
        self.dtype = np.dtype(np_name)
        self._ts_dtype = self.dtype  # what tessel's kernel compiler reads as the cast's dtype
        self._scalar = self.dtype.type

    @property
    def bitwidth(self):
        return self.dtype.itemsize * 8

    @property
    def tessel_dtype(self):
        import tessel

        return tessel._tessel._dtype_from_name(self.dtype.name)

    def __call__(self, *args):
        if len(args) == 1 and not isinstance(args[0], Type):
            return self.cast(args[0])
        return super().__call__(*args)

    def cast(self, value):
        """The value in this type, as a NumPy scalar (integers wrap around as in C)."""
        if hasattr(value, "__tessel_array__") or type(value).__module__.startswith("tessel"):
            value = np.asarray(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        with np.errstate(all="ignore"):
            if self.dtype.kind in "iu":
                if isinstance(value, (bool, np.bool_)):
                    return self._scalar(int(value))
                if isinstance(value, int):
                    bits = self.bitwidth
                    wrapped = value & ((1 << bits) - 1)
                    if self.dtype.kind == "i" and wrapped >= 1 << (bits - 1):
                        wrapped -= 1 << bits
                    return self._scalar(wrapped)
                if isinstance(value, (float, np.floating)):
                    value = np.float64(value)
                    if not np.isfinite(value):
                        return self._scalar(0)  # undefined in C; NumPy gives an arbitrary value
                    return self.cast(int(value))  # truncation toward zero, then wrap
                return np.asarray(value).astype(self.dtype)[()]
            if self.dtype.kind == "b":
                return np.bool_(bool(value))
            if self.dtype.kind == "f" and isinstance(value, complex):
                raise TypeError(f"{self.name}: cannot cast a complex value to a real type")
            return np.asarray(value).astype(self.dtype)[()]

    def __getitem__(self, key):
        return Array._from_slices(self, key)


class Boolean(Number):
    pass


class Integer(Number):
    @property
    def signed(self):
        return self.dtype.kind == "i"


class Float(Number):
    pass


class Complex(Number):
    @property
    def underlying_float(self):
        """The type of the real and imaginary parts (float32 of complex64), as Numba's."""
        return float32 if self.name == "complex64" else float64


class Record(Type):
    """Numba's record type: the type of a structured NumPy dtype's elements
    (``from_dtype(np.dtype([("x", np.float32), ("y", np.int32)]))``). ``dtype`` is the NumPy dtype,
    ``fields`` {name: (type, offset)}, ``size`` the bytes of a record; ``record[:]`` is the array
    type. Kernels take record arrays (``r[i].x``, ``r[i]['x']``) and records; in a declared
    signature they select launches, and the kernel compiles when launched with them (tessel types
    a record array, its alignment included, when it is launched)."""

    _cache = {}

    def __new__(cls, dtype):
        dtype = np.dtype(dtype)
        if dtype.names is None:
            raise TypeError(f"Record: {dtype} is not a structured dtype")
        found = cls._cache.get(dtype)
        if found is not None:
            return found
        self = object.__new__(cls)
        fields = {}
        for name in dtype.names:
            ftype, offset = dtype.fields[name][:2]
            try:
                item = from_dtype(ftype) if ftype.shape == () else Array(from_dtype(ftype.base), len(ftype.shape), "C")
            except NotImplementedError:
                item = str(ftype)
            fields[name] = (item, int(offset))
        Type.__init__(self, "Record(" + ", ".join(f"{n}: {t}" for n, (t, _) in fields.items()) + ")")
        self.dtype, self.fields, self.size, self.aligned = dtype, fields, dtype.itemsize, bool(dtype.isalignedstruct)
        cls._cache[dtype] = self
        return self

    def __init__(self, *args, **kwargs):
        pass  # set up in __new__ (the instances are cached)

    @property
    def bitwidth(self):
        return self.size * 8

    def __getitem__(self, key):
        return Array._from_slices(self, key)


class Array(Type):
    """Numba's array type: ``Array(float32, 2, "C")`` is what ``float32[:, ::1]`` makes.

    ``dtype`` is the scalar type (as in Numba), ``ndim`` the rank and ``layout`` ``"C"``, ``"F"``
    or ``"A"`` (any strides). ``readonly`` is accepted for compatibility."""

    _cache = {}

    def __new__(cls, dtype, ndim, layout="A", readonly=False):
        if not isinstance(dtype, (Number, Record)):
            raise TypeError(f"Array: the element type must be a scalar number type or a record, got {dtype!r}")
        if layout not in ("C", "F", "A"):
            raise ValueError(f"Array: layout must be 'C', 'F' or 'A', got {layout!r}")
        ndim = int(ndim)
        if ndim < 0:
            raise ValueError("Array: ndim must be >= 0")
        if ndim <= 1 and layout == "F":
            layout = "C"  # Numba: a 1-D (or 0-D) contiguous array is C
        key = (dtype, ndim, layout, bool(readonly))
        cached = cls._cache.get(key)
        if cached is not None:
            return cached
        self = object.__new__(cls)
        kind = "readonly array" if readonly else "array"
        Type.__init__(self, f"{kind}({dtype.name}, {ndim}d, {layout})")
        self.dtype, self.ndim, self.layout, self.readonly = dtype, ndim, layout, bool(readonly)
        cls._cache[key] = self
        return self

    def __init__(self, *args, **kwargs):
        pass  # set up in __new__ (the instances are cached)

    @property
    def np_dtype(self):
        return self.dtype.dtype

    def copy(self, dtype=None, ndim=None, layout=None, readonly=None):
        return Array(self.dtype if dtype is None else dtype, self.ndim if ndim is None else ndim,
                     self.layout if layout is None else layout, self.readonly if readonly is None else readonly)

    def __getitem__(self, key):
        raise TypeError(f"{self.name}: an array type cannot be indexed again")

    @staticmethod
    def _from_slices(dtype, key):
        items = key if isinstance(key, tuple) else (key,)
        if not items:
            raise TypeError(f"{dtype.name}[()]: give one slice per dimension, e.g. {dtype.name}[:, :]")
        unit = []
        for item in items:
            if not isinstance(item, slice) or item.start is not None or item.stop is not None:
                raise TypeError(f"{dtype.name}[...]: each dimension is ':' or '::1', got {item!r}")
            if item.step not in (None, 1):
                raise TypeError(f"{dtype.name}[...]: the step of a dimension can only be 1 ('::1'), got {item.step!r}")
            unit.append(item.step == 1)
        ndim = len(items)
        if not any(unit):
            layout = "A"
        elif sum(unit) > 1:
            raise TypeError(f"{dtype.name}[...]: only the first or the last dimension can be '::1'")
        elif unit[-1]:
            layout = "C"
        elif unit[0]:
            layout = "F"
        else:
            raise TypeError(f"{dtype.name}[...]: '::1' must be the first (Fortran order) or the last (C order) dimension")
        return Array(dtype, ndim, layout)


class BaseTuple(Type):
    """Numba's tuple types: :class:`UniTuple` (``UniTuple(float32, 2)``) and :class:`Tuple`
    (``Tuple((float32, int32))``). ``types`` are the item types; ``len``, iteration and indexing
    reach them. Usable as device function argument and return types and as kernel argument
    types; called with a tuple, each item is cast (in kernels too)."""

    _cache = {}

    @property
    def _ts_tuple_types(self):
        return self.types

    def __len__(self):
        return len(self.types)

    def __iter__(self):
        return iter(self.types)

    def __getitem__(self, index):
        return self.types[index]

    def __call__(self, *args):
        if args and all(isinstance(a, Type) for a in args):
            return Signature(self, list(args))
        if len(args) == 1 and isinstance(args[0], tuple) and len(args[0]) == len(self.types):
            return tuple(t(v) for t, v in zip(self.types, args[0]))
        raise TypeError(f"{self.name}: call it with types (a signature) or with a tuple of {len(self.types)} values")


def _tuple_item(t):
    if not isinstance(t, (Number, BaseTuple)):
        raise TypeError(f"tuple types hold numbers and tuples, got {t!r}")
    return t


class UniTuple(BaseTuple):
    """``UniTuple(dtype, count)``: a tuple of ``count`` items of one type."""

    def __new__(cls, dtype, count):
        dtype, count = _tuple_item(dtype), int(count)
        if count < 0:
            raise ValueError("UniTuple: the count must be >= 0")
        key = ("U", dtype, count)
        found = BaseTuple._cache.get(key)
        if found is not None:
            return found
        self = object.__new__(cls)
        Type.__init__(self, f"UniTuple({dtype.name}, {count})")
        self.dtype, self.count, self.types = dtype, count, (dtype,) * count
        BaseTuple._cache[key] = self
        return self

    def __init__(self, *args, **kwargs):
        pass  # set up in __new__ (the instances are cached)


class Tuple(BaseTuple):
    """``Tuple(types)`` (also ``Tuple(t0, t1, ...)``): a tuple of items of these types; all of one
    type, it is that :class:`UniTuple`, as in Numba."""

    def __new__(cls, *types):
        if len(types) == 1 and not isinstance(types[0], Type):
            types = tuple(types[0])
        types = tuple(_tuple_item(t) for t in types)
        if types and all(t is types[0] for t in types):
            return UniTuple(types[0], len(types))
        key = ("T",) + types
        found = BaseTuple._cache.get(key)
        if found is not None:
            return found
        self = object.__new__(cls)
        Type.__init__(self, f"Tuple({', '.join(t.name for t in types)})")
        self.types = types
        BaseTuple._cache[key] = self
        return self

    def __init__(self, *args, **kwargs):
        pass


class Signature:
    """A function signature: ``return_type`` and ``args`` (a tuple of types).

    ``float32(float32, float32)`` and ``void(float32[:])`` make one; unpacking gives
    ``(return_type, [args])``."""

    __slots__ = ("return_type", "args")

    def __init__(self, return_type, args):
        self.return_type = return_type
        self.args = tuple(args)

    def __iter__(self):
        return iter((self.return_type, list(self.args)))

    def __eq__(self, other):
        return isinstance(other, Signature) and (self.return_type, self.args) == (other.return_type, other.args)

    def __hash__(self):
        return hash((self.return_type, self.args))

    def __repr__(self):
        return f"{self.return_type}({', '.join(map(str, self.args))})"

    __str__ = __repr__


void = NoneType("none")
none = void

boolean = Boolean("bool", "bool")
bool_ = b1 = boolean
int8 = Integer("int8", "int8")
int16 = Integer("int16", "int16")
int32 = Integer("int32", "int32")
int64 = Integer("int64", "int64")
uint8 = Integer("uint8", "uint8")
uint16 = Integer("uint16", "uint16")
uint32 = Integer("uint32", "uint32")
uint64 = Integer("uint64", "uint64")
float16 = Float("float16", "float16")
float32 = Float("float32", "float32")
float64 = Float("float64", "float64")
complex64 = Complex("complex64", "complex64")
complex128 = Complex("complex128", "complex128")

i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
f2, f4, f8 = float16, float32, float64
c8, c16 = complex64, complex128
half = float16
float_ = float32     # Numba's float_ is float32, double float64
double = float64
cfloat, cdouble = complex64, complex128
byte = uint8
char, uchar = int8, uint8
short, ushort = int16, uint16
intc, uintc = int32, uint32
int_ = long_ = longlong = intp = ssize_t = int64
uint = ulong = ulonglong = uintp = size_t = uint64
float32x = float32

_BY_DTYPE = {t.dtype: t for t in (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                                   float16, float32, float64, complex64, complex128)}

# The names a signature string may use: these types plus Numba's spellings.
_NAMESPACE = {name: globals()[name] for name in __all__ if isinstance(globals().get(name), Type)}
_NAMESPACE.update({"Array": Array, "UniTuple": UniTuple, "Tuple": Tuple, "float": float64, "int": int64, "complex": complex128, "bool": boolean,
                   "void": void, "none": void, "None": void})


def from_dtype(dtype):
    """Numba's ``from_dtype``: the scalar type of a NumPy (or tessel) dtype."""
    try:
        key = np.dtype(getattr(dtype, "dtype", dtype) if not isinstance(dtype, (str, type)) else dtype)
    except TypeError:
        key = np.dtype(str(dtype))
    found = _BY_DTYPE.get(key)
    if found is None:
        if key.names is not None:
            return Record(key)
        raise NotImplementedError(f"tessel.numba.from_dtype: no tessel type for the NumPy dtype {key} "
                                  "(numbers and records of them are supported)")
    return found


def typeof(value):
    """Numba's ``typeof`` for the values kernels take: arrays (NumPy, tessel, device arrays,
    ``__cuda_array_interface__`` objects), NumPy scalars and Python bool/int/float/complex."""
    from tessel.kernel._types import python_scalar_dtype

    name = python_scalar_dtype(value)
    if name is not None:
        return from_dtype(np.dtype(name))
    if isinstance(value, np.generic):
        return from_dtype(value.dtype)
    if isinstance(value, tuple):
        return Tuple(tuple(typeof(v) for v in value))
    inner = getattr(value, "__tessel_array__", None)
    if inner is not None:
        return _array_type(value.dtype, value.ndim, value.shape, value.strides)
    if isinstance(value, np.ndarray):
        return _array_type(value.dtype, value.ndim, value.shape, value.strides, readonly=not value.flags.writeable)
    cai = getattr(value, "__cuda_array_interface__", None) if not isinstance(value, type) else None
    if cai is not None:
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = cai.get("strides") or _c_strides(shape, dt.itemsize)
        return _array_type(dt, len(shape), shape, strides)
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "strides"):
        return _array_type(np.dtype(str(value.dtype)), len(value.shape), value.shape, value.strides)
    raise TypeError(f"tessel.numba.typeof: cannot type a {type(value).__name__}")


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _array_type(dtype, ndim, shape, strides, readonly=False):
    itemsize = np.dtype(dtype).itemsize
    shape, strides = tuple(shape), tuple(strides)
    broadcast = 0 in strides and 0 not in shape and any(n > 1 for n in shape)

    def dense(order):
        want = _c_strides(shape, itemsize) if order == "C" else tuple(reversed(_c_strides(tuple(reversed(shape)), itemsize)))
        return all(n <= 1 or s == w for n, s, w in zip(shape, strides, want))

    layout = "A"
    if not broadcast:
        if dense("C"):
            layout = "C"
        elif dense("F"):
            layout = "F"
    return Array(from_dtype(dtype), ndim, layout, readonly)


def _evaluate(node, text):
    """Evaluates the small expression language of signature strings (names, subscripts with
    slices, calls, tuples) without eval."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, text)
    if isinstance(node, ast.Name):
        found = _NAMESPACE.get(node.id)
        if found is None:
            if node.id in _UNSUPPORTED_TYPES:
                raise TypeError(f"signature {text!r}: tessel.numba.types.{node.id} is not supported: "
                                f"{_UNSUPPORTED_TYPES[node.id]}")
            raise TypeError(f"signature {text!r}: unknown type {node.id!r}")
        return found
    if isinstance(node, ast.Constant) and node.value is None:
        return void
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value   # UniTuple(float32, 2)
    if isinstance(node, ast.Attribute):  # types.float32, numba.float32
        return _evaluate(ast.Name(id=node.attr), text)
    if isinstance(node, ast.Subscript):
        base = _evaluate(node.value, text)
        return base[_slice_key(node.slice, text)]
    if isinstance(node, ast.Call):
        func = _evaluate(node.func, text)
        args = [_evaluate(a, text) for a in node.args]
        if func is Array:
            return Array(*args, *[_evaluate_literal(k.value) for k in node.keywords])
        if func is UniTuple or func is Tuple:
            try:
                return func(*args)
            except (TypeError, ValueError) as failure:
                raise TypeError(f"signature {text!r}: {failure}") from None
        if not isinstance(func, Type) or not all(isinstance(a, Type) for a in args):
            raise TypeError(f"signature {text!r}: {ast.unparse(node)} is not a type or a signature")
        return Signature(func, args)
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, text) for e in node.elts)
    raise TypeError(f"signature {text!r}: cannot read {ast.dump(node)}")


def _evaluate_literal(node):
    return ast.literal_eval(node)


def _slice_key(node, text):
    if isinstance(node, ast.Tuple):
        return tuple(_slice_key(e, text) for e in node.elts)
    if isinstance(node, ast.Slice):
        parts = []
        for part in (node.lower, node.upper, node.step):
            parts.append(None if part is None else ast.literal_eval(part))
        return slice(*parts)
    if isinstance(node, ast.Constant):
        return node.value
    raise TypeError(f"signature {text!r}: an array dimension is ':' or '::1'")


def parse_type(text):
    """A type from its Numba spelling: ``"float32"``, ``"int64[:, ::1]"``."""
    result = _evaluate(ast.parse(text.strip(), mode="eval"), text)
    if not isinstance(result, Type):
        raise TypeError(f"{text!r} is not a type")
    return result


def parse_signature(sig):
    """``(return type, [argument types])`` of a ``cuda.jit`` signature.

    ``sig`` is a string (``"void(float32[:], float32[:])"``, ``"float32(float32, int32)"``, or
    ``"(float32[:], int64)"`` meaning a void return), a :class:`Signature`
    (``void(float32[:])``), or a tuple/list of argument types (the return type is then ``None``:
    inferred, or void for kernels)."""
    if isinstance(sig, Signature):
        return sig.return_type, list(sig.args)
    if isinstance(sig, (tuple, list)):
        args = [parse_type(a) if isinstance(a, str) else a for a in sig]
        for a in args:
            if not isinstance(a, Type):
                raise TypeError(f"signature: {a!r} is not a type")
        return None, args
    if isinstance(sig, str):
        text = sig.strip()
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as error:
            raise TypeError(f"signature {sig!r} is not valid: {error.msg}") from None
        result = _evaluate(tree, sig)
        if isinstance(result, Signature):
            return result.return_type, list(result.args)
        if isinstance(result, tuple):  # "(float32[:], int32)"
            return None, list(result)
        if isinstance(result, Type):  # "(float32[:])" reads as the type itself: one argument
            return None, [result]
        raise TypeError(f"signature {sig!r} is not a signature")
    raise TypeError(f"signature: expected a string, a Signature or a tuple of types, got {type(sig).__name__}")


_POINTERS = ("pointer arguments are not supported: pass the array itself (kernels take device and NumPy "
             "arrays, numbers, tuples and record arrays)")
_UNSUPPORTED_TYPES = {"CPointer": _POINTERS, "voidptr": _POINTERS, "RawPointer": _POINTERS, "MemInfoPointer": _POINTERS,
                      "Opaque": "opaque types are not supported",
                      "NPDatetime": "datetime64 is not supported in kernels; pass int64 (a.astype('int64'))",
                      "NPTimedelta": "timedelta64 is not supported in kernels; pass int64 (a.astype('int64'))",
                      "Optional": "optional types are not supported", "optional": "optional types are not supported",
                      "Literal": "literal types are not supported", "IntegerLiteral": "literal types are not supported",
                      "StringLiteral": "strings are not supported in kernels",
                      "unicode_type": "strings are not supported in kernels",
                      "List": "lists are not supported in kernels", "ListType": "lists are not supported in kernels",
                      "DictType": "dictionaries are not supported in kernels"}


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'tessel.numba.types' has no attribute {name!r}")
    from ._cuda import _unsupported

    reason = _UNSUPPORTED_TYPES.get(name, "it is not one of Numba's types that tessel.numba provides "
                                          "(see docs/guide/numba.rst)")
    raise _unsupported.error(name, reason, prefix="tessel.numba.types")
