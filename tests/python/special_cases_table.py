"""The special cases of the Array API standard 2025.12, as data.

Each row restates one bullet of a function's "Special cases" section (elementwise functions and
the statistical functions). A row names the input classes (each class stands for the sample
values below) and the expected result. Rows are listed in the spec's order, and samples are
chosen so that no sample of a row also falls under an earlier row of the same function.

Expected values:
  a float (NaN, +-inf, +-0 compared with their sign, other values to a few ulp);
  ZERO / INF: a zero or infinity of either sign (the spec leaves the sign unspecified);
  POS / NEG: any non-NaN value with a clear / set sign bit;
  a callable of the inputs (real rows: the x_i; complex rows: a, b) returning one of the above;
  AnyOf(...): any one of the listed expectations;
  a bool for the predicates.
Complex rows expect a pair (real part, imaginary part).
"""
import math

NAN = float("nan")
INF = float("inf")
PI = math.pi
NEG_NAN = math.copysign(NAN, -1.0)  # NaN with its sign bit set


class Marker:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


ZERO = Marker("ZERO")  # +0 or -0
INF_ANY = Marker("INF")  # +inf or -inf
POS = Marker("POS")  # sign bit clear, not NaN
NEG = Marker("NEG")  # sign bit set, not NaN
NAN_POS = Marker("NaN(sign 0)")
NAN_NEG = Marker("NaN(sign 1)")


class AnyOf:
    def __init__(self, *options):
        self.options = options

    def __repr__(self):
        return "AnyOf" + repr(self.options)


# ---- input classes: the spec's phrases and the values that stand for them ----------------------
C = {
    "NaN": [NAN],
    "-NaN": [NEG_NAN],
    "+0": [0.0],
    "-0": [-0.0],
    "+-0": [0.0, -0.0],
    "+inf": [INF],
    "-inf": [-INF],
    "+-inf": [INF, -INF],
    "1": [1.0],
    "-1": [-1.0],
    "finite": [-2.5, -1.0, -0.0, 0.0, 0.5, 3.0],
    "nonzero finite": [-2.5, -0.5, 0.5, 3.0],
    "positive finite": [0.5, 1.0, 3.0],
    "negative finite": [-0.5, -1.0, -3.0],
    ">0": [0.5, 3.0, INF],
    "<0": [-0.5, -3.0, -INF],
    ">1": [1.5, 5.0, INF],
    "<1": [0.5, -0.5, -3.0, -INF],
    "<-1": [-1.5, -5.0, -INF],
    "<0 finite": [-0.5, -3.0],
    ">0 finite": [0.5, 3.0],
    "any": [NAN, INF, -INF, 0.0, -0.0, 2.5, -2.5],
    "not NaN": [INF, -INF, 0.0, -0.0, 2.5, -2.5],
    "finite or NaN": [NAN, 0.0, -0.0, 2.5, -2.5],
    "not 1": [NAN, INF, -INF, 0.0, -0.0, 2.5, -1.0],
    "nonzero": [NAN, INF, -INF, 2.5, -2.5],
    "nonzero number": [INF, -INF, 2.5, -2.5],
    "|x|>1": [1.5, -1.5, INF, -INF],
    "|x|=1": [1.0, -1.0],
    "|x|<1": [0.5, -0.5, 0.0, -0.0],
    "odd int >0": [1.0, 3.0, 5.0],
    "not odd int >0": [0.5, 2.0, 4.0, 2.5, INF],
    "odd int <0": [-1.0, -3.0],
    "not odd int <0": [-2.0, -0.5, -INF],
    "<0 finite non-int": [-0.5, -2.5],
    "finite non-int": [0.5, -1.5, 2.5],
    "integer-valued": [-3.0, -1.0, 2.0, 4.0],
    "half": [0.5, 1.5, 2.5, -0.5, -1.5, -2.5],
}


# ---- rows -------------------------------------------------------------------------------------
class Row:
    """fn: the tessel function name; kind: 'real', 'complex', 'int' (integer dtypes too) or
    'bool'; ins: input classes; want: the expectation; note: the spec bullet (for the test id)."""

    def __init__(self, fn, kind, ins, want, note=""):
        self.fn, self.kind, self.ins, self.want, self.note = fn, kind, tuple(ins), want, note

    @property
    def id(self):
        return f"{self.fn}[{self.kind}{'/' + self.note if self.note else ''}]({', '.join(map(str, self.ins))})"


ROWS = []


def R(fn, *ins_and_want):
    *ins, want = ins_and_want
    ROWS.append(Row(fn, "real", ins, want))


def Z(fn, a, b, re, im):
    """A complex unary row: a = real(x_i), b = imag(x_i)."""
    ROWS.append(Row(fn, "complex", (a, b), (re, im)))


