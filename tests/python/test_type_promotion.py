"""Type promotion as the Array API standard 2025.12 specifies it (array with array, array with
Python scalar, on either side, for functions, operators, reflected and in-place operators), and
NumPy 2 where the standard leaves a combination undefined (mixed kinds, uint64 with a signed
integer, a Python float with an integer array). One test body per rule, over backend x dtypes."""
import itertools
import operator

import numpy as np
import pytest

import tessel as ts

BOOL = ["bool"]
SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
FLOAT = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]
SPEC_DTYPES = BOOL + SIGNED + UNSIGNED + FLOAT + COMPLEX
ALL_DTYPES = SPEC_DTYPES + ["float16"]  # float16: not in the standard, promoted as NumPy


def _spec_table():
    """The standard's promotion table (the pairs it defines), written from its lattice."""
    table = {("bool", "bool"): "bool"}
    for group in (SIGNED, UNSIGNED, FLOAT, COMPLEX):
        for a, b in itertools.product(group, group):
            table[a, b] = group[max(group.index(a), group.index(b))]
    # mixed signed and unsigned: the smallest signed type that holds both (uint64: undefined)
    for u, i in itertools.product(UNSIGNED[:3], SIGNED):
        bits = max(2 * int(u[4:]), int(i[3:]))
        table[u, i] = table[i, u] = f"int{min(bits, 64)}"
    # real and complex floating point: the complex type of the wider precision
    for f, c in itertools.product(FLOAT, COMPLEX):
        r = "complex128" if "64" in f or c == "complex128" else "complex64"
        table[f, c] = table[c, f] = r
    return table


SPEC_TABLE = _spec_table()


def _array(dtype, device, values=(1, 2, 3)):
    if dtype == "bool":
        values = [True, False, True]
    return ts.asarray(np.array(values, dtype=dtype), device=device)


