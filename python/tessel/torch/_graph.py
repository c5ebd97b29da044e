"""The expression graph of tessel.torch.fuse: tracing, symbolic differentiation and lowering.

A fused function is traced once per argument count with `Tracer` objects, which answer torch's
elementwise functions (through __torch_function__), the Tensor methods and the operators by
recording nodes. The graph is kept in Python, where it can be differentiated: tessel's own
trace values (tessel.Sym) do not expose their structure. Both the function's graph and its
derivative graphs are then lowered to tessel.Sym and compiled as tessel FusedKernels, and they
can be evaluated with torch ops (`evaluate`), which gives the fake (meta) implementation the
exact shapes and dtypes torch would produce.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tessel import _tessel


class Node:
    """One node: an input (op "input", `index`), a Python constant (op "const", `value`) or an op
    applied to `args` (op: tessel's function name, or "clip" with `value` = (has_lo, has_hi))."""
    __slots__ = ("op", "args", "value", "index", "__weakref__")

    def __init__(self, op, args=(), value=None, index=-1):
        self.op, self.args, self.value, self.index = op, tuple(args), value, index

    def is_const(self, value=None):
        return self.op == "const" and (value is None or (type(self.value) is not bool and self.value == value))


def const(v) -> Node:
    return Node("const", value=v)


def inp(i) -> Node:
    return Node("input", index=i)


# ---- node builders with the constant folding that keeps derivative graphs small ----
# Identities (x + 0, x * 1, x * 0) are folded only while differentiating: in a traced function
# they could change the result's dtype or shape (a bool tensor * 1 is int64; x * 0 is NaN where x is
# inf), while a derivative's result is cast to its input's dtype and summed to its shape anyway.
_identities = False


def add(a, b):
    if _identities and a.is_const(0):
        return b
    if _identities and b.is_const(0):
        return a
    if a.op == "const" and b.op == "const":
        return const(a.value + b.value)
    return make("add", (a, b))


def neg(a):
    if a.op == "const":
        return const(-a.value)
    if a.op == "negative":
        return a.args[0]
    return make("negative", (a,))


def sub(a, b):
    if _identities and b.is_const(0):
        return a
    if _identities and a.is_const(0):
        return neg(b)
    return make("subtract", (a, b))


def mul(a, b):
    if _identities:
        if a.is_const(0) or b.is_const(0):
            return const(0)
        if a.is_const(1):
            return b
        if b.is_const(1):
            return a
        if a.is_const(-1):
            return neg(b)
        if b.is_const(-1):
            return neg(a)
    if a.op == "const" and b.op == "const":
        return const(a.value * b.value)
    return make("multiply", (a, b))


def div(a, b):
    if _identities and a.is_const(0):
        return const(0)
    if _identities and b.is_const(1):
        return a
    return make("divide", (a, b))


def make(name, args, value=None):
    """An op node, or the constant it computes when every argument is a constant (so that no op
    on constants alone reaches the kernel; folded in float64 / int64 / bool, as Python numbers)."""
    node = Node(name, args, value=value)
    if args and all(a.op == "const" for a in args):
        return const(evaluate(node, []).item())
    return node


def op(name, *args):
    return make(name, args)


def where(c, a, b):
    if _identities and a.is_const(0) and b.is_const(0):
        return const(0)
    if c.op == "const":
        return a if c.value else b
    return make("where", (c, a, b))


# ---- what torch functions mean: (tessel op, arity) ----
# torch's unary functions: every unary op of tessel's op list under its own name, where torch has a
# function of that name, and these other spellings.
_UNARY_ALIASES = {
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
    "arctanh": "atanh", "absolute": "abs", "neg": "negative", "fix": "trunc", "sgn": "sign",
    "bitwise_not": "bitwise_invert",
}
# Not traced: the complex-number functions, which torch gives other meanings on real tensors (real
# and conj return the tensor itself, imag raises).
_NOT_TRACED = {"real", "imag", "conj", "angle"}
_UNARY = {name: name for name in _tessel._unary_functions if name not in _NOT_TRACED and hasattr(torch, name)}
_UNARY.update(_UNARY_ALIASES)
_BINARY = {
    "add": "add", "sub": "subtract", "subtract": "subtract", "mul": "multiply", "multiply": "multiply",
    "div": "divide", "divide": "divide", "true_divide": "divide", "pow": "pow", "float_power": None,
    "maximum": "maximum", "minimum": "minimum", "atan2": "atan2", "arctan2": "atan2", "hypot": "hypot",
    "logaddexp": "logaddexp", "remainder": "remainder", "fmod": None, "floor_divide": "floor_divide",
    "copysign": "copysign", "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
    "gt": "greater", "ge": "greater_equal", "greater": "greater", "less": "less",
    "greater_equal": "greater_equal", "less_equal": "less_equal", "not_equal": "not_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
}
_OPERATORS = {
    "__add__": ("add", False), "__radd__": ("add", True), "__sub__": ("subtract", False),
    "__rsub__": ("subtract", True), "__mul__": ("multiply", False), "__rmul__": ("multiply", True),
    "__truediv__": ("divide", False), "__rtruediv__": ("divide", True), "__pow__": ("pow", False),
    "__rpow__": ("pow", True), "__mod__": ("remainder", False), "__rmod__": ("remainder", True),
    "__floordiv__": ("floor_divide", False), "__rfloordiv__": ("floor_divide", True),
    "__eq__": ("equal", False), "__ne__": ("not_equal", False), "__lt__": ("less", False),
    "__le__": ("less_equal", False), "__gt__": ("greater", False), "__ge__": ("greater_equal", False),
    "__and__": ("bitwise_and", False), "__rand__": ("bitwise_and", True), "__or__": ("bitwise_or", False),
    "__ror__": ("bitwise_or", True), "__xor__": ("bitwise_xor", False), "__rxor__": ("bitwise_xor", True),
}

NOT_DIFFERENTIABLE = {
    "floor", "ceil", "trunc", "round", "sign", "isnan", "isinf", "isfinite", "signbit", "logical_not",
    "bitwise_invert", "floor_divide", "copysign", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
}


class TraceError(TypeError):
    """A function that tessel.torch.fuse cannot fuse (raised while tracing)."""


def _qualname(func) -> str:
    name = getattr(func, "__name__", repr(func))
    module = getattr(func, "__module__", None) or ""
    if module.startswith("torch._C._nn") or module.startswith("torch.nn.functional"):
        return f"torch.nn.functional.{name}"
    if "Tensor" in getattr(func, "__qualname__", "") or module == "torch._tensor":
        return f"torch.Tensor.{name}"
    if module.startswith("torch._C._special") or module.startswith("torch.special"):
        return f"torch.special.{name}"
    return f"torch.{name}"


class Tracer:
    """The stand-in for a tensor argument while a fused function is traced."""
    __slots__ = ("node", "fname")

    def __init__(self, node, fname):
        self.node, self.fname = node, fname

    # torch.* functions and Tensor methods reach here through torch's override protocol.
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        fname = next((a.fname for a in _flatten(args) if isinstance(a, Tracer)), "fuse")
        return _apply_torch(func, args, kwargs or {}, fname)

    def _lift(self, other):
        return _lift(other, self.fname, "an operator")

    def __neg__(self):
        return Tracer(neg(self.node), self.fname)

    def __pos__(self):
        return self

    def __abs__(self):
        return Tracer(op("abs", self.node), self.fname)

    def __invert__(self):
        return Tracer(op("bitwise_invert", self.node), self.fname)

    def __getitem__(self, index):
        raise TraceError(f"tessel.torch.fuse({self.fname}): indexing (x[...]) is not elementwise and cannot be fused")

    def __bool__(self):
        raise TraceError(f"tessel.torch.fuse({self.fname}): the value of a traced tensor is unknown while tracing "
                         "(Python if/and/or/not on tensors cannot be fused; use torch.where)")

    def __iter__(self):
        raise TraceError(f"tessel.torch.fuse({self.fname}): iterating over a tensor is not elementwise and cannot be fused")

    def __len__(self):
        raise TraceError(f"tessel.torch.fuse({self.fname}): len() of a traced tensor is unknown while tracing")

    def __matmul__(self, other):
        raise TraceError(f"tessel.torch.fuse({self.fname}): matmul (@) is not elementwise and cannot be fused")

    __rmatmul__ = __matmul__

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        method = getattr(torch.Tensor, name, None)
        if method is None:
            raise AttributeError(f"tessel.torch.fuse({self.fname}): torch.Tensor has no attribute {name!r}")
        if not callable(method):
            raise TraceError(f"tessel.torch.fuse({self.fname}): x.{name} is not known while tracing "
                             "(a fused function sees only elementwise values)")
        return lambda *args, **kwargs: _apply_torch(method, (self,) + args, kwargs, self.fname)

    __hash__ = None


def _make_operator(tessel_name, reflected):
    def operator(self, other):
        other = self._lift(other)
        a, b = (other, self.node) if reflected else (self.node, other)
        return Tracer(_binary(tessel_name, a, b), self.fname)
    return operator


for _name, (_op, _reflected) in _OPERATORS.items():
    setattr(Tracer, _name, _make_operator(_op, _reflected))


def _flatten(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flatten(a)
        else:
            yield a


def _lift(value, fname, where_):
    if isinstance(value, Tracer):
        return value.node
    if isinstance(value, (bool, int, float)):
        return const(value)
    if isinstance(value, torch.Tensor):
        raise TraceError(f"tessel.torch.fuse({fname}): a tensor that is not an argument (a global or closure) "
                         f"reaches {where_}; pass it as an argument of the fused function")
    raise TraceError(f"tessel.torch.fuse({fname}): {type(value).__name__} cannot be an operand of {where_} "
                     "(only tensor arguments and Python numbers)")


def _binary(name, a, b):
    builders = {"add": add, "subtract": sub, "multiply": mul, "divide": div}
    return builders[name](a, b) if name in builders else make(name, (a, b))


def _gelu(x, approximate):
    if approximate == "none":
        return op("gelu", x)
    if approximate != "tanh":
        raise TraceError(f"gelu: unknown approximate={approximate!r}")
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), torch's formula
    inner = mul(const(math.sqrt(2 / math.pi)), add(x, mul(const(0.044715), mul(x, mul(x, x)))))
    return mul(mul(const(0.5), x), add(const(1), op("tanh", inner)))


def _apply_torch(func, args, kwargs, fname):
    """The node of one torch call on traced values; a TraceError for anything not elementwise."""
    name = getattr(func, "__name__", "")
    qual = _qualname(func)
    if name.endswith("_") and not name.startswith("__"):
        raise TraceError(f"tessel.torch.fuse({fname}): {qual} writes its input in place; fused functions must be pure")
    for k, v in kwargs.items():
        if k == "out" and v is not None:
            raise TraceError(f"tessel.torch.fuse({fname}): {qual}(out=...) cannot be fused")
    lift = lambda v: _lift(v, fname, qual)  # noqa: E731

    if name in _OPERATORS:  # torch.Tensor.__add__ etc. when the left operand is a tensor
        tessel_name, reflected = _OPERATORS[name]
        a, b = lift(args[0]), lift(args[1])
        return Tracer(_binary(tessel_name, *((b, a) if reflected else (a, b))), fname)
    if name in ("__neg__",):
        return Tracer(neg(lift(args[0])), fname)
    if name in ("__abs__",):
        return Tracer(op("abs", lift(args[0])), fname)

    def only(*allowed):
        extra = set(kwargs) - set(allowed) - {"out"}
        if extra:
            raise TraceError(f"tessel.torch.fuse({fname}): {qual} with {', '.join(sorted(extra))}= cannot be fused")

    if name in ("gelu",):
        only("approximate")
        approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
        return Tracer(_gelu(lift(args[0]), approximate), fname)
    if name in ("silu",):
        only("inplace")
        x = lift(args[0])
        return Tracer(mul(x, op("sigmoid", x)), fname)
    if name in ("softplus",):
        only("beta", "threshold")
        beta = kwargs.get("beta", args[1] if len(args) > 1 else 1.0)
        if beta != 1:
            x = lift(args[0])
            return Tracer(div(op("softplus", mul(x, const(beta))), const(beta)), fname)
        return Tracer(op("softplus", lift(args[0])), fname)
    if name in ("expit",):
        return Tracer(op("sigmoid", lift(args[0])), fname)
    if name in ("where",):
        if len(args) != 3:
            raise TraceError(f"tessel.torch.fuse({fname}): {qual} needs (condition, x, y); the one-argument form is not elementwise")
        return Tracer(where(*map(lift, args)), fname)
    if name in ("clamp", "clip"):
        only("min", "max")
        lo = kwargs.get("min", args[1] if len(args) > 1 else None)
        hi = kwargs.get("max", args[2] if len(args) > 2 else None)
        bounds = [lift(b) for b in (lo, hi) if b is not None]
        return Tracer(make("clip", (lift(args[0]), *bounds), value=(lo is not None, hi is not None)), fname)
    if name in ("clamp_min", "clamp_max"):
        lo_hi = (True, False) if name == "clamp_min" else (False, True)
        return Tracer(make("clip", (lift(args[0]), lift(args[1])), value=lo_hi), fname)
    if name in ("add", "sub", "subtract") and ("alpha" in kwargs or len(args) > 2):
        only("alpha")
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        tessel_name = _BINARY[name]
        return Tracer(_binary(tessel_name, lift(args[0]), mul(lift(args[1]), const(alpha))), fname)
    if name in ("div", "divide") and kwargs.get("rounding_mode") is not None:
        raise TraceError(f"tessel.torch.fuse({fname}): {qual}(rounding_mode=...) cannot be fused")
    if name in _UNARY and len(args) == 1:
        only("inplace") if name == "relu" else only()
        return Tracer(op(_UNARY[name], lift(args[0])), fname)
    if name in ("round",) and (len(args) > 1 or kwargs):
        raise TraceError(f"tessel.torch.fuse({fname}): {qual}(decimals=...) cannot be fused")
    if name in _BINARY and _BINARY[name] is not None and len(args) == 2:
        only("rounding_mode") if name in ("div", "divide") else only()
        return Tracer(_binary(_BINARY[name], lift(args[0]), lift(args[1])), fname)
    if name in ("max", "min") and len(args) == 2 and not kwargs and not isinstance(args[1], int):
        return Tracer(make("maximum" if name == "max" else "minimum", (lift(args[0]), lift(args[1]))), fname)
    raise TraceError(f"tessel.torch.fuse({fname}): {qual} is not an elementwise operation that can be fused "
                     "(reductions, indexing, shape changes, casts and random numbers cannot be)")


# ---- symbolic differentiation (reverse mode over the DAG) ----
LN2, LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT1_2, _INV_SQRT_2PI = 1.0 / math.sqrt(2.0), 1.0 / math.sqrt(2.0 * math.pi)


def _rule(n: Node, g: Node):
    """The adjoint contributions of node n's arguments, given n's adjoint g (None: no gradient)."""
    a = n.args
    x = a[0] if a else None
    name = n.op
    if name == "add":
        return [g, g]
    if name == "subtract":
        return [g, neg(g)]
    if name == "multiply":
        return [mul(g, a[1]), mul(g, x)]
    if name == "divide":
        return [div(g, a[1]), neg(div(mul(g, x), mul(a[1], a[1])))]
    if name == "pow":
        y = a[1]
        if y.op == "const":
            gx = const(0) if y.value == 0 else mul(mul(g, y), op("pow", x, const(y.value - 1)))
        else:  # torch: zero where the exponent is 0
            gx = where(op("equal", y, const(0)), const(0), mul(mul(g, y), op("pow", x, sub(y, const(1)))))
        # torch: d/dy x**y = x**y log x, zero where x == 0 and y >= 0
        gy = where(op("logical_and", op("equal", x, const(0)), op("greater_equal", y, const(0))),
                   const(0), mul(mul(g, n), op("log", x)))
        return [gx, gy]
    if name == "negative":
        return [neg(g)]
    if name == "positive":
        return [g]
    if name == "abs":
        return [mul(g, op("sign", x))]
    if name == "square":
        return [mul(mul(const(2), x), g)]
    if name == "reciprocal":
        return [neg(mul(g, mul(n, n)))]
    if name == "exp":
        return [mul(g, n)]
    if name == "exp2":
        return [mul(g, mul(n, const(LN2)))]
    if name == "expm1":
        return [mul(g, add(n, const(1)))]
    if name == "log":
        return [div(g, x)]
    if name == "log2":
        return [div(g, mul(x, const(LN2)))]
    if name == "log10":
        return [div(g, mul(x, const(LN10)))]
    if name == "log1p":
        return [div(g, add(x, const(1)))]
    if name == "sqrt":
        return [div(g, mul(const(2), n))]
    if name == "rsqrt":
        return [mul(mul(const(-0.5), g), mul(n, mul(n, n)))]
    if name == "sin":
        return [mul(g, op("cos", x))]
    if name == "cos":
        return [neg(mul(g, op("sin", x)))]
    if name == "tan":
        return [mul(g, add(const(1), mul(n, n)))]
    if name == "asin":
        return [mul(g, op("rsqrt", sub(const(1), mul(x, x))))]
    if name == "acos":
        return [neg(mul(g, op("rsqrt", sub(const(1), mul(x, x)))))]
    if name == "atan":
        return [div(g, add(const(1), mul(x, x)))]
    if name == "sinh":
        return [mul(g, op("cosh", x))]
    if name == "cosh":
        return [mul(g, op("sinh", x))]
    if name == "tanh":
        return [mul(g, sub(const(1), mul(n, n)))]
    if name == "asinh":
        return [mul(g, op("rsqrt", add(mul(x, x), const(1))))]
    if name == "acosh":
        return [mul(g, op("rsqrt", sub(mul(x, x), const(1))))]
    if name == "atanh":
        return [div(g, sub(const(1), mul(x, x)))]
    if name == "sigmoid":
        return [mul(g, mul(n, sub(const(1), n)))]
    if name == "relu":  # torch: the gradient passes where the result is positive
        return [where(op("greater", n, const(0)), g, const(0))]
    if name == "gelu":
        cdf = mul(const(0.5), add(const(1), op("erf", mul(x, const(_SQRT1_2)))))
        pdf = mul(op("exp", mul(const(-0.5), mul(x, x))), const(_INV_SQRT_2PI))
        return [mul(g, add(cdf, mul(x, pdf)))]
    if name == "erf":
        return [mul(g, mul(const(_TWO_OVER_SQRT_PI), op("exp", neg(mul(x, x)))))]
    if name == "softplus":
        return [mul(g, op("sigmoid", x))]
    if name in ("maximum", "minimum"):
        y = a[1]
        loses = "less" if name == "maximum" else "greater"  # torch: ties split the gradient
        half = mul(g, const(0.5))
        tie = op("equal", x, y)
        gx = where(op(loses, x, y), const(0), where(tie, half, g))
        gy = where(op(loses, y, x), const(0), where(tie, half, g))
        return [gx, gy]
    if name == "clip":  # torch: the gradient passes where lo <= x <= hi
        has_lo, has_hi = n.value
        mask = None
        bounds = list(a[1:])
        if has_lo:
            mask = op("greater_equal", x, bounds.pop(0))
        if has_hi:
            upper = op("less_equal", x, bounds.pop(0))
            mask = upper if mask is None else op("logical_and", mask, upper)
        return [where(mask, g, const(0))] + [None] * (len(a) - 1) if mask is not None else [g]
    if name == "where":
        return [None, where(a[0], g, const(0)), where(a[0], const(0), g)]
    if name == "atan2":
        y_, x_ = a  # atan2(y, x)
        r2 = add(mul(x_, x_), mul(y_, y_))
        return [div(mul(g, x_), r2), neg(div(mul(g, y_), r2))]
    if name == "hypot":
        return [div(mul(g, x), n), div(mul(g, a[1]), n)]
    if name == "logaddexp":
        return [mul(g, op("sigmoid", sub(x, a[1]))), mul(g, op("sigmoid", sub(a[1], x)))]
    if name == "remainder":  # x - floor(x / y) * y
        return [g, neg(mul(g, op("floor_divide", x, a[1])))]
    raise AssertionError(f"no derivative rule for {name}")


class NotDifferentiableError(RuntimeError):
    """A gradient is needed through an operation that has none."""


def _topo(root):
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for arg in node.args:
            if id(arg) not in seen:
                stack.append((arg, False))
    return order  # arguments before their users


def gradients(root: Node, num_inputs: int, needs, fname: str, seed: Node = None):
    """Expressions of d(root)/d(input i) times the incoming gradient `seed` (default: input
    `num_inputs`) for each i with needs[i]; None for the others. NotDifferentiableError names the
    op a needed gradient would cross."""
    global _identities
    _identities = True
    try:
        return _gradients(root, num_inputs, needs, fname, inp(num_inputs) if seed is None else seed)
    finally:
        _identities = False


def _gradients(root, num_inputs, needs, fname, seed):
    order = _topo(root)
    live = set()  # nodes that depend on an input whose gradient is needed
    for node in order:
        if (node.op == "input" and needs[node.index]) or any(id(a) in live for a in node.args):
            live.add(id(node))
    adjoint = {id(root): seed}
    for node in reversed(order):
        g = adjoint.get(id(node))
        if g is None or node.op in ("input", "const") or id(node) not in live or g.is_const(0):
            continue
        if node.op in NOT_DIFFERENTIABLE:
            wanted = sorted({a.index for a in _topo(node) if a.op == "input" and needs[a.index]})
            raise NotDifferentiableError(
                f"tessel.torch.fuse({fname}): {node.op} is not differentiable, and the gradient of input "
                f"{', '.join(map(str, wanted))} (requires_grad) would flow through it; use torch.where for "
                "masks, or detach the input")
        for arg, contribution in zip(node.args, _rule(node, g)):
            if contribution is None or id(arg) not in live:
                continue
            previous = adjoint.get(id(arg))
            adjoint[id(arg)] = contribution if previous is None else add(previous, contribution)
    result = [None] * num_inputs
    for node in order:
        if node.op == "input" and needs[node.index]:
            result[node.index] = adjoint.get(id(node), const(0))
    return [r if r is not None or not needs[i] else const(0) for i, r in enumerate(result)]


def inputs_of(root: Node):
    """The sorted input indices an expression reads."""
    return sorted({n.index for n in _topo(root) if n.op == "input"})


# ---- lowering ----
def to_sym(root: Node, positions):
    """tessel.Sym of the expression; `positions` maps input index -> FusedKernel input position."""
    return to_syms([root], positions)[0]


def to_syms(roots, positions):
    """tessel.Sym of each expression, one Sym per shared node (a kernel of several outputs then
    computes what they share once)."""
    memo = {}
    for node in (n for root in roots for n in _topo(root)):
        if id(node) in memo:
            continue
        if node.op == "input":
            value = _tessel._sym_input(positions[node.index])
        elif node.op == "const":
            value = node.value
        elif node.op == "clip":
            args = [memo[id(a)] for a in node.args]
            value, bounds = args[0], args[1:]
            has_lo, has_hi = node.value
            if has_lo:
                value = _tessel.maximum(value, bounds.pop(0))
            if has_hi:
                value = _tessel.minimum(value, bounds.pop(0))
        else:
            value = getattr(_tessel, node.op)(*[memo[id(a)] for a in node.args])
        memo[id(node)] = value
    return [memo[id(root)] for root in roots]


_OPERATOR_EVAL = {
    "add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b, "pow": lambda a, b: a ** b, "remainder": lambda a, b: a % b,
    "floor_divide": lambda a, b: a // b, "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b, "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
}
_TORCH = {
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2, "hypot": torch.hypot,
    "logaddexp": torch.logaddexp, "copysign": torch.copysign, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    # The unary ops torch spells otherwise; the others are torch.<name> (below).
    "gelu": F.gelu, "softplus": F.softplus, "bitwise_invert": torch.bitwise_not,
}
_TORCH.update({name: getattr(torch, name) for name in _UNARY.values() if name not in _TORCH})


def _as_tensor(value, like):
    """A Python number as a 0-d tensor on `like`'s device (0-d tensors promote as weakly as
    Python numbers do within a dtype category)."""
    return value if isinstance(value, torch.Tensor) else torch.full((), value, device=like.device)


def evaluate(root: Node, tensors):
    """The expression evaluated with torch ops on `tensors` (input i = tensors[i]): torch's shapes
    and dtypes, on any device, fake and meta tensors included."""
    memo = {}
    for node in _topo(root):
        if node.op == "input":
            value = tensors[node.index]
        elif node.op == "const":
            value = node.value
        else:
            args = [memo[id(a)] for a in node.args]
            tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if tensor is None:  # an op of constants only (folding): 0-d CPU tensors, float64 for floats
                args = [torch.tensor(a, dtype=torch.float64 if isinstance(a, float) else None) for a in args]
                tensor = args[0]
            if node.op == "clip":
                has_lo, has_hi = node.value
                lo = args[1] if has_lo else None
                hi = args[1 + has_lo] if has_hi else None
                value = torch.clamp(args[0], lo, hi)
            elif node.op in _OPERATOR_EVAL:
                value = _OPERATOR_EVAL[node.op](*args)
            elif node.op == "where":
                value = torch.where(_as_tensor(args[0], tensor), _as_tensor(args[1], tensor), _as_tensor(args[2], tensor))
            else:
                value = _TORCH[node.op](*[_as_tensor(a, tensor) for a in args])
        memo[id(node)] = value
    return memo[id(root)]