def neg(v):
    if callable(v):
        return lambda *x: neg(v(*x))
    if isinstance(v, float):
        return -v
    if isinstance(v, AnyOf):
        return AnyOf(*(neg(o) for o in v.options))
    return {POS: NEG, NEG: POS}.get(v, v)


# abs
R("abs", "NaN", NAN)
R("abs", "-0", 0.0)
R("abs", "-inf", INF)
Z("abs", "+-inf", "any", INF, None)
Z("abs", "finite", "+-inf", INF, None)
Z("abs", "NaN", "+-inf", INF, None)
Z("abs", "+-0", "finite", lambda a, b: abs(b), None)
Z("abs", "finite", "+-0", lambda a, b: abs(a), None)
Z("abs", "NaN", "nonzero finite", NAN, None)
Z("abs", "nonzero finite", "NaN", NAN, None)
Z("abs", "NaN", "NaN", NAN, None)

# acos
R("acos", "NaN", NAN)
R("acos", ">1", NAN)
R("acos", "<-1", NAN)
R("acos", "1", 0.0)
Z("acos", "+-0", "+0", PI / 2, -0.0)
Z("acos", "+-0", "NaN", PI / 2, NAN)
Z("acos", "finite", "+inf", PI / 2, -INF)
Z("acos", "nonzero finite", "NaN", NAN, NAN)
Z("acos", "-inf", "positive finite", PI, -INF)
Z("acos", "+inf", "positive finite", 0.0, -INF)
Z("acos", "-inf", "+inf", 3 * PI / 4, -INF)
Z("acos", "+inf", "+inf", PI / 4, -INF)
Z("acos", "+-inf", "NaN", NAN, INF_ANY)
Z("acos", "NaN", "finite", NAN, NAN)
Z("acos", "NaN", "+inf", NAN, -INF)
Z("acos", "NaN", "NaN", NAN, NAN)

# acosh
R("acosh", "NaN", NAN)
R("acosh", "<1", NAN)
R("acosh", "1", 0.0)
R("acosh", "+inf", INF)
Z("acosh", "+-0", "+0", 0.0, PI / 2)
Z("acosh", "finite", "+inf", INF, PI / 2)
Z("acosh", "nonzero finite", "NaN", NAN, NAN)
Z("acosh", "+0", "NaN", NAN, AnyOf(PI / 2, -PI / 2))
Z("acosh", "-inf", "positive finite", INF, PI)
Z("acosh", "+inf", "positive finite", INF, 0.0)
Z("acosh", "-inf", "+inf", INF, 3 * PI / 4)
Z("acosh", "+inf", "+inf", INF, PI / 4)
Z("acosh", "+-inf", "NaN", INF, NAN)
Z("acosh", "NaN", "finite", NAN, NAN)
Z("acosh", "NaN", "+inf", INF, NAN)
Z("acosh", "NaN", "NaN", NAN, NAN)

# add (subtract is derived below: x1 - x2 is x1 + (-x2))
R("add", "NaN", "any", NAN)
R("add", "any", "NaN", NAN)
R("add", "+inf", "-inf", NAN)
R("add", "-inf", "+inf", NAN)
R("add", "+inf", "+inf", INF)
R("add", "-inf", "-inf", -INF)
R("add", "+inf", "finite", INF)
R("add", "-inf", "finite", -INF)
R("add", "finite", "+inf", INF)
R("add", "finite", "-inf", -INF)
R("add", "-0", "-0", -0.0)
R("add", "-0", "+0", 0.0)
R("add", "+0", "-0", 0.0)
R("add", "+0", "+0", 0.0)
R("add", "+-0", "nonzero finite", lambda x1, x2: x2)
R("add", "nonzero finite", "+-0", lambda x1, x2: x1)
ROWS.append(Row("add", "real", ("nonzero finite", "-x1"), 0.0))
# The spec's complex example: (-0 + 0j) + (-0 - 0j) is -0 + 0j; parts follow the real rules.
ROWS.append(Row("add", "complex2", (("-0", "+0"), ("-0", "-0")), (-0.0, 0.0)))
ROWS.append(Row("add", "complex2", (("+inf", "NaN"), ("finite", "-inf")), (INF, NAN)))
ROWS.append(Row("add", "complex2", (("+0", "-inf"), ("-0", "+inf")), (0.0, NAN)))

# asinh
R("asinh", "NaN", NAN)
R("asinh", "+0", 0.0)
R("asinh", "-0", -0.0)
R("asinh", "+inf", INF)
R("asinh", "-inf", -INF)
Z("asinh", "+0", "+0", 0.0, 0.0)
Z("asinh", "positive finite", "+inf", INF, PI / 2)
Z("asinh", "finite", "NaN", NAN, NAN)
Z("asinh", "+inf", "positive finite", INF, 0.0)
Z("asinh", "+inf", "+inf", INF, PI / 4)
Z("asinh", "NaN", "+0", NAN, 0.0)
Z("asinh", "NaN", "nonzero finite", NAN, NAN)
Z("asinh", "NaN", "+inf", INF_ANY, NAN)
Z("asinh", "NaN", "NaN", NAN, NAN)

