"""Every special case of the Array API standard 2025.12 (the rows of special_cases_table.py), on
every backend (the `device` fixture: the CPU and each test GPU) and for every floating dtype the
standard names: one test body per row kind, parametrized over device x dtype x row."""
import itertools
import math
import operator

import numpy as np
import pytest

import tessel as ts
from special_cases_table import (C, INF_ANY, NAN_NEG, NAN_POS, NEG, POS, REDUCTION_ROWS, ROWS, ZERO, AnyOf)

REAL = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]
INTEGER = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def function(name):
    fn = getattr(ts, name, None)
    if fn is None:
        pytest.skip(f"tessel.{name} is not provided")
    return fn


def matches(got, want, inputs, dtype):
    """Whether the element `got` (a NumPy scalar) satisfies the expectation `want`."""
    if isinstance(want, AnyOf):
        return any(matches(got, w, inputs, dtype) for w in want.options)
    if callable(want):
        return matches(got, want(*inputs), inputs, dtype)
    if isinstance(want, bool):
        return isinstance(got, (bool, np.bool_)) and bool(got) == want
    g = float(got)
    sign = math.copysign(1.0, g) < 0
    if want is ZERO:
        return g == 0
    if want is INF_ANY:
        return math.isinf(g)
    if want is POS:
        return not math.isnan(g) and not sign
    if want is NEG:
        return not math.isnan(g) and sign
    if want is NAN_POS:
        return math.isnan(g) and not sign
    if want is NAN_NEG:
        return math.isnan(g) and sign
    if math.isnan(want):
        return math.isnan(g)
    if math.isinf(want) or want == 0:
        return g == want and sign == (math.copysign(1.0, want) < 0)
    eps = float(np.finfo(np.dtype(dtype).type(0).real.dtype).eps) if np.dtype(dtype).kind in "fc" else 0.0
    return math.isclose(g, want, rel_tol=8 * eps, abs_tol=0.0)


def real_samples(row):
    """The input tuples of a real row: the product of its classes, except that "same" and "-x1"
    pair with the first input."""
    classes = row.ins
    if len(classes) == 2 and classes[1] in ("same", "-x1"):
        sign = 1.0 if classes[1] == "same" else -1.0
        return [(v, sign * v) for v in C[classes[0]]]
    return list(itertools.product(*(C[c] for c in classes)))


def host(values, dtype):
    return np.array(values, dtype=dtype)


def complex_host(pairs, dtype):
    """Complex values with exact parts (signed zeros, NaN signs): parts set one by one."""
    z = np.empty(len(pairs), dtype=dtype)
    z.real = [p[0] for p in pairs]
    z.imag = [p[1] for p in pairs]
    return z


def describe(bad):
    return "\n".join(f"  inputs {inputs}: got {got!r}, want {want!r}" for inputs, got, want in bad[:8])


ROW_PARAMS = {kind: [pytest.param(r, id=f"{i}:{r.id}") for i, r in enumerate(ROWS) if r.kind == kind]
              for kind in ("real", "complex", "complex2", "int", "clip")}


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("row", ROW_PARAMS["real"])
def test_real_row(device, dtype, row):
    fn = function(row.fn)
    samples = real_samples(row)
    args = [ts.asarray(host([s[k] for s in samples], dtype), device=device) for k in range(len(row.ins))]
    result = fn(*args)
    got = np.asarray(result)
    assert got.shape == (len(samples),)
    if not isinstance(row.want, bool):
        assert str(result.dtype) == dtype, f"{row.fn} of {dtype} gave {result.dtype}"
    bad = [(s, g, row.want) for s, g in zip(samples, got) if not matches(g, row.want, s, dtype)]
    assert not bad, f"{row.fn} ({dtype}, {device}) breaks the spec row {row.ins} -> {row.want!r}:\n{describe(bad)}"


OPERATORS = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "truediv", "floor_divide": "floordiv",
             "remainder": "mod", "pow": "pow", "equal": "eq", "not_equal": "ne"}