def _numpy_result(fn, *args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except (TypeError, OverflowError, ValueError, np.exceptions.DTypePromotionError) as error:
        return error


def test_spec_table_spot_checks():
    """The lattice above restates the standard's table; a few entries read off its text."""
    assert SPEC_TABLE["uint8", "int8"] == "int16"
    assert SPEC_TABLE["uint16", "int8"] == "int32"
    assert SPEC_TABLE["uint32", "int64"] == "int64"
    assert SPEC_TABLE["float64", "complex64"] == "complex128"
    assert ("uint64", "int8") not in SPEC_TABLE and ("int32", "float32") not in SPEC_TABLE


@pytest.mark.parametrize("d1, d2", list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_array_with_array(device, d1, d2):
    """add/multiply/maximum/equal of two arrays: the standard's table where it is defined, NumPy's
    result dtype elsewhere, for functions and operators, with the values NumPy computes."""
    x1, x2 = _array(d1, device), _array(d2, device, (2, 1, 3))
    h1, h2 = np.asarray(x1), np.asarray(x2)
    want = SPEC_TABLE.get((d1, d2)) or np.result_type(np.dtype(d1), np.dtype(d2)).name
    assert str(ts.result_type(x1, x2)) == want
    cases = [(ts.multiply, np.multiply), (operator.mul, operator.mul), (ts.equal, np.equal), (operator.lt, operator.lt)]
    if "bool" not in (d1, d2) or d1 == d2:
        cases += [(ts.add, np.add), (operator.add, operator.add)]
    if "complex" not in d1 + d2:
        cases.append((ts.maximum, np.maximum))
    for fn, ref in cases:
        expected = ref(h1, h2)
        got = fn(x1, x2)
        want_dtype = "bool" if expected.dtype == np.bool_ else want
        assert str(got.dtype) == want_dtype, f"{fn} of {d1} and {d2}: {got.dtype}, want {want_dtype}"
        np.testing.assert_array_equal(np.asarray(got), expected.astype(want_dtype))


OPERATORS = [
    ("+", operator.add), ("-", operator.sub), ("*", operator.mul), ("/", operator.truediv),
    ("//", operator.floordiv), ("%", operator.mod), ("**", operator.pow), ("&", operator.and_),
    ("|", operator.or_), ("^", operator.xor), ("<<", operator.lshift), (">>", operator.rshift),
    ("==", operator.eq), ("!=", operator.ne), ("<", operator.lt), ("<=", operator.le), (">", operator.gt),
    (">=", operator.ge),
]
SCALARS = [True, False, 2, -3, 0, 1.5, -0.25, 2j, complex(1.5, -2)]


def _same(got, expected, what):
    if isinstance(expected, Exception):
        assert isinstance(got, Exception), f"{what}: NumPy raises {type(expected).__name__}, tessel gives {got!r}"
        return
    assert not isinstance(got, Exception), f"{what}: tessel raises {got!r}, NumPy gives {expected.dtype}"
    assert str(got.dtype) == expected.dtype.name, f"{what}: {got.dtype}, NumPy {expected.dtype}"
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, equal_nan=True)


def _call(fn, *args):
    try:
        return fn(*args)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as error:
        return error


@pytest.mark.parametrize("dtype", SPEC_DTYPES)
@pytest.mark.parametrize("symbol, op", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_python_scalar_either_side(device, dtype, symbol, op):
    """x op s and s op x (the reflected operator) for every Python scalar kind: the dtype and the
    values NumPy 2 gives (weak scalars), errors where NumPy raises."""
    x = _array(dtype, device)
    h = np.asarray(x)
    for s in SCALARS:
        for side, args, hargs in (("x op s", (x, s), (h, s)), ("s op x", (s, x), (s, h))):
            if symbol == "**" and side == "x op s" and isinstance(s, int) and s < 0 and dtype != "bool":
                continue  # an integer to a negative integer power: unspecified by the standard
            if symbol == "**" and dtype == "bool" and type(s) is int:
                continue  # NumPy's power of bool and a Python int is int8, unlike its other ops (int64)
            expected = _numpy_result(op, *hargs)
            got = _call(op, *args)
            _same(got, expected, f"{side} with x {dtype}, s {s!r}, op {symbol}")


@pytest.mark.parametrize("dtype", SPEC_DTYPES)
def test_spec_scalar_rules(device, dtype):
    """The standard's own rules: a Python scalar of the array's kind (bool with bool, int with
    integer and floating, float with floating and complex, complex with complex) takes the
    array's dtype, on either side of a function call and of an operator."""
    x = _array(dtype, device)
    kind = np.dtype(dtype).kind
    scalars = {"b": [True], "i": [3], "u": [3], "f": [3, 1.5], "c": [3, 1.5, 1j]}[kind]
    for s in scalars:
        for got in (ts.multiply(x, s), ts.multiply(s, x), x * s, s * x, ts.maximum(x, s) if kind != "c" else x + s):
            assert str(got.dtype) == dtype, f"{dtype} with {s!r}: {got.dtype}"
        for got in (ts.equal(x, s), ts.not_equal(s, x), x == s, s != x):
            assert str(got.dtype) == "bool"


@pytest.mark.parametrize("dtype", UNSIGNED + SIGNED)
def test_out_of_range_python_integer(device, dtype):
    """A Python int outside the array's integer dtype: arithmetic raises (NumPy 2 raises too)
    instead of wrapping the scalar; comparisons give the exact answer."""
    x = _array(dtype, device)
    info = np.iinfo(dtype)
    big, small = int(info.max) + 1, int(info.min) - 1
    for s in (big, small):
        if s >= 2 ** 64 or s < -(2 ** 63):
            continue
        with pytest.raises((ValueError, OverflowError), match="out of bounds"):
            x + s
        with pytest.raises((ValueError, OverflowError), match="out of bounds"):
            s * x
        host = np.asarray(x).astype(object)
        for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
            got = op(x, s)
            assert str(got.dtype) == "bool"
            np.testing.assert_array_equal(np.asarray(got), np.array(op(host, s), dtype=bool))
            np.testing.assert_array_equal(np.asarray(op(s, x)), np.array(op(s, host), dtype=bool))


INPLACE = [("+=", operator.iadd, operator.add), ("-=", operator.isub, operator.sub), ("*=", operator.imul, operator.mul),
           ("/=", operator.itruediv, operator.truediv), ("//=", operator.ifloordiv, operator.floordiv),
           ("%=", operator.imod, operator.mod), ("**=", operator.ipow, operator.pow), ("&=", operator.iand, operator.and_),
           ("|=", operator.ior, operator.or_), ("^=", operator.ixor, operator.xor),
           ("<<=", operator.ilshift, operator.lshift), (">>=", operator.irshift, operator.rshift)]


@pytest.mark.parametrize("dtype", SPEC_DTYPES)
@pytest.mark.parametrize("symbol, op, plain_op", INPLACE, ids=[o[0] for o in INPLACE])
def test_inplace_keeps_dtype(device, dtype, symbol, op, plain_op):
    """x op= y writes into x and keeps its dtype, as NumPy: the result of x op y is cast to x's
    dtype when that cast is same-kind (float32 += float64); otherwise (a float into an integer
    array, true division of integers) it raises and x is unchanged."""
    operands = list(SCALARS) + [_array(d, device, (1, 2, 1)) for d in SPEC_DTYPES]
    for y in operands:
        x = _array(dtype, device)
        before = np.asarray(x).copy()
        plain = _call(plain_op, x, y)
        result = _call(op, x, y)
        expected_ok = (not isinstance(plain, Exception)
                       and np.can_cast(np.dtype(str(plain.dtype)), np.dtype(dtype), casting="same_kind"))
        what = f"x {symbol} y with x {dtype}, y {y if not isinstance(y, ts.Array) else y.dtype}"
        if expected_ok:
            assert result is x, what
            assert str(x.dtype) == dtype, what
            np.testing.assert_array_equal(np.asarray(x), np.asarray(plain).astype(dtype), err_msg=what)
        else:
            assert isinstance(result, Exception), f"{what}: the result dtype differs, yet it did not raise"
            assert str(x.dtype) == dtype
            np.testing.assert_array_equal(np.asarray(x), before, err_msg=what)


def test_inplace_error_names_dtypes(device):
    x = _array("int32", device)
    with pytest.raises(TypeError, match="float64.*int32|int32.*float64"):
        x += _array("float64", device)
    with pytest.raises(TypeError, match="int32"):
        y = _array("int32", device)
        y += 1.5


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "pow", "atan2", "hypot", "copysign",
                                  "logaddexp", "maximum", "minimum", "floor_divide", "remainder", "equal", "less"])
def test_functions_take_scalars_on_either_side(device, name):
    """The binary functions accept a Python scalar as x1 or x2 (2024.12), promoted as weak."""
    fn = getattr(ts, name)
    x = ts.asarray(np.array([1.5, 2.0, 3.0], dtype="float32"), device=device)
    ref = {"pow": np.power, "atan2": np.arctan2}.get(name, getattr(np, name, None))
    for args, hargs in (((x, 2), (np.asarray(x), np.float32(2))), ((2.0, x), (np.float32(2), np.asarray(x)))):
        got = fn(*args)
        want = ref(*hargs)
        assert str(got.dtype) == want.dtype.name, f"{name}{args}: {got.dtype}"
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_function_needs_an_array(device):
    with pytest.raises(TypeError, match="at least one operand must be an array"):
        ts.add(1, 2)