# asin (real)
R("asin", "NaN", NAN)
R("asin", ">1", NAN)
R("asin", "<-1", NAN)
R("asin", "+0", 0.0)
R("asin", "-0", -0.0)

# atan (real)
R("atan", "NaN", NAN)
R("atan", "+0", 0.0)
R("atan", "-0", -0.0)
R("atan", "+inf", PI / 2)
R("atan", "-inf", -PI / 2)

# atan2
R("atan2", "NaN", "any", NAN)
R("atan2", "any", "NaN", NAN)
R("atan2", ">0", "+0", PI / 2)
R("atan2", ">0", "-0", PI / 2)
R("atan2", "+0", ">0", 0.0)
R("atan2", "+0", "+0", 0.0)
R("atan2", "+0", "-0", PI)
R("atan2", "+0", "<0", PI)
R("atan2", "-0", ">0", -0.0)
R("atan2", "-0", "+0", -0.0)
R("atan2", "-0", "-0", -PI)
R("atan2", "-0", "<0", -PI)
R("atan2", "<0", "+0", -PI / 2)
R("atan2", "<0", "-0", -PI / 2)
R("atan2", ">0 finite", "+inf", 0.0)
R("atan2", ">0 finite", "-inf", PI)
R("atan2", "<0 finite", "+inf", -0.0)
R("atan2", "<0 finite", "-inf", -PI)
R("atan2", "+inf", "finite", PI / 2)
R("atan2", "-inf", "finite", -PI / 2)
R("atan2", "+inf", "+inf", PI / 4)
R("atan2", "+inf", "-inf", 3 * PI / 4)
R("atan2", "-inf", "+inf", -PI / 4)
R("atan2", "-inf", "-inf", -3 * PI / 4)

# atanh
R("atanh", "NaN", NAN)
R("atanh", "<-1", NAN)
R("atanh", ">1", NAN)
R("atanh", "-1", -INF)
R("atanh", "1", INF)
R("atanh", "+0", 0.0)
R("atanh", "-0", -0.0)
Z("atanh", "+0", "+0", 0.0, 0.0)
Z("atanh", "+0", "NaN", 0.0, NAN)
Z("atanh", "1", "+0", INF, 0.0)
Z("atanh", "positive finite", "+inf", 0.0, PI / 2)
Z("atanh", "nonzero finite", "NaN", NAN, NAN)
Z("atanh", "+inf", "positive finite", 0.0, PI / 2)
Z("atanh", "+inf", "+inf", 0.0, PI / 2)
Z("atanh", "+inf", "NaN", 0.0, NAN)
Z("atanh", "NaN", "finite", NAN, NAN)
Z("atanh", "NaN", "+inf", ZERO, PI / 2)
Z("atanh", "NaN", "NaN", NAN, NAN)

# ceil, floor, trunc, round: integer-valued inputs come back unchanged (integer dtypes too)
for _fn in ("ceil", "floor", "trunc", "round"):
    ROWS.append(Row(_fn, "int", ("integer-valued",), lambda x: x))
    R(_fn, "integer-valued", lambda x: x)
    R(_fn, "+inf", INF)
    R(_fn, "-inf", -INF)
    R(_fn, "+0", 0.0)
    R(_fn, "-0", -0.0)
    R(_fn, "NaN", NAN)
R("round", "half", lambda x: math.copysign(float(round(x)), x))  # ties to even, as Python
# round of complex: the rules apply to each part.
for _ins, _want in ((("+inf", "-inf"), (INF, -INF)), (("-0", "+0"), (-0.0, 0.0)), (("NaN", "2.5"), (NAN, 2.0)),
                    (("half", "half"), (lambda a, b: math.copysign(float(round(a)), a), lambda a, b: math.copysign(float(round(b)), b)))):
    ROWS.append(Row("round", "complex", _ins, _want))
C["2.5"] = [2.5]

# clip
ROWS.append(Row("clip", "clip", ("NaN", "finite", ">1"), NAN))
ROWS.append(Row("clip", "clip", ("finite", "NaN", ">1"), NAN))
ROWS.append(Row("clip", "clip", ("finite", "<-1", "NaN"), NAN))

# copysign: |x1| with the sign of x2, NaN payloads too
R("copysign", "not NaN", "<0", lambda x1, x2: -abs(x1))
R("copysign", "not NaN", "-0", lambda x1, x2: -abs(x1))
R("copysign", "not NaN", "+0", lambda x1, x2: abs(x1))
R("copysign", "not NaN", ">0", lambda x1, x2: abs(x1))
R("copysign", "not NaN", "-NaN", lambda x1, x2: -abs(x1))
R("copysign", "not NaN", "NaN", lambda x1, x2: abs(x1))
R("copysign", "NaN", "<0", NAN_NEG)
R("copysign", "NaN", "-0", NAN_NEG)
R("copysign", "NaN", "+0", NAN_POS)
R("copysign", "NaN", ">0", NAN_POS)
R("copysign", "NaN", "-NaN", NAN_NEG)
R("copysign", "NaN", "NaN", NAN_POS)

