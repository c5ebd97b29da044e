"""Types of the kernel language: scalars (tessel's dtypes), arrays, tuples, and the promotion of
numbers: NumPy 2's (tessel's kernels) or Numba's (tessel.numba's)."""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

# dtype name -> (C++ type in runtime.h, itemsize, kind); kind: b bool, i signed, u unsigned,
# f float, c complex.
SCALARS = {
    "bool": ("bool", 1, "b"),
    "int8": ("ts::i8", 1, "i"),
    "int16": ("ts::i16", 2, "i"),
    "int32": ("ts::i32", 4, "i"),
    "int64": ("ts::i64", 8, "i"),
    "uint8": ("ts::u8", 1, "u"),
    "uint16": ("ts::u16", 2, "u"),
    "uint32": ("ts::u32", 4, "u"),
    "uint64": ("ts::u64", 8, "u"),
    "float16": ("ts::f16", 2, "f"),
    "bfloat16": ("ts::bf16", 2, "f"),
    "float32": ("float", 4, "f"),
    "float64": ("double", 8, "f"),
    "complex64": ("ts::c64", 8, "c"),
    "complex128": ("ts::c128", 16, "c"),
}


@dataclass(frozen=True)
class Scalar:
    name: str            # a key of SCALARS
    weak: bool = False   # a Python literal (NEP 50: takes the other operand's precision)

    @property
    def ctype(self) -> str:
        return SCALARS[self.name][0]

    @property
    def kind(self) -> str:
        return SCALARS[self.name][2]

    @property
    def itemsize(self) -> int:
        return SCALARS[self.name][1]

    def strong(self) -> "Scalar":
        return Scalar(self.name) if self.weak else self

    def __str__(self) -> str:
        return self.name + (" (Python literal)" if self.weak else "")


@dataclass(frozen=True)
class RecordT:
    """The element type of a record (structured dtype) array: its fields (name, scalar type, shape
    of a subarray field or (), byte offset), its size in bytes, the scalar type of the storage array
    the kernel receives (the records' bytes, or their one field type), and ``align``: the largest
    power of two (at most 16) dividing the array's address and byte strides (which fields can be
    read in place; the others are read and written byte by byte)."""
    fields: Tuple[Tuple[str, "Scalar", Tuple[int, ...], int], ...]
    itemsize: int
    storage: "Scalar"
    align: int = 1
    descr: str = ""

    @property
    def ctype(self) -> str:
        return "unsigned char*"     # a record in a kernel: the address of its first byte

    @property
    def name(self) -> str:
        return f"Record({self.descr})"

    @property
    def kind(self) -> str:
        return "V"

    def field(self, name):
        for f in self.fields:
            if f[0] == name:
                return f
        return None

    def in_place(self, f) -> bool:
        """Whether field f can be read and written through a typed pointer (it is aligned)."""
        a = field_alignment(f[1])
        return self.align % a == 0 and f[3] % a == 0

    def __str__(self) -> str:
        return f"Record({self.descr})"


def field_alignment(t: "Scalar") -> int:
    return t.itemsize // 2 if t.kind == "c" else t.itemsize


@dataclass(frozen=True)
class ArrayT:
    dtype: Scalar
    ndim: int
    layout: str = "A"                  # "C": C-contiguous, "A": any strides
    space: str = "global"              # global, shared, local, const
    static_shape: Optional[Tuple[int, ...]] = None   # shared/local/const arrays: a C pointer

    @property
    def is_static(self) -> bool:
        return self.static_shape is not None

    @property
    def is_record(self) -> bool:
        return isinstance(self.dtype, RecordT)

    @property
    def storage_ndim(self) -> int:
        """The rank of the array the kernel receives (a record array's storage has one more axis)."""
        return self.ndim + 1 if self.is_record else self.ndim

    @property
    def storage_ctype(self) -> str:
        return self.dtype.storage.ctype if self.is_record else self.dtype.ctype

    @property
    def ctype(self) -> str:
        if self.is_static:
            return "unsigned char*" if self.is_record else f"{self.dtype.ctype}*"
        return f"ts::Arr<{self.storage_ctype}, {self.storage_ndim}>"

    def __str__(self) -> str:
        if self.is_record:
            return f"array({self.dtype}, {self.ndim}d)"
        if self.is_static:
            return f"{self.space} array({self.dtype.name}, shape={self.static_shape})"
        return f"array({self.dtype.name}, {self.ndim}d, {self.layout})"