OPERATOR_ROWS = [p for p in ROW_PARAMS["real"] if len(p.values[0].ins) == 2]


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("row", OPERATOR_ROWS)
def test_real_binary_row_operator_and_scalar_forms(device, dtype, row):
    """A binary row holds for 0-d arrays, a Python float on either side, and (for an operator)
    x1 <op> x2 and the in-place x1 <op>= x2: the forms the conformance suite calls."""
    fn = function(row.fn)
    op_name = OPERATORS.get(row.fn)
    op = getattr(operator, op_name) if op_name else None
    iop = getattr(operator, "i" + op_name) if op_name and op_name not in ("eq", "ne") else None
    bad = []
    for s in real_samples(row):
        x1, x2 = (ts.asarray(np.array(v, dtype=dtype), device=device) for v in s)
        forms = {"f(0d, 0d)": lambda: fn(x1, x2), "f(0d, float)": lambda: fn(x1, s[1]),
                 "f(float, 0d)": lambda: fn(s[0], x2)}
        if op is not None:
            forms.update({"0d op 0d": lambda: op(x1, x2), "0d op float": lambda: op(x1, s[1]),
                          "float op 0d": lambda: op(s[0], x2)})
        if iop is not None:
            forms["0d op= 0d"] = lambda: iop(ts.asarray(np.array(s[0], dtype=dtype), device=device), x2)
            forms["0d op= float"] = lambda: iop(ts.asarray(np.array(s[0], dtype=dtype), device=device), s[1])
        for form, compute in forms.items():
            result = compute()
            got = np.asarray(result)[()]
            if not matches(got, row.want, s, dtype):
                bad.append(((form,) + tuple(s), got, row.want))
    assert not bad, f"{row.fn} ({dtype}, {device}) breaks the spec row {row.ins} -> {row.want!r}:\n{describe(bad)}"


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("row", ROW_PARAMS["complex"])
def test_complex_row(device, dtype, row):
    fn = function(row.fn)
    samples = list(itertools.product(C[row.ins[0]], C[row.ins[1]]))
    result = fn(ts.asarray(complex_host(samples, dtype), device=device))
    got = np.asarray(result)
    want_re, want_im = row.want
    bad = []
    for s, g in zip(samples, got):
        if want_im is None:  # a real result (abs) or a predicate
            ok = matches(g, want_re, s, dtype)
        else:
            ok = matches(g.real, want_re, s, dtype) and matches(g.imag, want_im, s, dtype)
        if not ok:
            bad.append((s, g, row.want))
    assert not bad, f"{row.fn} ({dtype}, {device}) breaks the spec row a={row.ins[0]}, b={row.ins[1]} -> {row.want!r}:\n{describe(bad)}"


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("row", ROW_PARAMS["complex2"])
def test_complex_binary_row(device, dtype, row):
    fn = function(row.fn)
    (a, b), (c, d) = row.ins
    samples = list(itertools.product(C[a], C[b], C[c], C[d]))
    x1 = ts.asarray(complex_host([(s[0], s[1]) for s in samples], dtype), device=device)
    x2 = ts.asarray(complex_host([(s[2], s[3]) for s in samples], dtype), device=device)
    got = np.asarray(fn(x1, x2))
    bad = []
    for s, g in zip(samples, got):
        if isinstance(row.want, bool):
            ok = matches(g, row.want, s, dtype)
        else:
            ok = matches(g.real, row.want[0], s, dtype) and matches(g.imag, row.want[1], s, dtype)
        if not ok:
            bad.append((s, g, row.want))
    assert not bad, f"{row.fn} ({dtype}, {device}) breaks the spec row {row.ins} -> {row.want!r}:\n{describe(bad)}"


@pytest.mark.parametrize("dtype", INTEGER + REAL)
@pytest.mark.parametrize("row", ROW_PARAMS["int"])
def test_integer_valued_row(device, dtype, row):
    """ceil/floor/trunc/round return integer-valued inputs unchanged, in the input dtype."""
    fn = function(row.fn)
    values = [v for v in C[row.ins[0]] if v >= 0 or np.dtype(dtype).kind != "u"]
    x = host(values, dtype)
    result = fn(ts.asarray(x, device=device))
    assert str(result.dtype) == dtype
    np.testing.assert_array_equal(np.asarray(result), x)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("row", ROW_PARAMS["clip"])
def test_clip_row(device, dtype, row):
    samples = list(itertools.product(*(C[c] for c in row.ins)))
    x, lo, hi = (ts.asarray(host([s[k] for s in samples], dtype), device=device) for k in range(3))
    got = np.asarray(ts.clip(x, lo, hi))
    bad = [(s, g, row.want) for s, g in zip(samples, got) if not matches(g, row.want, s, dtype)]
    assert not bad, f"clip ({dtype}, {device}) breaks the spec row {row.ins}:\n{describe(bad)}"


@pytest.mark.parametrize("dtype", REAL)
def test_clip_scalar_nan_bounds(device, dtype):
    x = ts.asarray(host([1.0, -2.0, 5.0], dtype), device=device)
    assert np.isnan(np.asarray(ts.clip(x, float("nan"), 3.0))).all()
    assert np.isnan(np.asarray(ts.clip(x, 0.0, float("nan")))).all()


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("name, values, kwargs, want", REDUCTION_ROWS,
                         ids=[f"{i}:{r[0]}({r[1]})" for i, r in enumerate(REDUCTION_ROWS)])
def test_reduction_row(device, dtype, name, values, kwargs, want):
    fn = function(name)
    result = fn(ts.asarray(host(values, dtype), device=device), **kwargs)
    got = np.asarray(result)
    if want == "empty":
        assert got.shape == (0,)
        return
    assert got.shape == ()
    assert matches(got[()], want, (), dtype), f"{name}({values}, {kwargs}) on {device}: got {got!r}, want {want!r}"


def test_the_table_covers_every_function_with_special_cases():
    """Every elementwise function whose spec text has a Special cases section has rows here."""
    with_rows = {r.fn for r in ROWS}
    expected = {
        "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "clip", "copysign", "cos",
        "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "hypot", "isfinite", "isinf", "isnan",
        "log", "log1p", "log2", "log10", "logaddexp", "maximum", "minimum", "multiply", "nextafter", "not_equal",
        "pow", "reciprocal", "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract",
        "tan", "tanh", "trunc",
    }
    assert expected <= with_rows, sorted(expected - with_rows)