# cos (real)
R("cos", "NaN", NAN)
R("cos", "+0", 1.0)
R("cos", "-0", 1.0)
R("cos", "+inf", NAN)
R("cos", "-inf", NAN)

# cosh
R("cosh", "NaN", NAN)
R("cosh", "+0", 1.0)
R("cosh", "-0", 1.0)
R("cosh", "+inf", INF)
R("cosh", "-inf", INF)


def cis_times(scale):
    """scale * cis(b), the parts computed as the spec's product of a real and cos/sin of b."""
    return (lambda a, b: scale * math.cos(b), lambda a, b: scale * math.sin(b))


Z("cosh", "+0", "+0", 1.0, 0.0)
Z("cosh", "+0", "+inf", NAN, ZERO)
Z("cosh", "+0", "NaN", NAN, ZERO)
Z("cosh", "nonzero finite", "+inf", NAN, NAN)
Z("cosh", "nonzero finite", "NaN", NAN, NAN)
Z("cosh", "+inf", "+0", INF, 0.0)
Z("cosh", "+inf", "nonzero finite", *cis_times(INF))
Z("cosh", "+inf", "+inf", INF_ANY, NAN)
Z("cosh", "+inf", "NaN", INF, NAN)
Z("cosh", "NaN", "+-0", NAN, ZERO)
Z("cosh", "NaN", "nonzero finite", NAN, NAN)
Z("cosh", "NaN", "NaN", NAN, NAN)

# divide
R("divide", "NaN", "any", NAN)
R("divide", "any", "NaN", NAN)
R("divide", "+-inf", "+-inf", NAN)
R("divide", "+-0", "+-0", NAN)
R("divide", "+0", ">0", 0.0)
R("divide", "-0", ">0", -0.0)
R("divide", "+0", "<0", -0.0)
R("divide", "-0", "<0", 0.0)
R("divide", ">0", "+0", INF)
R("divide", ">0", "-0", -INF)
R("divide", "<0", "+0", -INF)
R("divide", "<0", "-0", INF)
R("divide", "+inf", "positive finite", INF)
R("divide", "+inf", "negative finite", -INF)
R("divide", "-inf", "positive finite", -INF)
R("divide", "-inf", "negative finite", INF)
R("divide", "positive finite", "+inf", 0.0)
R("divide", "positive finite", "-inf", -0.0)
R("divide", "negative finite", "+inf", -0.0)
R("divide", "negative finite", "-inf", 0.0)
R("divide", "positive finite", "positive finite", POS)
R("divide", "negative finite", "negative finite", POS)
R("divide", "positive finite", "negative finite", NEG)
R("divide", "negative finite", "positive finite", NEG)
ROWS.append(Row("divide", "complex2", (("NaN", "NaN"), ("NaN", "NaN")), (NAN, NAN)))

# equal / not_equal
for _fn, _t in (("equal", True), ("not_equal", False)):
    R(_fn, "NaN", "any", not _t)
    R(_fn, "any", "NaN", not _t)
    R(_fn, "+inf", "+inf", _t)
    R(_fn, "-inf", "-inf", _t)
    R(_fn, "-0", "+-0", _t)
    R(_fn, "+0", "+-0", _t)
    R(_fn, "finite", "same", _t)
    R(_fn, "+inf", "-inf", not _t)
    R(_fn, "-inf", "+inf", not _t)
    R(_fn, "nonzero finite", "other finite", not _t)
    ROWS.append(Row(_fn, "complex2", (("NaN", "finite"), ("finite", "finite")), not _t))
    ROWS.append(Row(_fn, "complex2", (("finite", "finite"), ("finite", "NaN")), not _t))
    ROWS.append(Row(_fn, "complex2", (("+inf", "-0"), ("+inf", "+0")), _t))
    ROWS.append(Row(_fn, "complex2", (("finite", "+inf"), ("finite", "-inf")), not _t))
C["other finite"] = [7.0]

# exp
R("exp", "NaN", NAN)
R("exp", "+0", 1.0)
R("exp", "-0", 1.0)
R("exp", "+inf", INF)
R("exp", "-inf", 0.0)
Z("exp", "+-0", "+0", 1.0, 0.0)
Z("exp", "finite", "+inf", NAN, NAN)
Z("exp", "finite", "NaN", NAN, NAN)
Z("exp", "+inf", "+0", INF, 0.0)
Z("exp", "-inf", "finite", *cis_times(0.0))
Z("exp", "+inf", "nonzero finite", *cis_times(INF))
Z("exp", "-inf", "+inf", ZERO, ZERO)
Z("exp", "+inf", "+inf", INF_ANY, NAN)
Z("exp", "-inf", "NaN", ZERO, ZERO)
Z("exp", "+inf", "NaN", INF_ANY, NAN)
Z("exp", "NaN", "+0", NAN, 0.0)
Z("exp", "NaN", "nonzero number", NAN, NAN)
Z("exp", "NaN", "NaN", NAN, NAN)