@dataclass(frozen=True)
class TupleT:
    items: Tuple
    names: Optional[Tuple[str, ...]] = None   # a namedtuple's field names

    def __str__(self) -> str:
        return "tuple(" + ", ".join(str(t) for t in self.items) + ")"


@dataclass(frozen=True)
class NoneT:
    def __str__(self) -> str:
        return "none"


BOOL = Scalar("bool")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
UINT32 = Scalar("uint32")
UINT64 = Scalar("uint64")
FLOAT32 = Scalar("float32")
FLOAT64 = Scalar("float64")
COMPLEX128 = Scalar("complex128")
WEAK_INT = Scalar("int64", weak=True)
WEAK_FLOAT = Scalar("float64", weak=True)
WEAK_COMPLEX = Scalar("complex128", weak=True)
WEAK_BOOL = Scalar("bool", weak=True)

_NP = {n: np.dtype(n) for n in SCALARS if n != "bfloat16"}
_WEAK_VALUE = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def python_scalar_dtype(value):
    """The dtype name of a Python number as a kernel argument, as Numba's typeof gives it: bool,
    int64 (uint64 for the ints only it holds), float64, complex128; None for anything else."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "uint64" if 2**63 <= value < 2**64 else "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, complex):
        return "complex128"
    return None


def scalar_from_dtype(dtype) -> Scalar:
    """A Scalar for a NumPy/tessel dtype, dtype name or scalar type."""
    name = getattr(dtype, "name", None)
    if name is None or not isinstance(name, str):
        name = getattr(dtype, "__name__", None) if isinstance(dtype, type) else None
        if name is None:
            name = str(dtype)
    name = {"bool_": "bool", "float": "float64", "int": "int64", "complex": "complex128"}.get(name, name)
    if name not in SCALARS:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"{dtype!r} is not a dtype tessel kernels support") from None
    if name not in SCALARS:
        raise TypeError(f"dtype {name} is not supported in tessel kernels")
    return Scalar(name)


def _np_operand(t: Scalar):
    if t.weak:
        return _WEAK_VALUE[t.kind]
    return _NP["float16" if t.name == "bfloat16" else t.name]


# The number rules of the function being typed: NumPy 2's (False) or Numba's (True). Each function
# is typed by its own (FunctionCompiler._pass sets them), so a tessel device function called from a
# tessel.numba kernel keeps NumPy's.
_NUMBA_RULES = contextvars.ContextVar("tessel_kernel_numba_rules", default=False)

NUMBER_RULES = ("numpy", "numba")


@contextlib.contextmanager
def number_rules(rules: str):
    """Types what runs inside by `rules`: "numpy" (NEP 50) or "numba" (Numba's typing)."""
    token = _NUMBA_RULES.set(rules == "numba")
    try:
        yield
    finally:
        _NUMBA_RULES.reset(token)


def numba_rules() -> bool:
    return _NUMBA_RULES.get()


def promote(*types: Scalar) -> Scalar:
    """NumPy 2's result_type (NEP 50: Python literals are weak), with bfloat16.

    Under Numba's rules a literal is an int64, float64 or complex128 like any other value, and
    integers compute in 64 bits: int64 when any operand is signed (or bool), else uint64
    (Numba's NBEP 1). Mixed with floats, the result is NumPy's for those types, except that
    uint16 with float32 is float64."""
    types = list(types)
    if len(types) == 1:
        return types[0]
    if _NUMBA_RULES.get():
        types = [t.strong() for t in types]
        if all(t.kind in "biu" for t in types) and any(t.kind in "iu" for t in types):
            return INT64 if any(t.kind in "bi" for t in types) else UINT64
    if all(t.weak for t in types):
        # Two literals: the higher kind's Python type.
        order = "buifc"
        k = max((t.kind for t in types), key=order.index)
        return {"b": WEAK_BOOL, "i": WEAK_INT, "u": WEAK_INT, "f": WEAK_FLOAT, "c": WEAK_COMPLEX}[k]
    has_bf16 = any(t.name == "bfloat16" and not t.weak for t in types)
    r = np.result_type(*[_np_operand(t) for t in types])
    name = r.name
    if has_bf16:
        strong = [t for t in types if not t.weak]
        if name == "float16":
            # float16 with bfloat16 -> float32; otherwise the bfloat16 wins.
            name = "float32" if any(t.name == "float16" for t in strong) else "bfloat16"
    if _NUMBA_RULES.get() and name in ("float32", "complex64") and any(t.name == "uint16" for t in types):
        # Numba converts uint16 safely to int32 and float64, not to float32 (NumPy does)
        name = "float64" if name == "float32" else "complex128"
    return Scalar(name)


def unify(*types: Scalar) -> Scalar:
    """The one type of values that meet: a variable assigned in several places, min/max, a
    conditional expression. promote() under NumPy's rules; under Numba's, its unification: integers
    of one signedness give the widest, mixed ones the narrowest signed type that holds both (a
    float64 for uint64 with a signed one)."""
    types = [t.strong() for t in types] if _NUMBA_RULES.get() else list(types)
    if _NUMBA_RULES.get() and any(t.kind in "iu" for t in types):
        types = [t for t in types if t.kind != "b"]  # a bool converts to whichever integer it meets
    if not _NUMBA_RULES.get() or not all(t.kind in "iu" for t in types):
        return promote(*types)
    widest = max(t.itemsize for t in types)
    if all(t.kind == types[0].kind for t in types):
        return Scalar(("int" if types[0].kind == "i" else "uint") + str(8 * widest))
    bits = max([8 * t.itemsize for t in types if t.kind == "i"] + [16 * t.itemsize for t in types if t.kind == "u"])
    return FLOAT64 if bits > 64 else Scalar(f"int{bits}")


def operator_type(op: str, a: Scalar, b: Scalar) -> Scalar:
    """The type the binary operator op (ast's name: "Add", "LShift", ...) of a and b computes in:
    promote(a, b), but under Numba's rules True + True is an int64, a shift has the left operand's
    signedness (a uint64 shifts right logically), and a float to an integer power keeps its type."""
    t = promote(a, b)
    if not _NUMBA_RULES.get():
        return t
    if t.kind == "b" and op in ("Add", "Sub", "Mult"):
        return INT64
    if t.kind in "iu" and op in ("LShift", "RShift"):
        return UINT64 if a.strong().kind == "u" else INT64
    if op == "Pow" and a.kind == "f" and b.kind in "biu":
        return a.strong()
    return t


def true_divide_type(a: Scalar, b: Scalar) -> Scalar:
    r = promote(a, b)
    if r.kind in "biu":
        return FLOAT64
    return r.strong() if not (a.weak and b.weak) else FLOAT64


def float_type_of(t: Scalar) -> Scalar:
    """The float type math functions compute in for an argument of type t (ints -> float64)."""
    if t.kind in "biu":
        return FLOAT64
    if t.kind == "c":
        return t.strong()
    return t.strong()


def can_store(value: Scalar, target: Scalar) -> bool:
    """Implicit conversion on a store into an array element or typed variable: within a kind or
    upward (int into float, float into complex), never float into int or complex into real.
    Numba's rules also store a float into an int (truncating), never a complex into a real."""
    if _NUMBA_RULES.get():
        return value.kind != "c" or target.kind == "c"
    order = "buifc"
    vk, tk = value.kind, target.kind
    if vk == "u":
        vk = "i"
    if tk == "u":
        tk = "i"
    return order.index(vk) <= order.index(tk)


def is_int(t) -> bool:
    return isinstance(t, Scalar) and t.kind in "iu"


def is_intlike(t) -> bool:
    return isinstance(t, Scalar) and t.kind in "biu"


def is_signed_index(t: Scalar) -> bool:
    return t.kind in "ib"