# expm1
R("expm1", "NaN", NAN)
R("expm1", "+0", 0.0)
R("expm1", "-0", -0.0)
R("expm1", "+inf", INF)
R("expm1", "-inf", -1.0)
Z("expm1", "+-0", "+0", 0.0, 0.0)  # the spec's unsigned 0 + 0j: +0 for either zero
Z("expm1", "finite", "+inf", NAN, NAN)
Z("expm1", "finite", "NaN", NAN, NAN)
Z("expm1", "+inf", "+0", INF, 0.0)
Z("expm1", "-inf", "finite", lambda a, b: 0.0 * math.cos(b) - 1.0, lambda a, b: 0.0 * math.sin(b))
Z("expm1", "+inf", "nonzero finite", *cis_times(INF))
Z("expm1", "-inf", "+inf", -1.0, ZERO)
Z("expm1", "+inf", "+inf", INF_ANY, NAN)
Z("expm1", "-inf", "NaN", -1.0, ZERO)
Z("expm1", "+inf", "NaN", INF_ANY, NAN)
Z("expm1", "NaN", "+0", NAN, 0.0)
Z("expm1", "NaN", "nonzero number", NAN, NAN)
Z("expm1", "NaN", "NaN", NAN, NAN)

# floor_divide: with an infinite operand, floor(x1 / x2), the value the standard prefers to the
# "may return NaN / -1.0" it allows for Python's pairing of // with %
R("floor_divide", "NaN", "any", NAN)
R("floor_divide", "any", "NaN", NAN)
R("floor_divide", "+-inf", "+-inf", NAN)
R("floor_divide", "+-0", "+-0", NAN)
R("floor_divide", "+0", ">0", 0.0)
R("floor_divide", "-0", ">0", -0.0)
R("floor_divide", "+0", "<0", -0.0)
R("floor_divide", "-0", "<0", 0.0)
R("floor_divide", ">0", "+0", INF)
R("floor_divide", ">0", "-0", -INF)
R("floor_divide", "<0", "+0", -INF)
R("floor_divide", "<0", "-0", INF)
R("floor_divide", "+inf", "positive finite", INF)
R("floor_divide", "+inf", "negative finite", -INF)
R("floor_divide", "-inf", "positive finite", -INF)
R("floor_divide", "-inf", "negative finite", INF)
R("floor_divide", "positive finite", "+inf", 0.0)
R("floor_divide", "positive finite", "-inf", -0.0)
R("floor_divide", "negative finite", "+inf", -0.0)
R("floor_divide", "negative finite", "-inf", 0.0)
R("floor_divide", "positive finite", "positive finite", POS)
R("floor_divide", "negative finite", "negative finite", POS)
R("floor_divide", "positive finite", "negative finite", NEG)
R("floor_divide", "negative finite", "positive finite", NEG)

# hypot
R("hypot", "+-inf", "any", INF)
R("hypot", "any", "+-inf", INF)
R("hypot", "+-0", "finite or NaN", lambda x1, x2: abs(x2))
R("hypot", "finite or NaN", "+-0", lambda x1, x2: abs(x1))
R("hypot", "finite or NaN", "NaN", NAN)
R("hypot", "NaN", "finite or NaN", NAN)

# isfinite / isinf / isnan
R("isfinite", "+-inf", False)
R("isfinite", "NaN", False)
R("isfinite", "finite", True)
Z("isfinite", "NaN", "any", False, None)
Z("isfinite", "any", "NaN", False, None)
Z("isfinite", "+-inf", "any", False, None)
Z("isfinite", "any", "+-inf", False, None)
Z("isfinite", "finite", "finite", True, None)
R("isinf", "+-inf", True)
R("isinf", "finite or NaN", False)
Z("isinf", "+-inf", "any", True, None)
Z("isinf", "finite or NaN", "+-inf", True, None)
Z("isinf", "finite or NaN", "finite or NaN", False, None)
R("isnan", "NaN", True)
R("isnan", "not NaN", False)
Z("isnan", "NaN", "any", True, None)
Z("isnan", "any", "NaN", True, None)
Z("isnan", "not NaN", "not NaN", False, None)

# log, log1p, log2, log10
R("log", "NaN", NAN)
R("log", "<0", NAN)
R("log", "+-0", -INF)
R("log", "1", 0.0)
R("log", "+inf", INF)
LOG_COMPLEX = [
    ("-0", "+0", -INF, PI),
    ("+0", "+0", -INF, 0.0),
    ("finite", "+inf", INF, PI / 2),
    ("finite", "NaN", NAN, NAN),
    ("-inf", "positive finite", INF, PI),
    ("+inf", "positive finite", INF, 0.0),
    ("-inf", "+inf", INF, 3 * PI / 4),
    ("+inf", "+inf", INF, PI / 4),
    ("+-inf", "NaN", INF, NAN),
    ("NaN", "finite", NAN, NAN),
    ("NaN", "+inf", INF, NAN),
    ("NaN", "NaN", NAN, NAN),
]
for _a, _b, _re, _im in LOG_COMPLEX:
    Z("log", _a, _b, _re, _im)
# log2 and log10 of complex: log(z) / log(base), so the rows of log scaled.
for _fn, _base in (("log2", 2.0), ("log10", 10.0)):
    R(_fn, "NaN", NAN)
    R(_fn, "<0", NAN)
    R(_fn, "+-0", -INF)
    R(_fn, "1", 0.0)
    R(_fn, "+inf", INF)
    for _a, _b, _re, _im in LOG_COMPLEX:
        Z(_fn, _a, _b, _re / math.log(_base), _im / math.log(_base))
R("log1p", "NaN", NAN)
R("log1p", "<-1", NAN)
R("log1p", "-1", -INF)
R("log1p", "-0", -0.0)
R("log1p", "+0", 0.0)
R("log1p", "+inf", INF)
Z("log1p", "-1", "+0", -INF, 0.0)
Z("log1p", "finite", "+inf", INF, PI / 2)
Z("log1p", "finite", "NaN", NAN, NAN)
Z("log1p", "-inf", "positive finite", INF, PI)
Z("log1p", "+inf", "positive finite", INF, 0.0)
Z("log1p", "-inf", "+inf", INF, 3 * PI / 4)
Z("log1p", "+inf", "+inf", INF, PI / 4)
Z("log1p", "+-inf", "NaN", INF, NAN)
Z("log1p", "NaN", "finite", NAN, NAN)
Z("log1p", "NaN", "+inf", INF, NAN)
Z("log1p", "NaN", "NaN", NAN, NAN)

# logaddexp
R("logaddexp", "NaN", "any", NAN)
R("logaddexp", "any", "NaN", NAN)
R("logaddexp", "+inf", "not NaN", INF)
R("logaddexp", "not NaN", "+inf", INF)

# maximum / minimum
for _fn in ("maximum", "minimum"):
    R(_fn, "NaN", "any", NAN)
    R(_fn, "any", "NaN", NAN)

# multiply
R("multiply", "NaN", "any", NAN)
R("multiply", "any", "NaN", NAN)
R("multiply", "+-inf", "+-0", NAN)
R("multiply", "+-0", "+-inf", NAN)
R("multiply", "positive finite", "positive finite", POS)
R("multiply", "negative finite", "negative finite", POS)
R("multiply", "+0", "+0", 0.0)
R("multiply", "-0", "-0", 0.0)
R("multiply", "positive finite", "negative finite", NEG)
R("multiply", "+0", "-0", -0.0)
R("multiply", "+inf", "+inf", INF)
R("multiply", "-inf", "-inf", INF)
R("multiply", "+inf", "-inf", -INF)
R("multiply", "+inf", "positive finite", INF)
R("multiply", "+inf", "negative finite", -INF)
R("multiply", "-inf", "nonzero finite", lambda x1, x2: math.copysign(INF, -x2))
R("multiply", "nonzero finite", "+inf", lambda x1, x2: math.copysign(INF, x1))
R("multiply", "nonzero finite", "-inf", lambda x1, x2: math.copysign(INF, -x1))
ROWS.append(Row("multiply", "complex2", (("NaN", "NaN"), ("NaN", "NaN")), (NAN, NAN)))

# nextafter
R("nextafter", "NaN", "any", NAN)
R("nextafter", "any", "NaN", NAN)
R("nextafter", "-0", "+0", 0.0)
R("nextafter", "+0", "-0", -0.0)

# pow
R("pow", "not 1", "NaN", NAN)
R("pow", "any", "+0", 1.0)
R("pow", "any", "-0", 1.0)
R("pow", "NaN", "nonzero number", NAN)
R("pow", "|x|>1", "+inf", INF)
R("pow", "|x|>1", "-inf", 0.0)
R("pow", "|x|=1", "+-inf", 1.0)
R("pow", "1", "not NaN", 1.0)
R("pow", "|x|<1", "+inf", 0.0)
R("pow", "|x|<1", "-inf", INF)
R("pow", "+inf", ">0", INF)
R("pow", "+inf", "<0", 0.0)
R("pow", "-inf", "odd int >0", -INF)
R("pow", "-inf", "not odd int >0", INF)
R("pow", "-inf", "odd int <0", -0.0)
R("pow", "-inf", "not odd int <0", 0.0)
R("pow", "+0", ">0", 0.0)
R("pow", "+0", "<0", INF)
R("pow", "-0", "odd int >0", -0.0)
R("pow", "-0", "not odd int >0", 0.0)
R("pow", "-0", "odd int <0", -INF)
R("pow", "-0", "not odd int <0", INF)
R("pow", "<0 finite non-int", "finite non-int", NAN)
R("pow", "<0 finite", "finite non-int", NAN)

# reciprocal: as 1.0 / x
R("reciprocal", "NaN", NAN)
R("reciprocal", "+0", INF)
R("reciprocal", "-0", -INF)
R("reciprocal", "+inf", 0.0)
R("reciprocal", "-inf", -0.0)
R("reciprocal", "positive finite", POS)
R("reciprocal", "negative finite", NEG)

# remainder
R("remainder", "NaN", "any", NAN)
R("remainder", "any", "NaN", NAN)
R("remainder", "+-inf", "+-inf", NAN)
R("remainder", "+-0", "+-0", NAN)
R("remainder", "+0", ">0", 0.0)
R("remainder", "-0", ">0", 0.0)
R("remainder", "+0", "<0", -0.0)
R("remainder", "-0", "<0", -0.0)
R("remainder", ">0", "+-0", NAN)
R("remainder", "<0", "+-0", NAN)
R("remainder", "+-inf", "nonzero finite", NAN)
R("remainder", "positive finite", "+inf", lambda x1, x2: x1)
R("remainder", "positive finite", "-inf", lambda x1, x2: x2)
R("remainder", "negative finite", "+inf", lambda x1, x2: x2)
R("remainder", "negative finite", "-inf", lambda x1, x2: x1)

# sign
R("sign", "<0", -1.0)
R("sign", "+-0", ZERO)
R("sign", ">0", 1.0)
R("sign", "NaN", NAN)
Z("sign", "+-0", "+-0", ZERO, ZERO)
Z("sign", "NaN", "any", NAN, NAN)
Z("sign", "any", "NaN", NAN, NAN)

# signbit
R("signbit", "+0", False)
R("signbit", "-0", True)
R("signbit", "+inf", False)
R("signbit", "-inf", True)
R("signbit", "positive finite", False)
R("signbit", "negative finite", True)
R("signbit", "NaN", False)
R("signbit", "-NaN", True)

# sin, tan (real)
R("sin", "NaN", NAN)
R("sin", "+0", 0.0)
R("sin", "-0", -0.0)
R("sin", "+-inf", NAN)
R("tan", "NaN", NAN)
R("tan", "+0", 0.0)
R("tan", "-0", -0.0)
R("tan", "+-inf", NAN)

# sinh
R("sinh", "NaN", NAN)
R("sinh", "+0", 0.0)
R("sinh", "-0", -0.0)
R("sinh", "+inf", INF)
R("sinh", "-inf", -INF)
Z("sinh", "+0", "+0", 0.0, 0.0)
Z("sinh", "+0", "+inf", ZERO, NAN)
Z("sinh", "+0", "NaN", ZERO, NAN)
Z("sinh", "positive finite", "+inf", NAN, NAN)
Z("sinh", "positive finite", "NaN", NAN, NAN)
Z("sinh", "+inf", "+0", INF, 0.0)
Z("sinh", "+inf", "positive finite", *cis_times(INF))
Z("sinh", "+inf", "+inf", INF_ANY, NAN)
Z("sinh", "+inf", "NaN", INF_ANY, NAN)
Z("sinh", "NaN", "+0", NAN, 0.0)
Z("sinh", "NaN", "nonzero finite", NAN, NAN)
Z("sinh", "NaN", "NaN", NAN, NAN)

# square: as x * x
R("square", "NaN", NAN)
R("square", "+-inf", INF)
R("square", "+-0", 0.0)
R("square", "nonzero finite", POS)

# sqrt
R("sqrt", "NaN", NAN)
R("sqrt", "<0", NAN)
R("sqrt", "+0", 0.0)
R("sqrt", "-0", -0.0)
R("sqrt", "+inf", INF)
Z("sqrt", "+-0", "+0", 0.0, 0.0)
Z("sqrt", "any", "+inf", INF, INF)
Z("sqrt", "finite", "NaN", NAN, NAN)
Z("sqrt", "-inf", "positive finite", 0.0, INF)
Z("sqrt", "+inf", "positive finite", INF, 0.0)
Z("sqrt", "-inf", "NaN", NAN, INF_ANY)
Z("sqrt", "+inf", "NaN", INF, NAN)
Z("sqrt", "NaN", "finite", NAN, NAN)
Z("sqrt", "NaN", "NaN", NAN, NAN)

# tanh
R("tanh", "NaN", NAN)
R("tanh", "+0", 0.0)
R("tanh", "-0", -0.0)
R("tanh", "+inf", 1.0)
R("tanh", "-inf", -1.0)
Z("tanh", "+0", "+0", 0.0, 0.0)
Z("tanh", "nonzero finite", "+inf", NAN, NAN)
Z("tanh", "+0", "+inf", 0.0, NAN)
Z("tanh", "nonzero finite", "NaN", NAN, NAN)
Z("tanh", "+0", "NaN", 0.0, NAN)
Z("tanh", "+inf", "positive finite", 1.0, 0.0)
Z("tanh", "+inf", "+inf", 1.0, ZERO)
Z("tanh", "+inf", "NaN", 1.0, ZERO)
Z("tanh", "NaN", "+0", NAN, 0.0)
Z("tanh", "NaN", "nonzero number", NAN, NAN)
Z("tanh", "NaN", "NaN", NAN, NAN)


# ---- rows derived as the spec says ------------------------------------------------------------
def _derive(source, target, rotate_result):
    """target(z) = -1j * source(1j * z) (rotate_result) or source(1j * z): a source row for
    w = a + bj becomes a target row for z = -1j * w = b - aj."""
    for row in [r for r in ROWS if r.fn == source and r.kind == "complex"]:
        a, b = row.ins
        re, im = row.want
        ins = (b, "neg:" + a)
        if rotate_result:  # -1j * (re + im j) = im - re j
            want = (_rotate_input(im), _rotate_input(neg(re)))
        else:
            want = (_rotate_input(re), _rotate_input(im))
        ROWS.append(Row(target, "complex", ins, want))


def _rotate_input(spec):
    """Expectations computed from (a, b) of the source row, called with the target's (a', b') =
    (b, -a): the source's inputs are (a, b) = (-b', a')."""
    if callable(spec):
        return lambda a2, b2: spec(-b2, a2)
    return spec


for _name in list(C):
    C["neg:" + _name] = [-v for v in C[_name]]
_derive("asinh", "asin", True)
_derive("atanh", "atan", True)
_derive("sinh", "sin", True)
_derive("tanh", "tan", True)
_derive("cosh", "cos", False)

# The standard requires f(conj(x)) == conj(f(x)) of these functions: each complex row mirrored to
# the lower half-plane (-0, -inf and negative imaginary parts, the other side of the branch cuts).
CONJUGATE_SYMMETRIC = {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1", "log",
                       "log1p", "log2", "log10", "sin", "sinh", "sqrt", "tan", "tanh"}


def _conjugate(spec, negate):
    if callable(spec):
        return lambda a, b: _conjugate(spec(a, -b), negate)
    return neg(spec) if negate else spec


for _row in [r for r in ROWS if r.kind == "complex" and r.fn in CONJUGATE_SYMMETRIC]:
    _a, _b = _row.ins
    _re, _im = _row.want
    _nb = _b[4:] if _b.startswith("neg:") else "neg:" + _b
    ROWS.append(Row(_row.fn, "complex", (_a, _nb), (_conjugate(_re, False), _conjugate(_im, True)),
                    note="conj"))

# subtract: x1 - x2 is x1 + (-x2)
for _row in [r for r in ROWS if r.fn == "add" and r.kind == "real"]:
    _x1, _x2 = _row.ins
    _want = _row.want
    if callable(_want):
        _want = (lambda f: lambda x1, x2: f(x1, -x2))(_want)
    if _x2 == "-x1":
        ROWS.append(Row("subtract", "real", (_x1, "same"), 0.0))
    else:
        ROWS.append(Row("subtract", "real", (_x1, "neg:" + _x2), _want))
for _name in list(C):
    if not _name.startswith("neg:"):
        C.setdefault("neg:" + _name, [-v for v in C[_name]])


# ---- statistical functions: (function, values, kwargs, expected) -------------------------------
REDUCTION_ROWS = [
    # sum / prod of zero elements: the empty sum is 0, the empty product is 1
    ("sum", [], {}, 0.0),
    ("prod", [], {}, 1.0),
    ("cumulative_sum", [], {}, "empty"),
    # NaN propagates through max, min, mean, sum, prod
    ("max", [1.0, NAN, 3.0], {}, NAN),
    ("min", [1.0, NAN, -3.0], {}, NAN),
    ("mean", [1.0, NAN, 3.0], {}, NAN),
    ("sum", [1.0, NAN, 3.0], {}, NAN),
    ("prod", [1.0, NAN, 3.0], {}, NAN),
    # the mean of zero elements is NaN; var/std with N - correction <= 0 are NaN
    ("mean", [], {}, NAN),
    ("var", [2.0], {"correction": 1}, NAN),
    ("std", [2.0], {"correction": 1}, NAN),
    ("var", [2.0, NAN], {}, NAN),
    ("std", [2.0, NAN], {}, NAN),
    ("var", [], {}, NAN),
    ("std", [], {}, NAN),
]
