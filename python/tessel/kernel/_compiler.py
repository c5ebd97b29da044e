"""Python kernel -> C++: parse with ``ast``, infer types from the call's argument types, emit C++
for CUDA (NVRTC) or for the CPU backend (the host compiler).

Every local variable is declared at the top of the generated function, with the type NumPy's
promotion gives all its assignments. Device functions are inlined at each call. On the CPU, a
kernel whose threads meet at barriers or warp intrinsics runs each thread as a resumable
function: a thread runs until it reaches such a site, saves where it stopped (its locals live in
a per-thread state), and resumes once every thread of its warp or block has arrived and the
values they exchange are computed (continuation-based synchronization, as MCUDA/POCL do).
"""
from __future__ import annotations

import ast
import builtins
import cmath
import enum
import inspect
import math
import operator
import sys
import textwrap
import types as pytypes
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from . import _intrinsics as I
from . import _libdevice
from ._types import (BOOL, COMPLEX128, FLOAT32, FLOAT64, INT32, INT64, UINT32, UINT64, WEAK_BOOL, WEAK_COMPLEX,
                     WEAK_FLOAT, WEAK_INT, ArrayT, NoneT, RecordT, Scalar, TupleT, can_store, field_alignment,
                     float_type_of, is_int, is_intlike, number_rules, numba_rules, promote, scalar_from_dtype,
                     operator_type, true_divide_type, unify)


class KernelCompileError(TypeError):
    """A kernel that tessel cannot compile: the message names the kernel, file and line."""


_NOCONST = object()


@dataclass
class Val:
    """A typed expression: C++ code, or a compile-time Python value (modules, functions, tuples)."""
    code: Optional[str]
    type: Any
    nonneg: bool = False
    const: Any = _NOCONST          # a compile-time value (Python number, module, intrinsic...)
    items: Optional[List["Val"]] = None   # tuple components
    gstride: bool = False          # derived from the grid's size (a grid-stride loop's step)
    uptr: Optional[str] = None     # a record field not aligned for its type: its address (stores go byte-wise)

    @property
    def is_const(self):
        return self.const is not _NOCONST


class CompileTime:
    def __str__(self):
        return "compile-time value"


CT = CompileTime()


def _literal_code(value, t: Scalar) -> str:
    if t.kind == "b":
        return "true" if value else "false"
    if t.kind in "iu":
        v = int(value)
        if t.kind == "u":
            return f"{v}ull" if t.name == "uint64" else f"({t.ctype}){v}u"
        if t.name == "int64" or t.weak:
            return f"{v}ll" if -2**63 < v < 2**63 else f"(-9223372036854775807ll - 1)"
        return f"({t.ctype}){v}"
    if t.kind == "f":
        v = float(value)
        if math.isnan(v):
            code = "ts::nan()"
        elif math.isinf(v):
            code = "ts::inf()" if v > 0 else "(-ts::inf())"
        else:
            code = repr(v)
            if "e" not in code and "." not in code:
                code += ".0"
        if t.name == "float64" or t.weak:
            return code if "ts::" in code else f"{code}"
        return f"ts::cast<{t.ctype}>({code})"
    c = complex(value)
    base = "double" if t.name == "complex128" or t.weak else "float"
    return f"{t.ctype}(({base}){_literal_code(c.real, FLOAT64)}, ({base}){_literal_code(c.imag, FLOAT64)})"


def _type_of_python_value(v):
    if isinstance(v, (bool, np.bool_)):
        return WEAK_BOOL if isinstance(v, bool) else BOOL
    if isinstance(v, int):
        return WEAK_INT
    if isinstance(v, float):
        return WEAK_FLOAT
    if isinstance(v, complex):
        return WEAK_COMPLEX
    if isinstance(v, np.generic):
        return scalar_from_dtype(v.dtype)
    return None


def _is_dtype_object(obj):
    """A NumPy/tessel dtype, scalar type or Numba-style type object usable as a cast."""
    if isinstance(obj, type) and issubclass(obj, np.generic):
        return True
    if isinstance(obj, np.dtype):
        return True
    if obj in (int, float, bool, complex):
        return False
    mod = type(obj).__module__ or ""
    if mod.startswith("tessel") and hasattr(obj, "name") and not callable(getattr(obj, "shape", None)):
        try:
            scalar_from_dtype(obj)
            return True
        except TypeError:
            return False
    if hasattr(obj, "_ts_dtype"):
        return True
    return False


def _dtype_scalar(obj) -> Scalar:
    if hasattr(obj, "_ts_dtype"):
        return scalar_from_dtype(obj._ts_dtype)
    return scalar_from_dtype(obj)


@dataclass
class VarInfo:
    type: Any = None
    nonneg: bool = True
    cname: str = ""
    gstride: bool = False
    const: Any = _NOCONST   # assigned once, a number: its value is known at compile time too


@dataclass
class Site:
    """A place where the threads of a warp or block exchange values (CPU backend)."""
    id: int
    kind: str
    level: str            # "warp" or "block"
    vtype: Any = None     # the exchanged value's type
    rtype: Any = None     # the result's type
    op: Any = None        # reductions/scans: "sum", "min", "max" or a standalone function name
    line: int = 0


class Root:
    """What one generated kernel shares across the functions inlined into it."""

    def __init__(self, target: str, options):
        self.target = target
        self.options = options
        self.decls: Dict[str, str] = {}          # cname -> C++ type (all locals of the kernel)
        self.counter = 0
        self.sites: List[Site] = []
        self.shared: List[tuple] = []             # (cname, ctype, count, site_key)
        self.shared_keys: Dict[Any, str] = {}
        self.uses_dynamic_shared = False
        self.consts: List[str] = []               # global constant array definitions
        self.const_keys: Dict[int, str] = {}
        self.const_bytes = 0                      # the constant arrays' size
        self.captured: List[Any] = []             # global device arrays the kernel points into
        self.captured_names: Dict[str, str] = {}  # their code -> their name (debug mode's messages)
        self.local_bytes: Dict[str, int] = {}     # each local array's size
        self.functions: List[str] = []            # standalone helper functions (operators)
        self.function_keys: Dict[Any, str] = {}
        self.array_names: List[str] = []          # debug mode: names of arrays, by index
        self.raises: List[tuple] = []             # debug mode: (exception class, message, line), by index
        self.inline_stack: List[Any] = []
        self.uses_print = False
        self.uses_grid_sync = False
        self.fission_node = None          # CPU: the grid-stride loop run iteration-major
        self.fission_disabled = False
        self.inlined_raise = False        # a device function ends its thread with a raise
        self.fission: Dict[str, Any] = {}

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"


_PARSED: Dict[Any, tuple] = {}


def _parsed(pyfunc, name):
    """(function definition node, file name, first line, source lines) of a Python function, read
    once per code object."""
    code = getattr(pyfunc, "__code__", None)
    hit = _PARSED.get(code)
    if hit is not None:
        return hit
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or "<unknown>"
    except (OSError, TypeError) as e:
        raise KernelCompileError(f"kernel '{name}': its Python source is not available ({e}); define kernels "
                                 "in a file, a notebook cell or an interactive session that keeps the source") from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    fdefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not fdefs:
        raise KernelCompileError(f"kernel '{name}': {filename}: not a function definition")
    hit = (fdefs[0], filename, first_line, lines)
    if code is not None:
        _PARSED[code] = hit
    return hit


class FunctionCompiler:
    """Types and emits one Python function: the kernel, or a device function inlined into it."""

    def __init__(self, pyfunc, arg_types, root: Root, *, kernel_name: str, mode: str, prefix: str = "",
                 display_name: Optional[str] = None, numbers: str = "numpy", inner: "Optional[_InnerFunction]" = None):
        self.pyfunc = pyfunc
        self.root = root
        self.mode = mode                    # "kernel", "inline", "function"
        self.numbers = numbers              # its number rules: "numpy" or "numba" (_types.number_rules)
        self.prefix = prefix
        self.kernel_name = kernel_name
        self.name = display_name or pyfunc.__name__
        self.arg_types = list(arg_types)
        self.fdef, self.filename, self.first_line, self.source_lines = _parsed(pyfunc, pyfunc.__name__)
        # a function defined inside the function being compiled (def or lambda): its body, and the
        # enclosing function's compiler, whose names it reads (a closure, inlined)
        self.outer = inner.outer if inner is not None else None
        if inner is not None:
            self.fdef = inner.fdef
        if isinstance(self.fdef, ast.AsyncFunctionDef):
            self.error(self.fdef, "async functions cannot be kernels")
        self.line_offset = self.first_line - 1 - (self.fdef.lineno - 1) + (self.fdef.lineno - 1)
        self.globals = pyfunc.__globals__
        self.closure = {}
        if pyfunc.__closure__:
            for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.vars: Dict[str, VarInfo] = {}
        self.params = [a.arg for a in self.fdef.args.args]
        # how often each name is assigned: a local assigned once a number (TILE = 16) is also a
        # compile-time constant, usable where one is needed (shared.array's shape)
        self.store_counts: Dict[str, int] = {}
        for n in ast.walk(self.fdef):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.store_counts[n.id] = self.store_counts.get(n.id, 0) + 1
        for p in self.params:
            self.store_counts[p] = self.store_counts.get(p, 0) + 1
        self.typing = True
        self.lines: List[str] = []
        self.pre: List[str] = []
        self.indent = 1
        self.return_types: List[Any] = []
        self.loop_depth = 0
        self.unroll_stack = []    # tuple loops being unrolled: [loop depth, end label, next label]
        self.renames = {}         # a loop variable of an unrolled loop -> its variable in this iteration
        self.break_labels = {}    # loop depth -> where a break jumps, for loops with an else clause
        self.stmt_call = None     # the call that is a whole expression statement (np.sin(x, out))
        self.ret_label = None
        self.ret_var = None
        self.suspends = False
        self.terminated = False   # the last statement compiled ends control (see block)
        self.current_line = self.fdef.lineno

    # ---- errors ------------------------------------------------------------------------------
    def lineno(self, node) -> int:
        # the parsed snippet's line 1 is the file's line first_line (the first decorator)
        return getattr(node, "lineno", self.current_line) + self.first_line - 1

    def error(self, node, message: str):
        line = self.lineno(node) if node is not None else self.first_line
        src = ""
        rel = line - self.first_line
        if 0 <= rel < len(self.source_lines):
            src = "\n    " + self.source_lines[rel].strip()
        where = f"{self.filename}:{line}"
        chain = ""
        if self.mode != "kernel":
            chain = f" (device function '{self.name}', inlined into kernel '{self.kernel_name}')"
            raise KernelCompileError(f"kernel '{self.kernel_name}'{chain}, {where}: {message}{src}")
        raise KernelCompileError(f"kernel '{self.name}', {where}: {message}{src}")

    # ---- entry points -----------------------------------------------------------------------------
    def check_arity(self, node=None):
        a = self.fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            self.error(self.fdef, "*args, **kwargs and keyword-only parameters are not supported")
        n = len(self.params)
        defaults = a.defaults
        if len(self.arg_types) > n or len(self.arg_types) < n - len(defaults):
            what = "kernel" if self.mode == "kernel" else "device function"
            self.error(node if node is not None else self.fdef,
                       f"{what} '{self.name}' takes {n} argument{'s' if n != 1 else ''} "
                       f"({', '.join(self.params)}), got {len(self.arg_types)}")

    def run_typing(self, arg_vals: Optional[List[Val]] = None):
        """Infers the types of the locals: repeated passes until no variable's type changes."""
        self.check_arity()
        for _ in range(12):
            before = {k: (v.type, v.nonneg) for k, v in self.vars.items()}
            self._pass(typing=True, arg_vals=arg_vals)
            after = {k: (v.type, v.nonneg) for k, v in self.vars.items()}
            if before == after:
                break
        for name, v in self.vars.items():
            if v.type is None:
                self.error(self.fdef, f"the type of variable '{name}' cannot be inferred (used before assignment?)")

    def _pass(self, typing: bool, arg_vals=None):
        self.typing = typing
        self.lines = []
        self.pre = []
        self.indent = 1
        self.return_types = []
        with number_rules(self.numbers):
            self.bind_params(arg_vals)
            self.block(self.fdef.body)

    def bind_params(self, arg_vals):
        a = self.fdef.args
        n_default = len(a.defaults)
        for i, name in enumerate(self.params):
            if i < len(self.arg_types):
                t = self.arg_types[i]
                val = arg_vals[i] if arg_vals is not None else None
            else:
                d = a.defaults[i - (len(self.params) - n_default)]
                dv = self.expr(d)
                t = dv.type
                val = dv
            if isinstance(t, TupleT) and val is None:
                # a kernel's tuple parameter: one parameter per item (name__0, name__1, ...)
                self.bind_tuple_param(name, t)
                continue
            if isinstance(t, TupleT) or (val is not None and val.is_const and not isinstance(t, (Scalar, ArrayT))):
                # tuples and compile-time values bind by substitution
                self.vars.setdefault(name, VarInfo())
                self.vars[name].type = t
                self.vars[name].cname = ""
                self.const_params = getattr(self, "const_params", {})
                self.const_params[name] = val
                continue
            info = self.vars.setdefault(name, VarInfo(cname=self.cname(name)))
            info.type = t if not (isinstance(t, Scalar) and t.weak) else t.strong()
            if val is not None and not val.nonneg:
                info.nonneg = False
            elif val is None:
                info.nonneg = False
            if self.mode == "inline" and val is not None and val.is_const and self.store_counts.get(name, 0) == 1 \
                    and isinstance(val.const, (bool, int, float, np.number, np.bool_)) and isinstance(t, Scalar):
                # a compile-time number passed to an inlined device function and never reassigned
                # there: known inside it too (a shared array's shape, a branch decided when compiling)
                info.const = val.const
            if not self.typing and val is not None and (self.mode == "inline" or i >= len(self.arg_types)):
                # an inlined call's argument, or a parameter left to its default value
                self.emit(f"{info.cname} = {self.convert(val, info.type, self.fdef)};")

    def bind_tuple_param(self, name, t):
        info = self.vars.setdefault(name, VarInfo())
        info.type, info.cname = t, ""
        for k, it in enumerate(t.items):
            sub = f"{name}__{k}"
            if isinstance(it, TupleT):
                self.bind_tuple_param(sub, it)
                continue
            sinfo = self.vars.setdefault(sub, VarInfo(cname=self.cname(sub)))
            sinfo.type = it.strong() if isinstance(it, Scalar) else it
            sinfo.nonneg = False

    def cname(self, name: str) -> str:
        return f"{self.prefix}v_{name}"

    # ---- emission helpers ---------------------------------------------------------------------------
    def emit(self, line: str):
        if not self.typing:
            for p in self.pre:
                self.lines.append("  " * self.indent + p)
            self.pre = []
            self.lines.append("  " * self.indent + line)
        else:
            self.pre = []

    def emit_pre(self, line: str):
        if not self.typing:
            self.pre.append(line)

    def flush_pre(self):
        if not self.typing:
            for p in self.pre:
                self.lines.append("  " * self.indent + p)
        self.pre = []

    def declare_temp(self, ctype_or_type, stem="t") -> str:
        name = self.root.fresh(f"{self.prefix}ts_{stem}")
        ctype = ctype_or_type.ctype if hasattr(ctype_or_type, "ctype") else ctype_or_type
        self.root.decls[name] = ctype
        return name

    # ---- statements ---------------------------------------------------------------------------
    def block(self, stmts):
        """The statements, up to one after which control never reaches the next (a return,
        raise, break or continue, or an if whose branches that run all end so): the rest is dead
        code, not compiled, as Numba prunes it (if w is None: return x, then code using w)."""
        self.terminated = False
        for s in stmts:
            self.stmt(s)
            if self.terminated:
                break

    def stmt_Global(self, node):
        """global/nonlocal: reading the names is reading globals and closure variables (as without
        the statement, frozen when the kernel compiles); assigning them is not supported."""
        what = "global" if isinstance(node, ast.Global) else "nonlocal"
        for name in node.names:
            if self.store_counts.get(name):
                self.error(node, f"assigning the {what} name '{name}' is not supported in kernels (globals and "
                                 "closure variables are constants there; write results into an array)")

    stmt_Nonlocal = stmt_Global

    def stmt(self, node):
        self.current_line = getattr(node, "lineno", self.current_line)
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            what = {"Try": "try/except", "With": "with", "ClassDef": "class definitions", "FunctionDef":
                    "nested function definitions (use a device function)", "Lambda": "lambda",
                    "Import": "import", "ImportFrom": "import",
                    "Delete": "del", "AsyncFor": "async for", "AsyncWith": "async with", "Match": "match",
                    "TryStar": "try/except*"}.get(type(node).__name__, type(node).__name__)
            self.error(node, f"{what} is not supported in kernels")
        method(node)
        self.terminated = isinstance(node, (ast.Return, ast.Raise, ast.Break, ast.Continue)) or \
            (isinstance(node, ast.If) and self.terminated)

    def stmt_Pass(self, node):
        pass

    def stmt_FunctionDef(self, node):
        """def f(...) inside a kernel or device function: as Numba, a function called where it is
        defined (inlined at each call; it reads the enclosing function's variables)."""
        if node.decorator_list:
            self.error(node, f"the inner function '{node.name}' has decorators; define decorated functions "
                             "(device functions) outside the kernel")
        self.assign_name(node.name, Val(None, CT, const=_InnerFunction(node, self, node.name)), node)

    def expr_Lambda(self, node):
        fdef = ast.FunctionDef(name="<lambda>", args=node.args, body=[ast.copy_location(ast.Return(value=node.body), node)],
                               decorator_list=[], returns=None, type_comment=None)
        if sys.version_info >= (3, 12):
            fdef.type_params = []
        return Val(None, CT, const=_InnerFunction(ast.copy_location(fdef, node), self, "<lambda>"))

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.stmt_call = node.value
        try:
            v = self.expr(node.value)
        finally:
            self.stmt_call = None
        if v.code and not v.is_const:
            self.emit(f"(void)({v.code});")
        else:
            self.flush_pre()

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.expr(node.value)
        self.assign(node.target, value, node)

    def stmt_AugAssign(self, node):
        target = node.target
        if isinstance(target, ast.Name):
            cur = self.load_name(target.id, target)
            rhs = self.expr(node.value)
            res = self.binop(node.op, cur, rhs, node)
            self.assign(target, res, node, augmented=True)
        elif isinstance(target, ast.Attribute) or (isinstance(target, ast.Subscript) and
                                                    isinstance(self.expr(target.value).type, RecordT)):
            base = self.expr(target.value)
            if not isinstance(base.type, RecordT):
                self.error(node, "augmented assignment to attributes is not supported in kernels (except record fields)")
            if isinstance(target, ast.Attribute):
                name = target.attr
            else:
                name = self.record_key(base, target.slice, node)
            ref = self.record_field(base, name, node)
            rhs = self.expr(node.value)
            if self.typing:
                res = self.binop(node.op, Val("x", ref.type), rhs, node)
                self.check_store(res.type, ref.type, node, "a record field")
                return
            return self.store_record_field(ref, rhs, node, augmented_op=node.op)
        elif isinstance(target, ast.Subscript):
            arr = self.expr(target.value)
            if not isinstance(arr.type, ArrayT):
                self.error(node, f"cannot assign into {arr.type}")
            ref = self.element(arr, target.slice, node)
            rhs = self.expr(node.value)
            if self.typing:
                res = self.binop(node.op, Val("x", arr.type.dtype), rhs, node)
                self.check_store(res.type, arr.type.dtype, node, "array element")
                return
            r = self.declare_temp(arr.type.dtype.ctype + "*", "p")
            self.emit(f"{r} = &{ref.code};")
            res = self.binop(node.op, Val(f"(*{r})", arr.type.dtype), rhs, node)
            self.check_store(res.type, arr.type.dtype, node, "array element")
            self.emit(f"*{r} = {self.convert(res, arr.type.dtype, node)};")
        else:
            self.error(node, "unsupported augmented assignment target")

    def check_store(self, vt, target: Scalar, node, what):
        if not isinstance(vt, Scalar):
            self.error(node, f"cannot store {vt} into {what} of type {target.name}")
        if not can_store(vt, target) and not vt.weak:
            self.error(node, f"cannot store a {vt.name} value into {what} of type {target.name} without a cast "
                             f"(write {target.name}(...) to convert)")
        if vt.weak and not can_store(vt, target):
            self.error(node, f"cannot store a Python {'float' if vt.kind == 'f' else 'complex'} into {what} of "
                             f"type {target.name} without a cast")

    def assign(self, target, value: Val, node, augmented=False):
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.tuple_items(value, node)
            if len(items) != len(target.elts):
                self.error(node, f"cannot unpack {len(items)} values into {len(target.elts)} targets")
            # Evaluate all right-hand sides before assigning (a, b = b, a).
            temps = []
            for it in items:
                if isinstance(it.type, (Scalar, ArrayT)) and it.code is not None and not it.is_const \
                        and not self.typing:
                    tt = it.type.strong() if isinstance(it.type, Scalar) else it.type
                    t = self.declare_temp(tt)
                    self.emit(f"{t} = {it.code};")
                    temps.append(Val(t, tt, it.nonneg, gstride=it.gstride))
                else:
                    temps.append(it)
            for t, it in zip(target.elts, temps):
                self.assign(t, it, node)
        elif isinstance(target, ast.Subscript):
            arr = self.expr(target.value)
            if isinstance(arr.type, RecordT):
                return self.store_record_field(self.record_field(arr, self.record_key(arr, target.slice, node), node),
                                               value, node)
            if not isinstance(arr.type, ArrayT):
                self.error(node, f"cannot assign into a value of type {arr.type}")
            if arr.type.space == "const":
                self.error(node, "cannot assign into a constant array")
            ref = self.element(arr, target.slice, node)
            if isinstance(ref.type, ArrayT):
                return self.assign_view(ref, value, node)
            if isinstance(ref.type, RecordT):
                return self.store_record(ref, value, node)
            self.check_store(value.type, arr.type.dtype, node, "an array element")
            self.emit(f"{ref.code} = {self.convert(value, arr.type.dtype, node)};")
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value)
            if isinstance(base.type, RecordT):
                return self.store_record_field(self.record_field(base, target.attr, node), value, node)
            self.error(node, "assignment to attributes is not supported in kernels (except record fields)")
        else:
            self.error(node, f"unsupported assignment target {type(target).__name__}")

    def assign_view(self, view: Val, value: Val, node):
        """a[i, :] = v, a[2:5] = b[...]: every element of the view set from a number or from an
        array broadcast against it, as NumPy (a view overlapping its input shifted along the same
        strides reads before it writes, as memmove; other overlaps are not copied first)."""
        numbers = isinstance(value.type, TupleT) and value.items is not None and len(value.items) > 0 and \
            all(isinstance(it.type, Scalar) for it in value.items)
        if not (isinstance(value.type, (Scalar, ArrayT)) or numbers) or \
                isinstance(value.type, ArrayT) and value.type.is_record or view.type.is_record or \
                numbers and view.type.ndim == 0:
            self.error(node, f"cannot assign {value.type} to an array slice")
        if numbers:   # a tuple of numbers is a 1-d array along the view's last axis, as in NumPy
            src = unify(*[it.type for it in value.items])
        else:
            src = value.type if isinstance(value.type, Scalar) else value.type.dtype
        self.check_store(src, view.type.dtype, node, "an array slice")
        if self.typing:
            return
        if numbers:   # each item once, before the loop reads them
            items = []
            for it in value.items:
                if not it.is_const:
                    t = self.declare_temp(it.type.strong())
                    self.emit(f"{t} = {it.code};")
                    it = Val(t, it.type.strong())
                items.append(it)
            value = Val(None, value.type, items=items)
        self.each_element(view, [value], lambda args: args[0], node, "slice assignment")

    def assign_name(self, name, value: Val, node):
        name = self.renames.get(name, name)
        if name in self.params and getattr(self, "const_params", {}).get(name) is not None:
            self.error(node, f"cannot assign to parameter '{name}' (a tuple or compile-time value)")
        if isinstance(value.type, TupleT):
            items = self.tuple_items(value, node)
            info = self.vars.setdefault(name, VarInfo())
            if info.type is not None and not isinstance(info.type, TupleT):
                self.error(node, f"variable '{name}' holds {info.type} and cannot also hold a tuple")
            if info.type is not None and len(info.type.items) != len(items):
                self.error(node, f"variable '{name}' holds tuples of different lengths")
            new_items = []
            for k, it in enumerate(items):
                sub = f"{name}__{k}"
                self.assign_name(sub, it, node)
                new_items.append(self.vars[sub].type)
            info.type = TupleT(tuple(new_items), getattr(value.type, "names", None))
            return
        if value.is_const and value.type is CT:
            # a module, function or intrinsic bound to a name: substitute at compile time
            self.const_params = getattr(self, "const_params", {})
            self.const_params[name] = value
            self.vars.setdefault(name, VarInfo(type=CT))
            return
        info = self.vars.setdefault(name, VarInfo(cname=self.cname(name)))
        if not info.cname:
            info.cname = self.cname(name)
        vt = value.type
        if isinstance(vt, NoneT):
            self.error(node, "cannot assign the result of a function that returns nothing")
        if info.type is None:
            info.type = vt.strong() if isinstance(vt, Scalar) else vt
        elif isinstance(info.type, Scalar) and isinstance(vt, Scalar):
            if self.typing:
                unified = unify(info.type, vt)
                info.type = unified.strong()
        elif info.type != vt:
            if isinstance(info.type, ArrayT) and isinstance(vt, ArrayT) and info.type.dtype == vt.dtype \
                    and info.type.ndim == vt.ndim and not vt.is_record:
                # arrays of one dtype and rank (a local or shared array too, as a view): any layout
                info.type = ArrayT(vt.dtype, vt.ndim, "A")
            else:
                self.error(node, f"variable '{name}' holds {info.type} and cannot also hold {vt}")
        if not value.nonneg:
            info.nonneg = False
        if value.gstride:
            info.gstride = True
        if self.store_counts.get(name, 0) == 1 and value.is_const and \
                isinstance(value.const, (bool, int, float, np.number, np.bool_)):
            info.const = value.const
        if not self.typing:
            self.emit(f"{info.cname} = {self.convert(value, info.type, node)};")

    def tuple_items(self, value: Val, node) -> List[Val]:
        if value.items is not None:
            return value.items
        if isinstance(value.type, TupleT):
            self.error(node, "this tuple cannot be unpacked")
        self.error(node, f"cannot unpack a value of type {value.type}")

    def stmt_If(self, node):
        test = self.expr(node.test)
        if test.is_const and test.type is not CT and isinstance(test.const, (bool, int, float, np.generic)):
            self.flush_pre()
            self.block(node.body if test.const else node.orelse)  # compile-time branch
            return   # self.terminated: whether that branch ends control
        self.emit(f"if ({self.truth(test, node)}) {{")
        self.indent += 1
        self.block(node.body)
        ends = self.terminated
        self.indent -= 1
        if node.orelse:
            self.emit("} else {")
            self.indent += 1
            self.block(node.orelse)
            self.indent -= 1
        self.emit("}")
        self.terminated = ends and bool(node.orelse) and self.terminated

    def stmt_While(self, node):
        self.loop_with_else(node, self.while_loop)

    def stmt_For(self, node):
        self.loop_with_else(node, self.for_loop)

    def loop_with_else(self, node, emit_loop):
        """A loop; its else clause runs when the loop ends without a break, which jumps past it."""
        if not node.orelse:
            return emit_loop(node)
        label = self.root.fresh("ts_loop_break")
        depth = self.loop_depth + 1
        self.break_labels[depth] = label
        try:
            emit_loop(node)
        finally:
            del self.break_labels[depth]
        self.block(node.orelse)
        self.emit(f"{label}: ;")

    def while_loop(self, node):
        self.emit("for (;;) {")
        self.indent += 1
        test = self.expr(node.test)
        self.emit(f"if (!({self.truth(test, node)})) break;")
        self.loop_depth += 1
        self.block(node.body)
        self.loop_depth -= 1
        self.indent -= 1
        self.emit("}")

    def for_loop(self, node):
        it = node.iter
        if not self.is_range_call(it):
            return self.for_other(node)
        if it.keywords or not 1 <= len(it.args) <= 3:
            self.error(node, "range() takes 1 to 3 positional arguments")
        args = [self.expr(a) for a in it.args]
        for a in args:
            if not is_intlike(a.type):
                self.error(node, f"range() arguments must be integers, got {a.type}")
        if len(args) == 1:
            start, stop, step = Val("0ll", WEAK_INT, True, 0), args[0], Val("1ll", WEAK_INT, True, 1)
        elif len(args) == 2:
            start, stop, step = args[0], args[1], Val("1ll", WEAK_INT, True, 1)
        else:
            start, stop, step = args
        if step.is_const and step.const == 0:
            self.error(node, "range() step must not be zero")
        t = promote(start.type, stop.type, step.type).strong()
        if t.kind in "bf" or t.kind == "u" and any(a.is_const and a.const < 0 for a in args):
            t = INT64   # bools, signed and unsigned mixed (a float by promotion), or an unsigned range below 0
        if t.kind == "i" and t.itemsize < 8:
            t = INT64
        if not isinstance(node.target, ast.Name):
            self.error(node, "the loop variable must be a name")
        k = self.declare_temp(t, "k")
        stop_v = self.declare_temp(t, "stop")
        step_v = None
        self.emit(f"{stop_v} = {self.convert(stop, t, node)};")
        positive_literal = step.is_const and isinstance(step.const, (int, np.integer)) and step.const > 0
        negative_literal = step.is_const and isinstance(step.const, (int, np.integer)) and step.const < 0
        if step.is_const and not isinstance(step.type, TupleT):
            step_code = self.convert(step, t, node)
        else:
            step_v = self.declare_temp(t, "step")
            self.emit(f"{step_v} = {self.convert(step, t, node)};")
            step_code = step_v
        if positive_literal:
            cond = f"{k} < {stop_v}"
        elif negative_literal:
            cond = f"{k} > {stop_v}"
        else:
            cond = f"({step_code} > 0 ? {k} < {stop_v} : {k} > {stop_v})"
        loop_nonneg = start.nonneg and (positive_literal or step.nonneg)
        grid_stride = self.root.target == "cpu" and step.gstride
        if grid_stride and t == INT64 and self.fission_eligible(node):
            return self.grid_loop_fission(node, t, start, stop_v, step_code, loop_nonneg)
        if grid_stride:
            first = self.declare_temp(t, "first")
            self.emit(f"{first} = {self.convert(start, t, node)};")
            self.emit(f"for ({k} = {first}; {cond}; {k} += {step_code}) {{")
        elif positive_literal or negative_literal:
            self.emit(f"for ({k} = {self.convert(start, t, node)}; {cond}; {k} += {step_code}) {{")
        else:
            # A step known only at run time: a loop over the iteration count, which the compilers
            # can unroll (a condition on the step's sign leaves the trip count unknown to them).
            first, count, n = self.declare_temp(t, "first"), self.declare_temp(UINT64, "count"), self.declare_temp(UINT64, "n")
            self.emit(f"{first} = {self.convert(start, t, node)};")
            self.emit(f"{count} = ts::range_count({first}, {stop_v}, {step_code});")
            self.emit(f"for ({n} = 0; {n} < {count}; ++{n}) {{")
            self.emit(f"  {k} = ({t.ctype})((ts::u64){first} + {n} * (ts::u64){step_code});")
        self.indent += 1
        if grid_stride:
            # A grid-stride loop: on the CPU the threads of a block take its iterations in step,
            # so that together they walk memory in order rather than each thread its own stride.
            self.emit(f"if ({k} != {first}) {{")
            self._sync("yield", node, "block")
            self.flush_pre()
            self.emit("}")
        self.assign_name(node.target.id, Val(k, t, loop_nonneg), node)
        self.loop_depth += 1
        self.block(node.body)
        self.loop_depth -= 1
        self.indent -= 1
        self.emit("}")

    def for_other(self, node):
        """for over something other than range(): a tuple (unrolled, as Numba does with tuples and
        literal_unroll), an array (its first axis), enumerate(...) and zip(...) of those."""
        it = node.iter
        if isinstance(it, ast.Call) and not it.keywords:
            fn = self.expr(it.func)
            if fn.is_const and (fn.const is enumerate or fn.const is zip):
                return self.for_desugared(node, fn.const.__name__)
            if fn.is_const and getattr(fn.const, "_ts_intrinsic", None) == "literal_unroll":
                return self.for_desugared(node, "literal_unroll")
        v = self.expr(it)
        if v.items is not None:
            return self.for_unrolled(node, node.target, v.items)
        if isinstance(v.type, ArrayT):
            if v.type.ndim == 0:
                self.error(node, "iteration over a 0-d array")
            return self.for_desugared(node, "array")
        self.error(node, f"kernels loop over range(), tuples, arrays, enumerate() and zip(); not over {v.type}")

    def for_desugared(self, node, kind, check_only=False):
        """for x in a / enumerate(a) / zip(a, b): rewritten (once per loop) as a loop over range()
        with the elements read by index; over tuples (and literal_unroll), unrolled."""
        it = node.iter
        if kind == "literal_unroll":
            if len(it.args) != 1:
                self.error(node, "literal_unroll() takes one tuple")
            v = self.expr(it.args[0])
            if v.items is None:
                self.error(node, f"literal_unroll() takes a tuple, got {v.type}")
            return self.for_unrolled(node, node.target, v.items)
        if kind in ("enumerate", "zip"):
            if kind == "enumerate" and not 1 <= len(it.args) <= 2:
                self.error(node, "enumerate() takes an iterable and an optional start")
            if kind == "zip" and not it.args:
                self.error(node, "zip() needs at least one iterable")
            seqs = it.args[:1] if kind == "enumerate" else it.args
            vals = [Val(None, CT, const=range) if self.is_range_call(a) or self.iteration_call(a) else self.expr(a)
                    for a in seqs]
            if all(v.items is not None for v in vals):
                # tuples: unrolled
                n = min(len(v.items) for v in vals)
                if kind == "enumerate":
                    start = self.expr(it.args[1]) if len(it.args) > 1 else Val("0ll", WEAK_INT, True, const=0)
                    if not (start.is_const and isinstance(start.const, (int, np.integer))):
                        self.error(node, "enumerate() over a tuple needs a constant start")
                    rows = [Val(None, TupleT((WEAK_INT, x.type)), items=[
                        Val(f"{int(start.const) + k}ll", WEAK_INT, int(start.const) + k >= 0,
                            const=int(start.const) + k), x]) for k, x in enumerate(vals[0].items)]
                else:
                    rows = [Val(None, TupleT(tuple(v.items[k].type for v in vals)), items=[v.items[k] for v in vals])
                            for k in range(n)]
                return self.for_unrolled(node, node.target, rows)
            for v, a in zip(vals, seqs):
                if self.iteration_call(a) is not None:
                    self.for_desugared(ast.copy_location(ast.For(target=node.target, iter=a, body=[], orelse=[]),
                                                         node), self.iteration_call(a), check_only=True)
                elif v.items is not None or not (isinstance(v.type, ArrayT) and v.type.ndim >= 1) and \
                        not self.is_range_call(a):
                    self.error(node, f"{kind}() in a kernel loop takes arrays or range() (or only tuples), got {v.type}")
        if check_only:
            return None
        desugared = getattr(node, "_ts_desugared", None)
        if desugared is None:
            desugared = self.desugar_loop(node, kind)
            node._ts_desugared = desugared
        return self.stmt_For(desugared)

    def iteration_call(self, a):
        """"zip" or "enumerate" for a call of that builtin (a sequence a loop desugars), else None."""
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in ("zip", "enumerate") \
                and not a.keywords and a.func.id not in self.vars:
            fn = self.resolve_global(a.func.id, a)
            if fn is zip or fn is enumerate:
                return fn.__name__
        return None

    def is_range_call(self, a):
        return isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and \
            a.func.id in ("range", "prange", "_ts_range") and self.resolve_global(a.func.id, a) in (range, _PRANGE)

    def desugar_loop(self, node, kind):
        it = node.iter
        k = f"_ts_it{id(node)}"

        def name(n, ctx=None):
            n = {"range": "_ts_range", "len": "_ts_len", "min": "_ts_min"}.get(n, n)
            return ast.copy_location(ast.Name(id=n, ctx=ctx or ast.Load()), node)

        def length(seq):
            if self.is_range_call(seq):
                # len(range(a, b, c)), computed as Python does
                args = seq.args
                return ast.copy_location(ast.Call(func=name("_ts_range_len"), args=list(args), keywords=[]), node)
            nested = self.iteration_call(seq)
            if nested is not None:   # zip(...) or enumerate(...) inside: the shortest sequence
                parts = [length(s) for s in (seq.args[:1] if nested == "enumerate" else seq.args)]
                stop = parts[0]
                for p in parts[1:]:
                    stop = ast.copy_location(ast.Call(func=name("min"), args=[stop, p], keywords=[]), node)
                return stop
            return ast.copy_location(ast.Call(func=name("len"), args=[seq], keywords=[]), node)

        def element(seq):
            if self.is_range_call(seq):
                return ast.copy_location(ast.Call(func=name("_ts_range_item"), args=list(seq.args) + [name(k)],
                                                  keywords=[]), node)
            nested = self.iteration_call(seq)
            if nested == "enumerate":
                index = name(k) if len(seq.args) == 1 else \
                    ast.copy_location(ast.BinOp(left=name(k), op=ast.Add(), right=seq.args[1]), node)
                return ast.copy_location(ast.Tuple(elts=[index, element(seq.args[0])], ctx=ast.Load()), node)
            if nested == "zip":
                return ast.copy_location(ast.Tuple(elts=[element(s) for s in seq.args], ctx=ast.Load()), node)
            return ast.copy_location(ast.Subscript(value=seq, slice=name(k), ctx=ast.Load()), node)

        value, stop = element(it), length(it)
        assign = ast.copy_location(ast.Assign(targets=[node.target], value=value), node)
        rng = ast.copy_location(ast.Call(func=name("range"), args=[stop], keywords=[]), node)
        loop = ast.copy_location(ast.For(target=name(k, ast.Store()), iter=rng, body=[assign] + list(node.body),
                                         orelse=[]), node)
        ast.fix_missing_locations(loop)
        return loop

    def for_unrolled(self, node, target, items):
        """A loop over a tuple's items, unrolled: the body once per item (break and continue jump
        to labels)."""
        end = self.root.fresh("ts_unroll_end")
        self.loop_depth += 1
        self.unroll_stack.append([self.loop_depth, end, None])
        # items of different kinds (arrays of two dtypes, an array and a number): as Numba's
        # literal_unroll, the loop variable has each item's own type, a variable per iteration
        types = [it.type.strong() if isinstance(it.type, Scalar) else it.type for it in items]
        own = isinstance(target, ast.Name) and any(t != types[0] for t in types) and \
            not all(isinstance(t, Scalar) for t in types)
        for k, item in enumerate(items):
            nxt = self.root.fresh("ts_unroll_next")
            self.unroll_stack[-1][2] = nxt
            self.emit("{")
            self.indent += 1
            if own:
                self.renames[target.id] = f"{target.id}__unroll{node.lineno}_{node.col_offset}_{k}"
            try:
                self.assign(target, item, node)
                self.block(node.body)
            finally:
                if own:
                    del self.renames[target.id]
            self.indent -= 1
            self.emit("}")
            self.emit(f"{nxt}: ;")
        self.unroll_stack.pop()
        self.loop_depth -= 1
        self.emit(f"{end}: ;")

    # ---- CPU: a grid-stride loop run iteration by iteration across the block ----------------------
    def fission_eligible(self, node) -> bool:
        """A top-level grid-stride loop of a kernel whose body carries no state from one iteration
        to the next: the CPU runs it iteration-major across the threads of a block (thread t's
        iteration k right after thread t-1's), so that a block walks memory in order, without
        pausing threads. Else the loop pauses its threads at each iteration (a yield site)."""
        root = self.root
        if self.mode != "kernel" or root.fission_disabled or node not in self.fdef.body or node.orelse:
            return False
        if root.fission_node is not None and root.fission_node is not node:
            return False
        body_nodes = [n for b in node.body for n in ast.walk(b)]
        for n in body_nodes:
            if isinstance(n, (ast.Return, ast.Break, ast.Raise)):
                return False   # (a break of a nested loop is fine, but kept simple)
        stored = {node.target.id}
        occurrences = []
        for n in body_nodes:
            if isinstance(n, ast.Name):
                occurrences.append(((n.lineno, n.col_offset, 0 if isinstance(n.ctx, ast.Store) else 1), n))
                if isinstance(n.ctx, ast.Store):
                    stored.add(n.id)
        for n in body_nodes:   # x += 1 reads x before the store
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                occurrences.append(((n.lineno, n.col_offset, -1), ast.Name(id=n.target.id, ctx=ast.Load())))
        first = {}
        for key, n in sorted(occurrences, key=lambda kv: kv[0]):
            first.setdefault(n.id, n)
        for name in stored - {node.target.id}:
            if not isinstance(first[name].ctx, ast.Store):
                return False   # read before it is assigned: carried from the last iteration
        outside = [n for stmt in self.fdef.body if stmt is not node for n in ast.walk(stmt)]
        if any(isinstance(n, ast.Name) and n.id in stored for n in outside):
            return False
        return True

    def grid_loop_fission(self, node, t, start, stop_v, step_code, loop_nonneg):
        root = self.root
        fl = root.fission
        if root.fission_node is None:
            root.fission_node = node
        first, stop, step = "ts_gl_first", "ts_gl_stop", "ts_gl_step"
        for name in (first, stop, step):
            root.decls[name] = t.ctype
        self.emit(f"{first} = {self.convert(start, t, node)};")
        self.emit(f"{stop} = {stop_v};")
        self.emit(f"{step} = {step_code};")
        self.flush_pre()
        saved_lines, saved_indent, saved_decls = self.lines, self.indent, dict(root.decls)
        self.lines, self.indent = [], 1
        outer_suspends, self.suspends = self.suspends, False
        self.assign_name(node.target.id, Val("ts_gl_i", t, loop_nonneg), node)
        self.loop_depth += 1
        self.fission_depth = self.loop_depth
        self.block(node.body)
        self.fission_depth = None
        self.loop_depth -= 1
        body_suspends = self.suspends
        self.suspends = outer_suspends
        body_lines = self.lines
        self.lines, self.indent = saved_lines, saved_indent
        if body_suspends:
            # barriers or warp intrinsics in the body: this loop pauses its threads instead
            root.fission_disabled = True
            root.fission_node = None
            self.suspends = True
            return
        fl["split"] = len(self.lines)
        fl["body"] = body_lines
        fl["body_decls"] = {k: v for k, v in root.decls.items() if k not in saved_decls}
        stored = {n.id for b in node.body for n in ast.walk(b) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)} | {node.target.id}
        fl["body_vars"] = {self.vars[n].cname for n in stored if n in self.vars and self.vars[n].cname}

    def stmt_Break(self, node):
        if not self.loop_depth:
            self.error(node, "'break' outside a loop")
        if self.loop_depth in self.break_labels:
            self.emit(f"goto {self.break_labels[self.loop_depth]};")
            return
        if self.unroll_stack and self.unroll_stack[-1][0] == self.loop_depth:
            self.emit(f"goto {self.unroll_stack[-1][1]};")
            return
        self.emit("break;")

    def stmt_Continue(self, node):
        if not self.loop_depth:
            self.error(node, "'continue' outside a loop")
        if self.unroll_stack and self.unroll_stack[-1][0] == self.loop_depth:
            self.emit(f"goto {self.unroll_stack[-1][2]};")
            return
        if getattr(self, "fission_depth", None) == self.loop_depth:
            self.emit("return;")   # the next iteration of a loop run iteration-major
            return
        self.emit("continue;")

    def stmt_Return(self, node):
        if self.mode == "kernel":
            if node.value is not None:
                v = self.expr(node.value)
                if not (v.is_const and v.const is None):
                    self.error(node, "a kernel cannot return a value (write results into an array argument)")
            self.emit(self.root_return())
            return
        if node.value is None:
            v = Val(None, NoneT(), const=None)
        else:
            v = self.expr(node.value)
            if v.is_const and v.const is None:
                v = Val(None, NoneT(), const=None)
        self.return_types.append(v.type)
        if self.typing:
            self.flush_pre()
            return
        if self.mode == "inline":
            if not isinstance(v.type, NoneT):
                self.assign_return(v, node)
            self.emit(f"goto {self.ret_label};")
        else:  # standalone function
            if isinstance(v.type, NoneT):
                self.emit("return;")
            else:
                self.emit(f"return {self.convert(v, self.return_type, node)};")

    def assign_return(self, v: Val, node, rt=None, var=None):
        rt = self.return_type if rt is None else rt
        var = self.ret_var if var is None else var
        if isinstance(rt, TupleT):
            items = self.tuple_items(v, node)
            for k, (it, t) in enumerate(zip(items, rt.items)):
                self.assign_return(it, node, t, f"{var}__{k}")
        else:
            self.emit(f"{var} = {self.convert(v, rt, node)};")

    def root_return(self) -> str:
        if self.root.target == "cuda":
            return "return;"
        if getattr(self.root, "suspending", False):
            return "S.status = TS_DONE; return;"
        return "return;"

    def stmt_Assert(self, node):
        # As Numba: ignored unless debug; with debug=True a failed assert raises AssertionError.
        if self.root.options.get("debug"):
            test = self.expr(node.test)
            self.emit(f"if (!({self.truth(test, node)})) {{")
            self.indent += 1
            self.raise_exception(AssertionError, node.msg, node)
            self.indent -= 1
            self.emit("}")

    def stmt_Raise(self, node):
        # As Numba: a raise ends the thread; with debug=True the launch raises the exception.
        if node.exc is None or node.cause is not None:
            self.error(node, "a kernel raises an exception class or instance (raise E or raise E('message'))")
        exc, msg = node.exc, None
        if isinstance(exc, ast.Call):
            if exc.keywords or len(exc.args) > 1:
                self.error(node, "a kernel's exception takes at most one argument, a constant")
            msg = exc.args[0] if exc.args else None
            exc = exc.func
        cls = self.expr(exc)
        if not (cls.is_const and isinstance(cls.const, type) and issubclass(cls.const, BaseException)):
            self.error(node, "a kernel raises an exception class or instance (raise E or raise E('message'))")
        if self.mode == "function":
            self.error(node, f"the operator '{self.name}' cannot raise")
        self.fail(cls.const, msg, node)

    def fail(self, cls, msg_node, node):
        """A raise, or a check that failed at run time: in debug mode the launch raises cls (message:
        msg_node, a constant's node or a str); else the thread stops."""
        if self.root.options.get("debug"):
            self.raise_exception(cls, ast.Constant(msg_node) if isinstance(msg_node, str) else msg_node, node)
        else:
            self.root.inlined_raise |= self.mode == "inline"
            self.emit(self.root_return())

    def raise_index(self, cls, msg, node) -> int:
        """The index of exception cls(msg) (msg: a str or None) at node's line among those the launch
        may raise (debug mode); each distinct one is registered once per kernel."""
        key = (cls, msg, self.lineno(node))
        if key not in self.root.raises:
            self.root.raises.append(key)
        return self.root.raises.index(key)

    def raise_call(self, cls, msg, node) -> str:
        """The runtime's call that records exception cls(msg) for the launch to raise."""
        return f"ts_raise({self.raise_index(cls, msg, node)}, {self.lineno(node)}{self.chk_ctx()})"

    def raise_exception(self, cls, msg_node, node):
        """Debug mode: the thread records exception cls (message: a constant) and stops."""
        msg = None
        if msg_node is not None:
            m = self.expr(msg_node)
            if not m.is_const or not isinstance(m.const, (str, int, float, bool)):
                self.error(node, "an exception's message in a kernel must be a constant")
            msg = str(m.const)
        self.emit(f"{self.raise_call(cls, msg, node)};")
        self.emit(self.root_return())

    # ---- expressions ---------------------------------------------------------------------------
    def expr(self, node) -> Val:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            what = {"ListComp": "list comprehensions", "SetComp": "set comprehensions", "DictComp":
                    "dict comprehensions", "GeneratorExp": "generator expressions", "Lambda": "lambda",
                    "Dict": "dicts", "Set": "sets", "List": "lists", "JoinedStr": "f-strings",
                    "Await": "await", "Yield": "yield", "YieldFrom": "yield", "Starred": "*unpacking",
                    "NamedExpr": "the walrus operator"}.get(type(node).__name__, type(node).__name__)
            self.error(node, f"{what} not supported in kernels")
        return method(node)

    def expr_Constant(self, node):
        v = node.value
        if isinstance(v, str):
            return Val(None, CT, const=v)
        if v is None:
            return Val(None, CT, const=None)
        if v is Ellipsis:
            self.error(node, "... is not supported in kernels")
        t = _type_of_python_value(v)
        if t is None:
            self.error(node, f"constant {v!r} not supported in kernels")
        return Val(_literal_code(v, t), t, nonneg=(not isinstance(v, complex) and v >= 0), const=v)

    def expr_Tuple(self, node):
        items = [self.expr(e) for e in node.elts]
        return Val(None, TupleT(tuple(i.type for i in items)), items=items)

    def expr_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.error(node, "internal: store context")
        return self.load_name(node.id, node)

    def load_name(self, name, node) -> Val:
        name = self.renames.get(name, name)
        cp = getattr(self, "const_params", {})
        if name in cp and name in self.vars and (self.vars[name].type is CT or isinstance(self.vars[name].type, TupleT) and self.vars[name].cname == ""):
            return cp[name]
        if self.outer is not None and name not in self.vars and name not in self.store_counts:
            return self.outer.load_name(name, node)   # a free name of an inner function
        if name in self.vars:
            info = self.vars[name]
            if isinstance(info.type, TupleT):
                items = [self.load_name(f"{name}__{k}", node) for k in range(len(info.type.items))]
                return Val(None, info.type, items=items)
            if info.type is None:
                if self.typing:
                    return Val("0", WEAK_INT, False, const=_NOCONST)  # settles in a later pass
                self.error(node, f"variable '{name}' is used before assignment")
            return Val(info.cname, info.type, info.nonneg, gstride=info.gstride, const=info.const)
        obj = self.resolve_global(name, node)
        return self.const_val(obj, node, name)

    def resolve_global(self, name, node):
        if name.startswith("_ts_") and name in _INTERNAL_NAMES:
            return _INTERNAL_NAMES[name]
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self.error(node, f"name '{name}' is not defined")

    def const_val(self, obj, node, name="") -> Val:
        t = _type_of_python_value(obj)
        if t is not None:
            return Val(_literal_code(obj, t), t,
                       nonneg=not isinstance(obj, (complex, np.complexfloating)) and obj >= 0, const=obj)
        if isinstance(obj, tuple):
            items = [self.const_val(o, node, name) for o in obj]
            return Val(None, TupleT(tuple(i.type for i in items)), items=items, const=obj)
        if isinstance(obj, np.ndarray):
            return self.const_array(obj, node)
        device_array = _device_array_of(obj)
        if device_array is not None:
            return self.global_device_array(obj, device_array, node, name)
        return Val(None, CT, const=obj)

    def global_device_array(self, obj, arr, node, name) -> Val:
        """A device array (or tessel array) that is a global or closure variable: captured by
        pointer when the kernel compiles, as Numba does (its shape is fixed; its data is read and
        written where it lives)."""
        on_gpu = arr.device.type == "cuda"
        if on_gpu != (self.root.target == "cuda"):
            self.error(node, f"the global array '{name}' is on {arr.device}, but the kernel runs on "
                             f"{'a GPU' if self.root.target == 'cuda' else 'the CPU backend'}")
        if getattr(getattr(obj, "dtype", None), "names", None) is not None:
            self.error(node, f"the global array '{name}' has dtype {obj.dtype}; a global device array in a "
                             "kernel holds numbers (pass record arrays as arguments)")
        t = scalar_from_dtype(arr.dtype)
        item = arr.itemsize
        if any(st % item for st in arr.strides):
            self.error(node, f"the global array '{name}' has strides {tuple(arr.strides)} that are not "
                             f"multiples of its item size {item}")
        ptr = arr.data_ptr() if callable(arr.data_ptr) else arr.data_ptr
        self.root.captured.append(obj)   # kept alive with the compiled kernel
        shape = ", ".join(f"{int(n)}ll" for n in arr.shape)
        strides = ", ".join(f"{int(st) // item}ll" for st in arr.strides)
        data = f"(({t.ctype}*){int(ptr)}ull)"
        # in parentheses: the code may be a macro's argument (debug mode's index checks)
        code = f"(ts::mkarr<{t.ctype}, {arr.ndim}>({data}, {{{shape}}}, {{{strides}}}))" if arr.ndim else \
            f"(ts::mkarr0<{t.ctype}>({data}))"
        self.root.captured_names[code] = name
        return Val(code, ArrayT(t, arr.ndim, "C" if arr.is_contiguous() else "A"))

    def const_array(self, arr: np.ndarray, node) -> Val:
        key = id(arr)
        if arr.dtype.names is not None:
            return self._const_record_array(arr, node)
        t = scalar_from_dtype(arr.dtype)
        if key not in self.root.const_keys:
            cname = self.root.fresh("ts_const")
            flat = np.ascontiguousarray(arr).reshape(-1)
            qual = "__device__ const" if self.root.target == "cuda" else "static const"
            if t.kind in "fc":
                # Floating values as their bit patterns: NVRTC accepts only constant initializers in
                # a __device__ array, and a cast, NaN or half/complex constructor is not one.
                word = 2 if t.name in ("float16", "bfloat16") else (8 if t.name in ("float64", "complex128") else 4)
                bits = flat.view(np.dtype(f"u{word}"))
                values = ", ".join(f"{int(v)}ull" if word == 8 else f"{int(v)}u" for v in bits) or "0"
                storage = {2: "ts::u16", 4: "ts::u32", 8: "ts::u64"}[word]
                self.root.consts.append(f"alignas({max(t.itemsize, word)}) {qual} {storage} {cname}"
                                        f"[{max(bits.size, 1)}] = {{{values}}};")
            else:
                values = ", ".join(_literal_code(v.item(), t) for v in flat) or "0"
                self.root.consts.append(f"{qual} {t.ctype} {cname}[{max(flat.size, 1)}] = {{{values}}};")
            self.root.const_bytes += max(flat.size, 1) * t.itemsize
            self.root.const_keys[key] = cname
        cname = self.root.const_keys[key]
        at = ArrayT(t, arr.ndim, "C", "const", tuple(int(s) for s in arr.shape))
        return Val(f"(({t.ctype}*){cname})", at)

    def _const_record_array(self, arr: np.ndarray, node) -> Val:
        """A global NumPy array of records: its bytes in a constant array, records as in a local array."""
        t = _static_record_type(arr.dtype, node, self, "a constant array of records")
        key = id(arr)
        if key not in self.root.const_keys:
            cname = self.root.fresh("ts_const")
            raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            qual = "__device__ const" if self.root.target == "cuda" else "static const"
            values = ", ".join(f"{int(v)}u" for v in raw) or "0"
            self.root.consts.append(f"alignas(16) {qual} unsigned char {cname}[{max(raw.size, 1)}] = {{{values}}};")
            self.root.const_bytes += max(raw.size, 1)
            self.root.const_keys[key] = cname
        cname = self.root.const_keys[key]
        at = ArrayT(t, arr.ndim, "C", "const", tuple(int(s) for s in arr.shape))
        return Val(f"((unsigned char*){cname})", at)

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if base.is_const and base.type is CT:
            obj = base.const
            if isinstance(obj, _GridGroup):
                if attr != "sync":
                    self.error(node, f"a grid group has no attribute '{attr}' in kernels (only sync())")
                return Val(None, CT, const=_BoundMethod("grid_sync", None))
            if isinstance(obj, I.Namespace) or isinstance(obj, pytypes.ModuleType) or hasattr(obj, attr):
                try:
                    sub = getattr(obj, attr)
                except AttributeError as e:
                    if type(e) is not AttributeError:   # a module's own "not supported" error
                        self.error(node, str(e))
                    self.error(node, f"'{getattr(obj, '__name__', obj)}' has no attribute '{attr}'")
                if isinstance(sub, I.Intrinsic) and "." in sub._ts_intrinsic and \
                        sub._ts_intrinsic.split(".")[0] in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
                    return self.dim3(sub._ts_intrinsic)
                if isinstance(sub, I.Intrinsic) and sub._ts_intrinsic in ("laneid", "warpid"):
                    return self.lane_or_warp(sub._ts_intrinsic)
                return self.const_val(sub, node, attr)
            self.error(node, f"{obj!r} has no attribute '{attr}'")
        t = base.type
        if isinstance(t, RecordT):
            return self.record_field(base, attr, node)
        if isinstance(t, ArrayT) and t.is_record and t.dtype.field(attr) is not None and \
                attr not in ("shape", "size", "ndim", "strides", "dtype"):
            return self.record_field_view(base, attr, node)
        if isinstance(t, ArrayT):
            if attr == "shape":
                items = [self.extent(base, d) for d in range(t.ndim)]
                return Val(None, TupleT(tuple(i.type for i in items)), items=items)
            if attr == "size":
                return self.array_size(base)
            if attr == "ndim":
                return Val(f"{t.ndim}ll", WEAK_INT, True, const=t.ndim)
            if attr == "strides":
                items = [self.stride_bytes(base, d) for d in range(t.ndim)]
                return Val(None, TupleT(tuple(i.type for i in items)), items=items)
            if attr == "dtype":
                return Val(None, CT, const=_DTypeMarker(t.dtype))
            if attr in ("itemsize", "nbytes"):
                item = t.dtype.itemsize
                if attr == "itemsize":
                    return Val(f"{item}ll", WEAK_INT, True, const=item)
                return self.binop(ast.Mult(), self.array_size(base), Val(f"{item}ll", WEAK_INT, True, const=item), node)
            if attr in ("real", "imag") and not t.is_record and t.dtype.kind == "c":
                # a view of the real or imaginary parts (every other float of the complex array)
                ft = Scalar("float32" if t.dtype.name == "complex64" else "float64")
                ptr = f"(({ft.ctype}*){self.data_ptr(base)} + {0 if attr == 'real' else 1})"
                if t.ndim == 0:
                    return Val(f"ts::mkarr0<{ft.ctype}>({ptr})", ArrayT(ft, 0, "C", t.space))
                shape = [self.extent(base, d).code for d in range(t.ndim)]
                strides = [f"({self.stride_elems(base, d)}) * 2" for d in range(t.ndim)]
                code = f"(ts::mkarr<{ft.ctype}, {t.ndim}>({ptr}, {{{', '.join(shape)}}}, {{{', '.join(strides)}}}))"
                return Val(code, ArrayT(ft, t.ndim, "A", t.space))
            if attr == "real" and not t.is_record and t.dtype.kind != "c":
                return base
            if attr == "T":
                return self.transposed(base, node)
            if attr == "transpose":
                return Val(None, CT, const=_BoundMethod("transpose", base))
            if attr == "view":
                return Val(None, CT, const=_BoundMethod("view", base))
            self.error(node, f"arrays have no attribute '{attr}' in kernels")
        if isinstance(t, TupleT) and t.names is not None and attr in t.names and base.items is not None:
            return base.items[t.names.index(attr)]   # a namedtuple's field
        if isinstance(t, Scalar):
            if attr in ("real", "imag"):
                if t.kind == "c":
                    ft = Scalar("float32" if t.name == "complex64" else "float64")
                    return Val(f"({base.code}).{'re' if attr == 'real' else 'im'}", ft)
                if attr == "real":
                    return base
                return Val(self.literal(0, t.strong()), t.strong(), True, const=0)
            if attr == "conjugate":
                return Val(None, CT, const=_BoundMethod("conjugate", base))
        self.error(node, f"a value of type {t} has no attribute '{attr}'")

    def literal(self, v, t):
        return _literal_code(v, t)

    def dim3(self, name) -> Val:
        base, axis = name.split(".")
        if self.root.target == "cuda":
            return Val(f"((ts::i64){base}.{axis})", INT64, True)
        cpu = {"threadIdx": "ts_t", "blockIdx": "B.b", "blockDim": "B.d", "gridDim": "B.g"}[base]
        return Val(f"{cpu}{axis}", INT64, True, gstride=base == "gridDim")

    def lane_or_warp(self, name) -> Val:
        if self.root.target == "cuda":
            lin = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"
        else:
            lin = "ts_tid"
        if name == "laneid":
            return Val(f"((ts::i64)({lin} & 31))", INT64, True)
        return Val(f"((ts::i64)({lin} >> 5))", INT64, True)

    # ---- arrays ------------------------------------------------------------------------------------
    def extent(self, arr: Val, d: int) -> Val:
        t = arr.type
        if t.is_static:
            n = t.static_shape[d]
            if n == 0 and t.space == "shared":
                return Val(f"((ts::i64)(ts_dyn_shared_bytes() / {t.dtype.itemsize}))", INT64, True)
            return Val(f"{n}ll", INT64, True, const=n)
        return Val(f"{arr.code}.shape[{d}]", INT64, True)

    def array_size(self, arr: Val) -> Val:
        t = arr.type
        if t.ndim == 0:
            return Val("1ll", INT64, True, const=1)
        if t.is_static and 0 not in t.static_shape:
            n = int(np.prod(t.static_shape))
            return Val(f"{n}ll", INT64, True, const=n)
        parts = [self.extent(arr, d).code for d in range(t.ndim)]
        return Val("(" + " * ".join(parts) + ")", INT64, True)

    def stride_elems(self, arr: Val, d: int) -> str:
        t = arr.type
        if t.is_static:
            return str(int(np.prod(t.static_shape[d + 1:])) if d + 1 < t.ndim else 1) + "ll"
        if t.layout == "C":
            rest = [f"{arr.code}.shape[{k}]" for k in range(d + 1, t.ndim)]
            return "(" + " * ".join(rest) + ")" if rest else "1ll"
        return f"{arr.code}.strides[{d}]"

    def stride_bytes(self, arr: Val, d: int) -> Val:
        t = arr.type
        item = t.dtype.storage.itemsize if t.is_record else t.dtype.itemsize
        return Val(f"({self.stride_elems(arr, d)} * {item})", INT64)

    # ---- records ------------------------------------------------------------------------------------
    def transposed(self, arr: Val, node) -> Val:
        """a.T: a view with the axes reversed."""
        t = arr.type
        if t.is_record:
            self.error(node, "a record array cannot be transposed in a kernel")
        if t.ndim < 2:
            return arr
        shape = [self.extent(arr, d).code for d in reversed(range(t.ndim))]
        strides = [self.stride_elems(arr, d) for d in reversed(range(t.ndim))]
        code = f"(ts::mkarr<{t.dtype.ctype}, {t.ndim}>({self.data_ptr(arr)}, {{{', '.join(shape)}}}, " \
               f"{{{', '.join(strides)}}}))"
        return Val(code, ArrayT(t.dtype, t.ndim, "A", t.space if t.space != "const" else "const"))

    def viewed(self, arr: Val, dtype: Val, node) -> Val:
        """a.view(dtype): the same bytes as another number type, as NumPy's; a different item size
        scales the last axis, which must be contiguous (checked in debug mode)."""
        t = arr.type
        if not dtype.is_const:
            self.error(node, "view(dtype) takes a compile-time dtype")
        d = dtype.const
        try:
            nt = d.scalar if isinstance(d, _DTypeMarker) else _dtype_scalar(d)
        except TypeError as why:
            self.error(node, f"view: {why}")
        if t.is_record or isinstance(nt, RecordT):
            self.error(node, "view() of record arrays, or as records, is not supported in kernels")
        old, new = t.dtype.itemsize, nt.itemsize
        data = f"(({nt.ctype}*)({self.data_ptr(arr)}))"
        space = t.space if t.space != "const" else "const"
        if t.ndim == 0:
            if old != new:
                self.error(node, "view() of a 0-d array changes the item size")
            return Val(f"(ts::mkarr0<{nt.ctype}>({data}))", ArrayT(nt, 0, "A", space))
        shape = [self.extent(arr, k).code for k in range(t.ndim)]
        strides = [self.stride_elems(arr, k) for k in range(t.ndim)]
        if old != new:
            last = shape[-1]
            shape[-1] = f"(({last}) * {old} / {new})"
            strides = [f"(({st}) * {old} / {new})" for st in strides[:-1]] + ["1ll"]
            if self.root.options.get("debug") and self.mode != "function":
                raised = self.raise_call(ValueError, "To change to a dtype of a different size, the last axis "
                                         "must be contiguous and its size in bytes a multiple of the new item size",
                                         node)
                bad = f"(({last}) * {old}) % {new} != 0"
                if t.layout != "C" and not t.is_static:
                    bad = f"({bad} || (({last}) > 1 && ({self.stride_elems(arr, t.ndim - 1)}) != 1))"
                data = f"({bad} ? ({raised}, {data}) : {data})"
        # in parentheses: the code may be a macro's argument (debug mode's index checks)
        code = f"(ts::mkarr<{nt.ctype}, {t.ndim}>({data}, {{{', '.join(shape)}}}, {{{', '.join(strides)}}}))"
        return Val(code, ArrayT(nt, t.ndim, t.layout if old == new else ("C" if t.layout == "C" else "A"), space))

    def record_key(self, rec: Val, key_node, node) -> str:
        """The field a record's index names: a constant name (r['x']) or position (r[0], as NumPy's)."""
        key = self.expr(key_node)
        if key.is_const and isinstance(key.const, str):
            return key.const
        if key.is_const and isinstance(key.const, (int, np.integer)) and not isinstance(key.const, bool):
            names = [f[0] for f in rec.type.fields]
            k = int(key.const)
            if not -len(names) <= k < len(names):
                self.error(node, f"index {k} is out of bounds for a record of {len(names)} fields")
            return names[k]
        self.error(node, "a record is indexed with a constant field name (r['x']) or position (r[0])")

    def record_field(self, rec: Val, name, node) -> Val:
        """A field of a record (rec.x, rec['x']): an lvalue in place, or a byte-wise read (and
        store) where the field is not aligned for its type; a subarray field is a view."""
        t = rec.type
        f = t.field(name) if isinstance(name, str) else None
        if f is None:
            self.error(node, f"the record has no field {name!r} (fields: {', '.join(x[0] for x in t.fields)})")
        _, ft, shape, off = f
        ptr = f"({rec.code} + {off})"
        if shape:
            if not t.in_place(f):
                self.error(node, f"the subarray field {name!r} is not aligned for {ft.name} in this array; read it "
                                 "in a record array whose dtype is aligned (np.dtype(..., align=True))")
            return Val(f"(({ft.ctype}*){ptr})", ArrayT(ft, len(shape), "C", "global", tuple(shape)))
        if t.in_place(f):
            return Val(f"(*(({ft.ctype}*){ptr}))", ft)
        return Val(f"ts::ldu<{ft.ctype}>({ptr})", ft, uptr=ptr)

    def record_field_view(self, arr: Val, name, node) -> Val:
        """r['x'] of a record array: the field of every record, as an array view."""
        t = arr.type
        rt = t.dtype
        f = rt.field(name) if isinstance(name, str) else None
        if f is None:
            self.error(node, f"the record array has no field {name!r} (fields: {', '.join(x[0] for x in rt.fields)})")
        _, ft, shape, off = f
        if not (rt.align % ft.itemsize == 0 and off % field_alignment(ft) == 0):
            self.error(node, f"the field {name!r} ({ft.name}) of this record array is not aligned for a view; read "
                             f"it record by record (r[i].{name}) or use an aligned dtype (np.dtype(..., align=True))")
        ptr = f"(({ft.ctype}*)((unsigned char*){arr.code}.data + {off}))"
        item = rt.storage.itemsize
        dims = [f"{arr.code}.shape[{d}]" for d in range(t.ndim)] + [f"{n}ll" for n in shape]
        strides = [f"({arr.code}.strides[{d}] * {item} / {ft.itemsize})" for d in range(t.ndim)]
        strides += [f"{int(np.prod(shape[k + 1:]))}ll" for k in range(len(shape))]
        nd = len(dims)
        if nd == 0:
            return Val(f"ts::mkarr0<{ft.ctype}>({ptr})", ArrayT(ft, 0, "C"))
        code = f"(ts::mkarr<{ft.ctype}, {nd}>({ptr}, {{{', '.join(dims)}}}, {{{', '.join(strides)}}}))"
        return Val(code, ArrayT(ft, nd, "A"))

    def store_record(self, ref: Val, value: Val, node):
        """r[i] = rec: the record's value copied, its bytes where both have one layout, else field by field."""
        dst, src = ref.type, value.type
        if not isinstance(src, RecordT):
            self.error(node, f"a record is assigned a record, got {src}")
        if [(f[0], f[1], f[2]) for f in dst.fields] != [(f[0], f[1], f[2]) for f in src.fields]:
            self.error(node, f"assigning a record of fields ({src.descr}) to a record of fields ({dst.descr})")
        if dst.fields == src.fields and dst.itemsize == src.itemsize:
            k = self.root.fresh("ts_k")
            self.emit(f"{{ const unsigned char* {k}_s = {value.code}; unsigned char* {k}_d = {ref.code}; "
                      f"for (int {k} = 0; {k} < {dst.itemsize}; ++{k}) {k}_d[{k}] = {k}_s[{k}]; }}")
            return
        for name, _, _, _ in dst.fields:
            self.store_record_field(self.record_field(ref, name, node), self.record_field(value, name, node), node)

    def store_record_field(self, ref: Val, value: Val, node, augmented_op=None):
        """Stores value into a record field (or a field op= value)."""
        if isinstance(ref.type, ArrayT):
            if augmented_op is not None:
                self.error(node, "augmented assignment to a subarray field is not supported; update its elements "
                                 "(r[i].v[k] += ...)")
            return self.assign_view(ref, value, node)   # r.v = arr: the elements, as slice assignment
        ft = ref.type
        if augmented_op is not None:
            value = self.binop(augmented_op, ref, value, node)
        self.check_store(value.type, ft, node, "a record field")
        code = self.convert(value, ft, node)
        if ref.uptr is not None:
            self.emit(f"ts::stu<{ft.ctype}>({ref.uptr}, {code});")
        else:
            self.emit(f"{ref.code} = {code};")

    def index_list(self, slice_node) -> list:
        if isinstance(slice_node, ast.Tuple):
            return list(slice_node.elts)
        return [slice_node]

    def element(self, arr: Val, slice_node, node) -> Val:
        """arr[idx]: an element (an lvalue) or a view."""
        t = arr.type
        idx_nodes = self.index_list(slice_node)
        dots = [k for k, n_ in enumerate(idx_nodes) if isinstance(n_, ast.Constant) and n_.value is Ellipsis]
        if len(dots) > 1:
            self.error(node, "an index can only have a single ellipsis ('...')")
        if dots:
            # a[..., 0]: as many full slices as the other indices leave axes
            k = dots[0]
            full = [ast.copy_location(ast.Slice(lower=None, upper=None, step=None), node)
                    for _ in range(max(t.ndim - (len(idx_nodes) - 1), 0))]
            idx_nodes = idx_nodes[:k] + full + idx_nodes[k + 1:]
        idx_vals = []
        for n_ in idx_nodes:
            if isinstance(n_, ast.Slice):
                idx_vals.append(n_)
                continue
            v = self.expr(n_)
            if isinstance(v.type, TupleT) and len(idx_nodes) == 1:
                idx_vals.extend(v.items)
                continue
            idx_vals.append(v)
        if t.is_record and len(idx_vals) == 1 and isinstance(idx_vals[0], Val) and idx_vals[0].is_const and \
                isinstance(idx_vals[0].const, str):
            return self.record_field_view(arr, idx_vals[0].const, node)
        if len(idx_vals) > t.ndim:
            self.error(node, f"too many indices for a {t.ndim}-d array: {len(idx_vals)}")
        if any(isinstance(v, ast.Slice) for v in idx_vals) or len(idx_vals) < t.ndim:
            if t.is_record and t.is_static:
                self.error(node, f"a view of a {t.space} array of records is not supported; index its records "
                                 "(a[i].x)")
            return self.view(arr, idx_vals, node)
        offs = []
        for d, v in enumerate(idx_vals):
            if not is_intlike(v.type):
                self.error(node, f"array index must be an integer, got {v.type}")
            offs.append(self.wrapped_index(arr, d, v, node))
        if t.is_record and t.is_static:
            code = offs[0]
            for d in range(1, t.ndim):
                code = f"({code}) * {self.extent(arr, d).code} + {offs[d]}"
            return Val(f"((unsigned char*)({arr.code}) + ({code}) * {t.dtype.itemsize})", t.dtype)
        if t.is_record:
            code = " + ".join(f"({o}) * {arr.code}.strides[{d}]" for d, o in enumerate(offs)) or "0"
            return Val(f"((unsigned char*)({arr.code}.data + ({code})))", t.dtype)
        if t.ndim == 0:
            return Val(f"{self.data_ptr(arr)}[0]", t.dtype)
        if t.is_static or t.layout == "C":
            code = offs[0]
            for d in range(1, t.ndim):
                code = f"({code}) * {self.extent(arr, d).code} + {offs[d]}"
        else:
            code = " + ".join(f"({o}) * {arr.code}.strides[{d}]" for d, o in enumerate(offs))
        return Val(f"{self.data_ptr(arr)}[{code}]", t.dtype)

    def data_ptr(self, arr: Val) -> str:
        return arr.code if arr.type.is_static else f"{arr.code}.data"

    def wrapped_index(self, arr: Val, d: int, v: Val, node) -> str:
        ext = self.extent(arr, d).code
        code = f"(ts::i64)({v.code})" if v.type.kind != "u" else f"(ts::i64)({v.code})"
        if not v.nonneg and v.type.kind in "ib":
            code = f"ts::wrap({code}, {ext})"
        if self.root.options.get("debug"):
            aid = self.array_id(arr, node)
            code = f"ts_chk({code}, {ext}, {aid}, {d}, {self.lineno(node)}{self.chk_ctx()})"
        return code

    def chk_ctx(self):
        return "" if self.root.target == "cuda" else ", B, ts_tid"

    def array_id(self, arr: Val, node) -> int:
        label = arr.code.split(".")[0].split("v_")[-1] if arr.code else "?"
        for code, name in self.root.captured_names.items():
            if arr.code and code in arr.code:
                label = name
        if label not in self.root.array_names:
            self.root.array_names.append(label)
        return self.root.array_names.index(label)

    def view(self, arr: Val, idx_vals, node) -> Val:
        t = arr.type
        off_terms = []
        shape, strides = [], []
        d = 0
        for v in idx_vals:
            ext = self.extent(arr, d).code
            st = self.stride_elems(arr, d)
            if isinstance(v, ast.Slice):
                lo = self.expr(v.lower) if v.lower is not None else None
                hi = self.expr(v.upper) if v.upper is not None else None
                step = self.expr(v.step) if v.step is not None else None
                for x in (lo, hi, step):
                    if x is not None and not is_intlike(x.type):
                        self.error(node, f"slice bounds must be integers, got {x.type}")
                step_c = f"(ts::i64)({step.code})" if step is not None else "1ll"
                lo_c = f"(ts::i64)({lo.code})" if lo is not None else "ts::i64(-9223372036854775807ll - 1)"
                hi_c = f"(ts::i64)({hi.code})" if hi is not None else "ts::i64(9223372036854775807ll)"
                sl = self.declare_temp("ts::Slice", "sl")
                self.emit_pre(f"{sl} = ts::slice({lo_c}, {hi_c}, {step_c}, {ext});")
                off_terms.append(f"{sl}.start * {st}")
                shape.append(f"{sl}.len")
                strides.append(f"{sl}.step * {st}")
            else:
                if not is_intlike(v.type):
                    self.error(node, f"array index must be an integer, got {v.type}")
                off_terms.append(f"({self.wrapped_index(arr, d, v, node)}) * {st}")
            d += 1
        for k in range(d, t.ndim):
            shape.append(self.extent(arr, k).code)
            strides.append(self.stride_elems(arr, k))
        nd = len(shape)
        ptr = f"{self.data_ptr(arr)} + ({' + '.join(off_terms) if off_terms else '0'})"
        if t.is_record:
            # the records' storage axis stays last
            shape.append(f"{arr.code}.shape[{t.ndim}]")
            strides.append(f"{arr.code}.strides[{t.ndim}]")
            ct = t.dtype.storage.ctype
            code = f"(ts::mkarr<{ct}, {nd + 1}>({ptr}, {{{', '.join(shape)}}}, {{{', '.join(strides)}}}))"
            return Val(code, ArrayT(t.dtype, nd, "A"))
        layout = "C" if (t.layout == "C" or t.is_static) and all(not isinstance(v, ast.Slice) for v in idx_vals) else "A"
        # in parentheses: the code may be a macro's argument (debug mode's index checks)
        code = f"(ts::mkarr<{t.dtype.ctype}, {nd}>({ptr}, {{{', '.join(shape)}}}, {{{', '.join(strides)}}}))" if nd else \
            f"ts::mkarr0<{t.dtype.ctype}>({ptr})"
        return Val(code, ArrayT(t.dtype, nd, layout, t.space if t.space != "const" else "const"))

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base.type, RecordT):
            return self.record_field(base, self.record_key(base, node.slice, node), node)
        if isinstance(base.type, ArrayT):
            return self.element(base, node.slice, node)
        if isinstance(base.type, TupleT) or base.items is not None:
            idx = self.expr(node.slice)
            if not idx.is_const or not isinstance(idx.const, (int, np.integer)):
                if isinstance(node.slice, ast.Slice):
                    lo = self.expr(node.slice.lower).const if node.slice.lower else None
                    hi = self.expr(node.slice.upper).const if node.slice.upper else None
                    st = self.expr(node.slice.step).const if node.slice.step else None
                    items = base.items[slice(lo, hi, st)]
                    return Val(None, TupleT(tuple(i.type for i in items)), items=items)
                return self.tuple_item_at(base, idx, node)
            try:
                return base.items[int(idx.const)]
            except IndexError:
                self.error(node, f"tuple index {idx.const} out of range for a tuple of {len(base.items)}")
        if base.is_const and base.type is CT:
            obj = base.const
            if isinstance(obj, type) and issubclass(obj, enum.Enum):   # Color['red']: a member, by name
                key = self.expr(node.slice)
                if not (key.is_const and isinstance(key.const, str)):
                    self.error(node, f"an enum ({obj.__name__}) is indexed with a constant member name")
                if key.const not in obj.__members__:
                    self.error(node, f"{obj.__name__} has no member {key.const!r}")
                return self.const_val(obj[key.const], node)
            # float32[:] style array types in kernels are not values
            self.error(node, f"cannot index {obj!r} in a kernel")
        self.error(node, f"a value of type {base.type} cannot be indexed")

    def tuple_item_at(self, base: Val, idx: Val, node) -> Val:
        """t[i] with i known only when the kernel runs, as Numba's getitem of a homogeneous tuple
        (numbers, or arrays of one type); a negative i counts from the end."""
        items = base.items
        if not isinstance(idx.type, Scalar) or idx.type.kind not in "iub":
            self.error(node, f"a tuple is indexed with an integer, got {idx.type}")
        if not items:
            self.error(node, "tuple index out of range (an empty tuple)")
        types = [it.type.strong() if isinstance(it.type, Scalar) else it.type for it in items]
        if all(isinstance(t, Scalar) for t in types):
            t = unify(*[it.type for it in items]).strong()
        elif all(t == types[0] for t in types) and isinstance(types[0], ArrayT) and not types[0].is_static:
            t = types[0]
        else:
            self.error(node, f"a tuple of {', '.join(map(str, types))} is indexed only with a constant integer "
                             "(a variable index needs items of one type)")
        if self.typing:
            return Val("0", t) if isinstance(t, Scalar) else Val(items[0].code, t)
        k = self.declare_temp(INT64, "ti")
        self.emit(f"{k} = {self.convert(idx, INT64, node)};")
        n = len(items)
        code = self.convert(items[-1], t, node)
        if self.root.options.get("debug") and self.mode != "function":
            # an index past either end raises IndexError from the launch, as Numba's in debug mode
            raised = self.raise_call(IndexError, "tuple index out of range", node)
            code = f"(({k} == {n - 1} || {k} == -1) ? {code} : ({raised}, {code}))"
        for j in range(n - 2, -1, -1):
            code = f"(({k} == {j} || {k} == {j - n}) ? {self.convert(items[j], t, node)} : {code})"
        return Val(code, t)

    def expr_Slice(self, node):
        self.error(node, "a slice is only valid as an array index")

    # ---- operators -------------------------------------------------------------------------------
    def expr_BinOp(self, node):
        a = self.expr(node.left)
        b = self.expr(node.right)
        return self.binop(node.op, a, b, node)

    def scalar_check(self, v: Val, node, what):
        if not isinstance(v.type, Scalar):
            self.error(node, f"{what} needs numbers, got {v.type}")

    def nonzero(self, code: str, t, node, message: str) -> str:
        """A divisor. In debug mode under Numba's rules (its Python error model), a zero divisor raises
        ZeroDivisionError(message) from the launch; otherwise division by zero is IEEE's (and 0 for
        integers), as Numba's NumPy error model."""
        if not (self.root.options.get("debug") and numba_rules()) or self.mode == "function" or \
                t.kind not in "iuf":
            return code
        return f"ts_nz({code}, {self.raise_index(ZeroDivisionError, message, node)}, {self.lineno(node)}{self.chk_ctx()})"

    def binop(self, op, a: Val, b: Val, node) -> Val:
        r = self._binop(op, a, b, node)
        if a.gstride or b.gstride:
            r.gstride = True
        return r

    def _binop(self, op, a: Val, b: Val, node) -> Val:
        opname = type(op).__name__
        if isinstance(a.type, TupleT) and isinstance(b.type, TupleT) and opname == "Add":
            items = self.tuple_items(a, node) + self.tuple_items(b, node)
            return Val(None, TupleT(tuple(i.type for i in items)), items=items)
        self.scalar_check(a, node, f"operator {_OPSYM.get(opname, opname)}")
        self.scalar_check(b, node, f"operator {_OPSYM.get(opname, opname)}")
        # constant folding of two Python literals keeps them weak
        if a.is_const and b.is_const and a.type.weak and b.type.weak and opname in _FOLD:
            try:
                r = _FOLD[opname](a.const, b.const)
                t = _type_of_python_value(r)
                if t is not None:
                    return Val(_literal_code(r, t), t, nonneg=not isinstance(r, complex) and r >= 0, const=r)
            except (ZeroDivisionError, OverflowError, ValueError):
                pass
        nonneg = a.nonneg and b.nonneg
        if opname == "Div":
            t = true_divide_type(a.type, b.type)
            return Val(f"({self.convert(a, t, node)} / {self.nonzero(self.convert(b, t, node), t, node, 'division by zero')})", t)
        t = operator_type(opname, a.type, b.type)
        ts_ = t.strong() if not (a.type.weak and b.type.weak) else t
        ct = ts_.ctype
        A, B_ = self.convert(a, ts_, node), self.convert(b, ts_, node)
        k = ts_.kind
        if opname in ("Add", "Sub", "Mult"):
            sym = _OPSYM[opname]
            if k == "b":
                if opname == "Sub":
                    self.error(node, "numpy boolean subtract is not supported; use ^ or !=")
                return Val(f"({A} {'|' if opname == 'Add' else '&'} {B_})", ts_, True)
            code = f"({A} {sym} {B_})"
            if k in "iu" and ts_.itemsize < 4:
                code = f"(({ct}){code})"
            elif k == "i" and ts_.itemsize == 4:
                # int32 wraps around (as NumPy's and the GPU's) rather than overflowing (undefined in C++)
                code = f"((ts::i32)((ts::u32)({A}) {sym} (ts::u32)({B_})))"
            return Val(code, ts_, nonneg and opname != "Sub")
        if opname == "FloorDiv":
            if k in "iub":
                tt = INT64 if k == "b" else ts_
                d = self.nonzero(self.convert(b, tt, node), tt, node, "integer division by zero")
                return Val(f"ts::floordiv<{tt.ctype}>({self.convert(a, tt, node)}, {d})"
                           if tt.kind == "i" else f"ts::floordiv({self.convert(a, tt, node)}, {d})",
                           tt, nonneg)
            if k == "c":
                self.error(node, "// is not defined for complex numbers")
            ft = ts_ if ts_.name not in ("float16", "bfloat16") else FLOAT32
            code = f"ts::ffloordiv<{ft.ctype}>({self.convert(a, ft, node)}, " \
                   f"{self.nonzero(self.convert(b, ft, node), ft, node, 'division by zero')})"
            return Val(self.round_half(code, ts_), ts_)
        if opname == "Mod":
            if k in "iub":
                tt = INT64 if k == "b" else ts_
                d = self.nonzero(self.convert(b, tt, node), tt, node, "integer modulo by zero")
                return Val(f"ts::pymod<{tt.ctype}>({self.convert(a, tt, node)}, {d})"
                           if tt.kind == "i" else f"ts::pymod({self.convert(a, tt, node)}, {d})",
                           tt, b.nonneg)
            if k == "c":
                self.error(node, "% is not defined for complex numbers")
            ft = ts_ if ts_.name not in ("float16", "bfloat16") else FLOAT32
            code = f"ts::fpymod<{ft.ctype}>({self.convert(a, ft, node)}, " \
                   f"{self.nonzero(self.convert(b, ft, node), ft, node, 'modulo by zero')})"
            return Val(self.round_half(code, ts_), ts_)
        if opname == "Pow":
            if k in "iu" and b.is_const and b.const < 0 and not numba_rules():
                # an integer to a negative constant power is a float, as in Python (Numba's rules: an
                # integer, ipow's 0 unless the base is 1 or -1)
                return Val(f"ts::fpowi({self.convert(a, FLOAT64, node)}, {self.convert(b, INT64, node)})", FLOAT64)
            if k in "iu":
                return Val(f"ts::ipow<{ct}>({A}, {B_})", ts_, a.nonneg)
            if k == "b":
                return Val(f"ts::ipow<ts::i64>((ts::i64){A}, (ts::i64){B_})", INT64, True)
            if k == "c":
                return Val(f"ts::cpow({A}, {B_})", ts_)
            ft = ts_ if ts_.name not in ("float16", "bfloat16") else FLOAT32
            if b.type.kind in "iu":
                # float ** integer by repeated squaring, as Numba's int_power: x ** 2 is exactly x * x
                # (powf is neither exact nor cheap).
                return Val(self.round_half(f"ts::fpowi({self.convert(a, ft, node)}, {self.convert(b, INT64, node)})", ts_), ts_)
            return Val(self.round_half(f"ts::pow({self.convert(a, ft, node)}, {self.convert(b, ft, node)})", ts_), ts_)
        if opname in ("BitAnd", "BitOr", "BitXor"):
            if k not in "iub":
                self.error(node, f"operator {_OPSYM[opname]} needs integers or booleans, got {ts_.name}")
            code = f"({A} {_OPSYM[opname]} {B_})"
            if k in "iu" and ts_.itemsize < 4:
                code = f"(({ct}){code})"
            if k == "b":
                code = f"((bool){code})"
            return Val(code, ts_, nonneg)
        if opname in ("LShift", "RShift"):
            if k not in "iu":
                if k == "b":
                    ts_ = INT64 if (a.type.weak or b.type.weak) else Scalar("int8")
                    A, B_ = self.convert(a, ts_, node), self.convert(b, ts_, node)
                else:
                    self.error(node, f"operator {_OPSYM[opname]} needs integers, got {ts_.name}")
            code = f"(({ts_.ctype})({A} {_OPSYM[opname]} {B_}))"
            if opname == "LShift" and ts_.kind == "i" and ts_.itemsize == 4:
                code = f"((ts::i32)((ts::u32)({A}) << ({B_})))"   # wraps, for negative values too
            return Val(code, ts_, nonneg)
        if opname == "MatMult":
            self.error(node, "@ is not supported in kernels")
        self.error(node, f"operator {opname} is not supported")

    def round_half(self, code, t: Scalar) -> str:
        if t.name in ("float16", "bfloat16"):
            return f"{t.ctype}({code})"
        return code

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        op = type(node.op).__name__
        if op == "Not":
            return Val(f"(!{self.truth(v, node)})", BOOL)
        self.scalar_check(v, node, "a unary operator")
        t = v.type
        if v.is_const and t.weak:
            r = {"USub": lambda x: -x, "UAdd": lambda x: +x, "Invert": lambda x: ~x}[op](v.const)
            tt = _type_of_python_value(r)
            return Val(_literal_code(r, tt), tt, nonneg=not isinstance(r, complex) and r >= 0, const=r)
        if t.kind == "b" and op in ("UAdd", "USub") and numba_rules():
            v, t = Val(self.convert(v, INT64, node), INT64, True), INT64  # Numba: -True is -1
        if op == "UAdd":
            return v
        if op == "USub":
            if t.kind == "b":
                self.error(node, "the numpy boolean negative, the `-` operator, is not supported; use `not`")
            code = f"(-{v.code})"
            if t.kind in "iu" and t.itemsize < 4:
                code = f"(({t.ctype}){code})"
            elif t.kind == "i" and t.itemsize == 4:
                code = f"((ts::i32)(0u - (ts::u32)({v.code})))"
            return Val(code, t)
        if op == "Invert":
            if t.kind == "b":
                return Val(f"(!{v.code})", t)
            if t.kind not in "iu":
                self.error(node, f"operator ~ needs integers or booleans, got {t.name}")
            return Val(f"(({t.ctype})~{v.code})", t)
        self.error(node, f"unary operator {op} not supported")

    def truth(self, v: Val, node) -> str:
        if isinstance(v.type, Scalar):
            if v.type.kind == "b":
                return v.code
            return f"ts::cast<bool>({v.code})"
        if v.is_const:
            return "true" if v.const else "false"
        self.error(node, f"a value of type {v.type} has no truth value in a kernel")

    def capture(self, fn):
        """Runs fn() with the statements it emits (inlined calls, exchange sites) collected, not
        emitted: (its value, those lines)."""
        saved_lines, saved_pre = self.lines, self.pre
        self.lines, self.pre = [], []
        try:
            v = fn()
            extra = self.lines + ["  " * self.indent + p for p in self.pre]
        finally:
            self.lines, self.pre = saved_lines, saved_pre
        return v, extra

    def expr_BoolOp(self, node):
        values = list(node.values)
        first = self.expr(values[0])
        # operands decided at compile time (w is not None): Python's short circuit, here, so
        # that the operands after a deciding one are not compiled (w is not None and w[i] > 0)
        while len(values) > 1 and first.is_const and first.type is not CT and \
                isinstance(first.const, (bool, np.bool_)):
            if bool(first.const) != isinstance(node.op, ast.And):
                return first
            values = values[1:]
            first = self.expr(values[0])
        if len(values) == 1:
            return first
        rest = [self.capture(lambda n=n: self.expr(n)) for n in values[1:]]
        if any(lines for _, lines in rest) and not self.typing:
            # a later operand emits statements (an inlined call): evaluate it only when needed
            vals = [first] + [v for v, _ in rest]
            t = promote(*[v.type for v in vals])
            t = t.strong() if isinstance(t, Scalar) else t
            r = self.declare_temp(t, "b")
            self.flush_pre()
            ind = "  " * self.indent
            self.lines.append(f"{ind}{r} = {self.convert(first, t, node)};")
            for v, lines in rest:
                test = f"ts::cast<bool>({r})" if t.kind != "b" else r
                self.lines.append(f"{ind}if ({test if isinstance(node.op, ast.And) else '!' + test}) {{")
                self.lines += lines
                self.lines.append(f"{ind}  {r} = {self.convert(v, t, node)};")
                self.lines.append(f"{ind}}}")
            return Val(r, t)
        vals = [first] + [v for v, _ in rest]
        sym = "&&" if isinstance(node.op, ast.And) else "||"
        if all(isinstance(v.type, Scalar) and v.type.kind == "b" for v in vals):
            return Val("(" + f" {sym} ".join(v.code for v in vals) + ")", BOOL)
        t = promote(*[v.type for v in vals])
        code = self.convert(vals[-1], t, node)
        for v in reversed(vals[:-1]):
            c = self.convert(v, t, node)
            if isinstance(node.op, ast.And):
                code = f"({self.truth(v, node)} ? {code} : {c})"
            else:
                code = f"({self.truth(v, node)} ? {c} : {code})"
        return Val(code, t)

    def expr_Compare(self, node):
        left = self.expr(node.left)
        if len(node.ops) == 1 and type(node.ops[0]).__name__ in ("Eq", "NotEq"):
            right = self.expr(node.comparators[0])
            if left.is_const and right.is_const and (left.type is CT or right.type is CT):
                # compile-time values (x.dtype == np.float32): decided here, in Python
                same = _ct_key(left.const) == _ct_key(right.const)
                r = same if isinstance(node.ops[0], ast.Eq) else not same
                return Val("true" if r else "false", BOOL, True, const=r)
        parts = []
        decided = []   # the comparisons decided at compile time
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp)
            opname = type(op).__name__
            if opname in ("Is", "IsNot"):
                if left.is_const and right.is_const:
                    same = left.const is right.const
                elif (left.is_const and left.const is None) or (right.is_const and right.const is None):
                    same = False   # a value known only when the kernel runs (an array, a number) is not None
                else:
                    self.error(node, "'is' compares only compile-time values (None, ...) in kernels")
                decided.append(same == (opname == "Is"))
                parts.append("true" if decided[-1] else "false")
                left = right
                continue
            if opname in ("In", "NotIn"):
                parts.append(self.membership(left, right, opname == "In", node))
                left = right
                continue
            self.scalar_check(left, node, "a comparison")
            self.scalar_check(right, node, "a comparison")
            # NumPy's rules compare in the promoted type; Numba's in the unified one (a uint64
            # against a signed integer as float64), not in its 64-bit arithmetic type
            t = unify(left.type, right.type)
            t = t.strong() if not (left.type.weak and right.type.weak) else t
            if t.kind == "c" and opname not in ("Eq", "NotEq"):
                self.error(node, "complex numbers are not ordered")
            sym = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">="}[opname]
            known = _outside_integer_type(left, right, t, opname)
            if known is not None:  # NumPy 2: an int beyond the dtype's range compares by value
                value = right if left.is_const and not right.is_const else left
                parts.append(f"((void)({value.code}), {'true' if known else 'false'})")
            else:
                parts.append(f"({self.convert(left, t, node)} {sym} {self.convert(right, t, node)})")
            left = right
        if len(decided) == len(parts):   # x is None, w is not None: a compile-time branch, as Numba prunes it
            return Val("true" if all(decided) else "false", BOOL, True, const=all(decided))
        return Val("(" + " && ".join(parts) + ")", BOOL)

    def membership(self, v: Val, t: Val, inside: bool, node) -> str:
        """v in t (or not in) for a tuple t: v equal to one of its items."""
        if t.items is None:
            self.error(node, f"'in' tests membership of a tuple in kernels, not of {t.type}")
        terms = []
        for it in t.items:
            self.scalar_check(v, node, "'in'")
            self.scalar_check(it, node, "'in'")
            ct = unify(v.type, it.type)   # as a comparison's
            ct = ct.strong() if not (v.type.weak and it.type.weak) else ct
            terms.append(f"({self.convert(v, ct, node)} == {self.convert(it, ct, node)})")
        code = " || ".join(terms) or "false"
        return f"({code})" if inside else f"(!({code}))"

    def expr_IfExp(self, node):
        test = self.expr(node.test)
        if test.is_const and isinstance(test.const, (bool, np.bool_)) and test.type is not CT:
            return self.expr(node.body if test.const else node.orelse)   # decided at compile time
        a, a_lines = self.capture(lambda: self.expr(node.body))
        b, b_lines = self.capture(lambda: self.expr(node.orelse))
        if isinstance(a.type, TupleT) or isinstance(b.type, TupleT):
            # tuples: item by item (nested tuples too), into temporaries set by the branch taken
            t = self.unify_types([a.type, b.type], lambda why: self.error(
                node, f"the branches of a conditional expression are {why}"))
            if self.typing:
                return self.result_placeholder(t)
            r = self.root.fresh(f"{self.prefix}ts_c")
            self.declare_ret(r, t)
            self.flush_pre()
            ind = "  " * self.indent
            self.lines.append(f"{ind}if ({self.truth(test, node)}) {{")
            for v, v_lines, last in ((a, a_lines, False), (b, b_lines, True)):
                self.lines += v_lines
                self.indent += 1
                self.assign_return(v, node, t, r)
                self.indent -= 1
                self.lines.append(f"{ind}}}" if last else f"{ind}}} else {{")
            return self.ret_value(r, t)
        if (a_lines or b_lines) and not self.typing:
            # a branch emits statements (an inlined call): run only the branch taken
            if not (isinstance(a.type, Scalar) and isinstance(b.type, Scalar)):
                self.error(node, f"the branches of a conditional expression have types {a.type} and {b.type}")
            t = unify(a.type, b.type).strong()
            r = self.declare_temp(t, "c")
            self.flush_pre()
            ind = "  " * self.indent
            self.lines.append(f"{ind}if ({self.truth(test, node)}) {{")
            self.lines += a_lines
            self.lines.append(f"{ind}  {r} = {self.convert(a, t, node)};")
            self.lines.append(f"{ind}}} else {{")
            self.lines += b_lines
            self.lines.append(f"{ind}  {r} = {self.convert(b, t, node)};")
            self.lines.append(f"{ind}}}")
            return Val(r, t, a.nonneg and b.nonneg)
        if isinstance(a.type, Scalar) and isinstance(b.type, Scalar):
            t = unify(a.type, b.type)
            t = t.strong() if not (a.type.weak and b.type.weak) else t
            return Val(f"({self.truth(test, node)} ? {self.convert(a, t, node)} : {self.convert(b, t, node)})", t,
                       a.nonneg and b.nonneg)
        if a.type == b.type and isinstance(a.type, ArrayT):
            return Val(f"({self.truth(test, node)} ? {a.code} : {b.code})", a.type)
        if isinstance(a.type, RecordT) and isinstance(b.type, RecordT) and a.type.fields == b.type.fields \
                and a.type.itemsize == b.type.itemsize:
            # records of one dtype: the address of the one chosen, its fields read in place where both are
            t = a.type if a.type.align <= b.type.align else b.type
            return Val(f"({self.truth(test, node)} ? {a.code} : {b.code})", t)
        self.error(node, f"the branches of a conditional expression have types {a.type} and {b.type}")

    # ---- conversions --------------------------------------------------------------------------------
    def convert(self, v: Val, t, node) -> str:
        if isinstance(t, RecordT):
            if not isinstance(v.type, RecordT) or v.type.fields != t.fields:
                self.error(node, f"expected a record of {t}, got {v.type}")
            return v.code
        if isinstance(t, ArrayT):
            if not isinstance(v.type, ArrayT):
                self.error(node, f"expected an array, got {v.type}")
            if t.is_static:
                return v.code
            if v.type.is_static:
                return self.static_to_arr(v)
            return v.code
        if not isinstance(t, Scalar):
            self.error(node, f"cannot convert {v.type} to {t}")
        if not isinstance(v.type, Scalar):
            self.error(node, f"expected a number, got {v.type}")
        if v.is_const and not isinstance(v.const, (np.ndarray,)) and _type_of_python_value(v.const) is not None:
            c = v.const
            if t.kind in "iu" and isinstance(c, (float, complex, np.floating, np.complexfloating)):
                return f"ts::cast<{t.ctype}>({v.code})"
            if t.kind == "c" or (t.kind == "f" and not isinstance(c, (complex, np.complexfloating))) or \
                    (t.kind in "iub" and isinstance(c, (bool, int, np.integer, np.bool_))):
                if t.kind in "iu" and not isinstance(c, (bool, np.bool_)):
                    info = np.iinfo(t.name)
                    if not info.min <= int(c) <= info.max:
                        self.error(node, f"Python integer {c} out of bounds for {t.name}")
                return _literal_code(c if t.kind != "b" else bool(c), t.strong())
        if v.type.strong() == t.strong():
            return v.code
        return f"ts::cast<{t.ctype}>({v.code})"

    def static_to_arr(self, v: Val) -> str:
        t = v.type
        shape = ", ".join(self.extent(v, d).code for d in range(t.ndim))
        strides = ", ".join(self.stride_elems(v, d) for d in range(t.ndim))
        return f"ts::mkarr<{t.dtype.ctype}, {t.ndim}>({v.code}, {{{shape}}}, {{{strides}}})"

    # ---- calls ---------------------------------------------------------------------------------------
    def expr_Call(self, node):
        fn = self.expr(node.func)
        if any(isinstance(a, ast.Starred) for a in node.args):
            node = self.unpack_starred(node)
        if fn.is_const and isinstance(fn.const, _BoundMethod):
            bm = fn.const
            if bm.name == "grid_sync":
                self.args_of(node, 0, 0, "sync")
                return self.grid_sync(node)
            if bm.name == "transpose":
                vals, _ = self.args_of(node, 0, 0, "transpose")
                return self.transposed(bm.base, node)
            if bm.name == "view":
                vals, _ = self.args_of(node, 1, 1, "view")
                return self.viewed(bm.base, vals[0], node)
            if bm.name == "conjugate":
                t = bm.base.type
                if t.kind == "c":
                    return Val(f"{t.ctype}(({bm.base.code}).re, -({bm.base.code}).im)", t)
                return bm.base
        if not (fn.is_const and fn.type is CT):
            self.error(node, f"a value of type {fn.type} is not callable")
        obj = fn.const
        from . import _dispatch
        if isinstance(obj, (_dispatch.DeviceFunction, _InnerFunction)):
            return self.call_device_function(obj, node)
        if isinstance(obj, _dispatch.Kernel):
            self.error(node, f"kernel '{obj.__name__}' cannot be called from a kernel; decorate it with "
                             "@jit(device=True) to make it a device function")
        if isinstance(obj, I.Intrinsic):
            return self.call_intrinsic(obj._ts_intrinsic, node)
        if getattr(obj, "_ts_tuple_types", None) is not None and not isinstance(obj, type):
            return self.tuple_cast(obj, node)
        if _is_dtype_object(obj) or isinstance(obj, _DTypeMarker):
            try:
                t = obj.scalar if isinstance(obj, _DTypeMarker) else _dtype_scalar(obj)
            except TypeError as why:   # np.float128, np.str_, ...
                self.error(node, str(why))
            return self.cast_call(t, node)
        if obj in _BUILTINS:
            return _BUILTINS[obj](self, node)
        if getattr(obj, "__module__", None) in ("math",) or obj in _MATH_FUNCS:
            return self.call_math(obj, node)
        if obj in _CMATH_FUNCS:
            return self.call_cmath(obj, node)
        if obj in _OPERATORS:
            return self.call_operator(obj, node)
        if isinstance(obj, np.ufunc) and getattr(np, obj.__name__, None) is obj:
            return self.call_numpy(obj, node)
        name = getattr(obj, "__name__", repr(obj))
        if obj is np.dtype:   # np.dtype("int16"): a dtype, at compile time
            vals, _ = self.args_of(node, 1, 1, "np.dtype")
            if not vals[0].is_const:
                self.error(node, "np.dtype() in a kernel takes a constant (a dtype name or type)")
            return Val(None, CT, const=np.dtype(vals[0].const))
        if np.__dict__.get(name) is obj:
            self.numpy_unsupported(name, node)
        module = getattr(obj, "__module__", None) or ""
        if module.startswith("numpy.") and callable(obj):   # np.linalg.norm, np.random.rand, ...
            for a in node.args:
                self.expr(a)
            self.error(node, f"{module.replace('numpy', 'np', 1)}.{name} is not supported in kernels")
        for a in node.args:   # an unsupported construct in the arguments is the first error
            self.expr(a)
        if getattr(builtins, name, None) is obj:
            self.error(node, f"the built-in {name}() is not supported in kernels")
        if callable(obj):
            self.error(node, f"'{name}' is a Python function, not a device function: decorate it with "
                             "@tessel.jit(device=True) to call it from a kernel")
        self.error(node, f"{obj!r} is not callable in a kernel")

    def unpack_starred(self, node):
        """f(a, *t): the call with t's items as arguments (t a tuple, its length known when compiling)."""
        args = []
        for a in node.args:
            if not isinstance(a, ast.Starred):
                args.append(a)
                continue
            v = self.expr(a.value)
            if v.items is None:
                self.error(a, f"*args of a {v.type} is not supported in kernels (*args takes a tuple)")
            args.extend(ast.copy_location(_ValNode(item), a) for item in v.items)
        return ast.copy_location(ast.Call(func=node.func, args=args, keywords=node.keywords), node)

    def expr__ValNode(self, node):
        return node.val

    def call_operator(self, fn, node) -> Val:
        """operator.add(a, b), operator.lt(a, b), operator.neg(a), ...: the operator's expression."""
        kind, op = _OPERATORS[fn]
        n = 1 if kind == "unary" else 2
        if node.keywords or len(node.args) != n or any(isinstance(a, ast.Starred) for a in node.args):
            self.error(node, f"operator.{fn.__name__}() takes {n} positional argument{'s' if n > 1 else ''}")
        a = node.args
        if kind == "binary":
            expr = ast.BinOp(left=a[0], op=op(), right=a[1])
        elif kind == "compare":
            expr = ast.Compare(left=a[0], ops=[op()], comparators=[a[1]])
        else:
            expr = ast.UnaryOp(op=op(), operand=a[0])
        return self.expr(ast.copy_location(expr, node))

    def args_of(self, node, n_min, n_max, name):
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.error(node, f"{name}(): *args are not supported")
        vals = [self.expr(a) for a in node.args]
        kw = {k.arg: self.expr(k.value) for k in node.keywords}
        if not n_min <= len(vals) <= n_max and not kw:
            self.error(node, f"{name}() takes {n_min if n_min == n_max else f'{n_min} to {n_max}'} arguments, "
                             f"got {len(vals)}")
        return vals, kw

    def tuple_cast(self, obj, node) -> Val:
        """A tuple type called on a tuple (UniTuple(float32, 2)(t)): each item cast to its type."""
        vals, _ = self.args_of(node, 1, 1, str(obj))
        return self.cast_tuple_value(vals[0], obj, node)

    def cast_tuple_value(self, v: Val, obj, node) -> Val:
        types = obj._ts_tuple_types
        if v.items is None or len(v.items) != len(types):
            self.error(node, f"{obj} casts a tuple of {len(types)} items, got {v.type}")
        items = []
        for it, t in zip(v.items, types):
            if getattr(t, "_ts_tuple_types", None) is not None:
                items.append(self.cast_tuple_value(it, t, node))
            else:
                items.append(self.cast_value(it, _dtype_scalar(t), node))
        return Val(None, TupleT(tuple(i.type for i in items)), items=items)

    def cast_call(self, t: Scalar, node) -> Val:
        vals, _ = self.args_of(node, 0, 1, t.name)
        if not vals:
            return Val(_literal_code(0, t), t, True, const=0)
        return self.cast_value(vals[0], t, node)

    def cast_value(self, v: Val, t: Scalar, node) -> Val:
        if not isinstance(v.type, Scalar):
            self.error(node, f"{t.name}() of {v.type}")
        if v.type.kind == "c" and t.kind != "c":
            self.error(node, f"cannot cast complex to {t.name}; take .real or abs() first")
        if v.is_const and v.type.weak:
            return Val(self.convert(v, t, node) if not (t.kind in "iu" and isinstance(v.const, float))
                       else f"ts::cast<{t.ctype}>({v.code})", t, v.nonneg)
        return Val(self.convert(v, t, node) if v.type.strong() == t else f"ts::cast<{t.ctype}>({v.code})", t,
                   v.nonneg and t.kind != "f")

    def bind_keywords(self, dfn, inner, vals, node) -> List[Val]:
        """The positional arguments of a device function call with keyword arguments: each
        parameter up to the last one named gets its keyword's value, or its default value."""
        if inner:
            args = dfn.fdef.args
            names = [a.arg for a in args.args]
            first_default = len(names) - len(args.defaults)
            default = lambda j: dfn.outer.expr(args.defaults[j - first_default]) if j >= first_default else None  # noqa: E731
        else:
            params = list(inspect.signature(dfn.py_func).parameters.values())
            names = [p_.name for p_ in params]
            default = lambda j: None if params[j].default is inspect.Parameter.empty else \
                self.const_val(params[j].default, node, names[j])  # noqa: E731
        kw = {}
        for k in node.keywords:
            if k.arg is None:
                self.error(node, f"**kwargs in a call of device function '{dfn.__name__}' is not supported")
            if k.arg not in names:
                self.error(node, f"device function '{dfn.__name__}' has no parameter '{k.arg}'")
            if names.index(k.arg) < len(vals) or k.arg in kw:
                self.error(node, f"device function '{dfn.__name__}' got multiple values for parameter '{k.arg}'")
            kw[k.arg] = self.expr(k.value)
        vals = list(vals)
        last = max(names.index(k) for k in kw)
        for j in range(len(vals), last + 1):
            v = kw[names[j]] if names[j] in kw else default(j)
            if v is None:
                self.error(node, f"device function '{dfn.__name__}' is missing its argument '{names[j]}'")
            vals.append(v)
        return vals

    def call_device_function(self, dfn, node) -> Val:
        vals = [self.expr(a) for a in node.args]
        inner = dfn if isinstance(dfn, _InnerFunction) else None
        if node.keywords:
            vals = self.bind_keywords(dfn, inner, vals, node)
        if any(s is (dfn.fdef if inner else dfn) for s in self.root.inline_stack):
            self.error(node, f"device function '{dfn.__name__}' calls itself: recursion is not supported")
        types = [v.type.strong() if isinstance(v.type, Scalar) else v.type for v in vals]
        fn = dfn.outer.pyfunc if inner else dfn.select(types)
        prefix = self.root.fresh(f"i") + "_" if not self.typing else "i0_"
        sub = FunctionCompiler(fn, types, self.root, kernel_name=self.kernel_name, mode="inline", prefix=prefix,
                               display_name=dfn.__name__, numbers=dfn.outer.numbers if inner else dfn.numbers,
                               inner=inner)
        try:
            self.root.inline_stack.append(dfn.fdef if inner else dfn)
            sub.check_arity(None)
            sub.run_typing(vals)
            rts = [r for r in sub.return_types]
            rt = self.unify_returns(rts, sub, node)
            sub.return_type = rt
            if sub.suspends:
                self.suspends = True
            if self.typing:
                return self.result_placeholder(rt)
            sub.ret_label = self.root.fresh("ts_ret")
            sub.ret_var = f"{prefix}ret"
            self.flush_pre()
            sub._pass(typing=False, arg_vals=vals)
            for name, info in sub.vars.items():
                if info.cname and info.type is not None and not isinstance(info.type, TupleT) and info.type is not CT:
                    self.root.decls[info.cname] = info.type.ctype
            self.declare_ret(sub.ret_var, rt)
            self.lines.append("  " * self.indent + "{")
            for ln in sub.lines:
                self.lines.append("  " * self.indent + ln)
            self.lines.append("  " * self.indent + "}")
            self.lines.append("  " * self.indent + f"{sub.ret_label}: ;")
            return self.ret_value(sub.ret_var, rt)
        finally:
            self.root.inline_stack.pop()

    def unify_returns(self, rts, sub, node):
        real = [r for r in rts if not isinstance(r, NoneT)]
        if not real:
            return NoneT()
        if len(real) != len(rts):
            sub.error(sub.fdef, "some paths return a value and others do not")
        return self.unify_types(real, lambda why: sub.error(sub.fdef, f"returns {why}"))

    def unify_types(self, real, fail):
        """The one type of the values `real` (a device function's returns, a conditional
        expression's branches): numbers promote, tuples unify item by item, nested tuples too.
        fail(why) reports types that do not."""
        if all(isinstance(r, Scalar) for r in real):
            return promote(*real).strong()
        if all(isinstance(r, TupleT) for r in real):
            n = len(real[0].items)
            if any(len(r.items) != n for r in real):
                fail("tuples of different lengths")
            return TupleT(tuple(self.unify_types([r.items[k] for r in real], fail) for k in range(n)))
        if all(r == real[0] for r in real) and not (isinstance(real[0], ArrayT) and real[0].is_static):
            return real[0]
        fail(f"values of types that do not unify: {', '.join(map(str, real))}")

    def result_placeholder(self, rt):
        if isinstance(rt, NoneT):
            return Val(None, NoneT(), const=None)
        if isinstance(rt, TupleT):
            return Val(None, rt, items=[self.result_placeholder(t) for t in rt.items])
        return Val("0", rt)

    def declare_ret(self, name, rt):
        if isinstance(rt, TupleT):
            for k, t in enumerate(rt.items):
                self.declare_ret(f"{name}__{k}", t)
        elif not isinstance(rt, NoneT):
            self.root.decls[name] = rt.ctype

    def ret_value(self, name, rt):
        if isinstance(rt, NoneT):
            return Val(None, NoneT(), const=None)
        if isinstance(rt, TupleT):
            return Val(None, rt, items=[self.ret_value(f"{name}__{k}", t) for k, t in enumerate(rt.items)])
        return Val(name, rt)

    # ---- intrinsics -------------------------------------------------------------------------------
    def call_intrinsic(self, name, node) -> Val:
        if name.startswith("fp16."):
            return self.call_table(_libdevice.FP16, "cuda.fp16", name[5:], node)
        if name.startswith("libdevice."):
            return self.call_table(_libdevice.LIBDEVICE, "libdevice", name[10:], node)
        method = getattr(self, "intr_" + name.replace(".", "_"), None)
        if method is None:
            self.error(node, f"intrinsic {name}() cannot be called here")
        return method(node)

    def call_table(self, table, prefix, fname, node) -> Val:
        """A function of Numba's cuda.fp16 or libdevice: the arguments converted to its argument
        types, then its code (see _libdevice)."""
        entry = table.get(fname)
        if entry is None:
            self.error(node, f"{prefix}.{fname} is not supported")
        ret, args, code = entry
        what = f"{prefix}.{fname}"
        if node.keywords:
            self.error(node, f"{what}() takes positional arguments")
        vals, _ = self.args_of(node, len(args), len(args), what)
        if len(vals) != len(args):
            self.error(node, f"{what}() takes {len(args)} argument{'s' if len(args) != 1 else ''}, got {len(vals)}")
        conv = []
        for k, (v, t) in enumerate(zip(vals, args)):
            if not isinstance(v.type, Scalar) or v.type.kind == "c":
                self.error(node, f"{what}(): argument {k} must be a real number ({t}), got {v.type}")
            conv.append(self.convert(v, Scalar(t), node))
        return self.table_results(ret, args, code, conv)

    def table_results(self, ret, args, code, conv) -> Val:
        """The value of a table function's code (see _libdevice) on the converted arguments."""
        if isinstance(code, dict):
            code = code["cuda" if self.root.target == "cuda" else "cpu"]
        if not isinstance(ret, tuple):
            return Val(code.format(*conv), Scalar(ret))
        # several results: the arguments in temporaries, the results in temporaries the code sets
        names = []
        for c, t in zip(conv, args):
            tmp = self.declare_temp(Scalar(t), "la")
            self.emit_pre(f"{tmp} = {c};")
            names.append(tmp)
        results = {f"r{k}": self.declare_temp(Scalar(t), "lr") for k, t in enumerate(ret)}
        self.emit_pre(code.format(*names, **results))
        items = [Val(results[f"r{k}"], Scalar(t)) for k, t in enumerate(ret)]
        return Val(None, TupleT(tuple(Scalar(t) for t in ret)), items=items)

    def _axis_count(self, node, name):
        vals, _ = self.args_of(node, 1, 1, name)
        n = vals[0]
        if not n.is_const or n.const not in (1, 2, 3):
            self.error(node, f"{name}(ndim): ndim must be the constant 1, 2 or 3")
        return int(n.const)

    def intr_grid(self, node):
        n = self._axis_count(node, "grid")
        items = []
        for ax in "xyz"[:n]:
            b, d, t = self.dim3(f"blockIdx.{ax}"), self.dim3(f"blockDim.{ax}"), self.dim3(f"threadIdx.{ax}")
            items.append(Val(f"({b.code} * {d.code} + {t.code})", INT64, True))
        return items[0] if n == 1 else Val(None, TupleT(tuple(INT64 for _ in items)), items=items)

    def intr_gridsize(self, node):
        n = self._axis_count(node, "gridsize")
        items = []
        for ax in "xyz"[:n]:
            d, g = self.dim3(f"blockDim.{ax}"), self.dim3(f"gridDim.{ax}")
            items.append(Val(f"({d.code} * {g.code})", INT64, True, gstride=True))
        return items[0] if n == 1 else Val(None, TupleT(tuple(INT64 for _ in items)), items=items)

    def _shape_dtype(self, node, name):
        vals, kw = self.args_of(node, 0, 2, name)
        shape = kw.get("shape", vals[0] if vals else None)
        dtype = kw.get("dtype", vals[1] if len(vals) > 1 else None)
        if shape is None or dtype is None:
            self.error(node, f"{name}(shape, dtype) needs both arguments")
        if shape.items is not None:
            dims = []
            for it in shape.items:
                if not it.is_const or not isinstance(it.const, (int, np.integer)):
                    self.error(node, f"{name}: the shape must be made of compile-time integer constants")
                dims.append(int(it.const))
        elif shape.is_const and isinstance(shape.const, (int, np.integer)):
            dims = [int(shape.const)]
        else:
            self.error(node, f"{name}: the shape must be a compile-time constant (a literal, a global or a "
                             f"closure variable), got {shape.type}")
        if not dtype.is_const:
            self.error(node, f"{name}: dtype must be a compile-time dtype")
        d = dtype.const
        rec = _structured_dtype(d)
        if rec is not None:
            t = _static_record_type(rec, node, self, name)
        else:
            try:
                t = d.scalar if isinstance(d, _DTypeMarker) else _dtype_scalar(d)
            except TypeError as why:   # 'int33', np.str_, ...
                self.error(node, f"{name}: {why}")
        if any(x < 0 for x in dims):
            self.error(node, f"{name}: negative dimension in shape {tuple(dims)}")
        return tuple(dims), t

    def intr_shared_array(self, node):
        shape, t = self._shape_dtype(node, "shared.array")
        key = ("shared", id(node), self.prefix)
        if shape == (0,) or (len(shape) == 1 and shape[0] == 0):
            self.root.uses_dynamic_shared = True
            ptr = f"(({t.ctype}*)ts_dyn_shared())"
            return Val(ptr, ArrayT(t, 1, "C", "shared", (0,)))
        if 0 in shape:
            self.error(node, "shared.array: only a 1-d shape of 0 asks for the dynamic shared array")
        count = int(np.prod(shape))
        ctype = t.ctype
        if isinstance(t, RecordT):
            ctype, count = "unsigned char", count * t.itemsize   # the records' bytes
        if key not in self.root.shared_keys:
            cname = self.root.fresh("ts_shared")
            self.root.shared.append((cname, ctype, count, 1 if isinstance(t, RecordT) else t.itemsize))
            self.root.shared_keys[key] = cname
        cname = self.root.shared_keys[key]
        code = cname if self.root.target == "cuda" else f"(({ctype}*)(B.shared + {cname}_off))"
        return Val(code, ArrayT(t, len(shape), "C", "shared", shape))

    def intr_local_array(self, node):
        shape, t = self._shape_dtype(node, "local.array")
        if 0 in shape:
            self.error(node, "local.array: the shape must be positive")
        count = int(np.prod(shape))
        key = ("local", id(node), self.prefix)
        if key not in self.root.shared_keys:
            self.root.shared_keys[key] = self.root.fresh(f"{self.prefix}ts_local")
        cname = self.root.shared_keys[key]
        if isinstance(t, RecordT):
            self.root.decls[cname] = ("alignas(16) unsigned char", count * t.itemsize)   # the records' bytes
        else:
            self.root.decls[cname] = (t.ctype, count)
        self.root.local_bytes[cname] = count * t.itemsize
        return Val(cname, ArrayT(t, len(shape), "C", "local", shape))

    def intr_const_array_like(self, node):
        vals, _ = self.args_of(node, 1, 1, "const.array_like")
        v = vals[0]
        if isinstance(v.type, ArrayT) and v.type.space == "const":
            return v
        self.error(node, "const.array_like() takes a global or closure NumPy array")

    def _sync(self, kind, node, level, pred: Optional[Val] = None, rtype=None, extra=None):
        """A warp or block exchange. CUDA: the intrinsic itself. CPU: a site where the thread stops."""
        self.suspends = True
        if self.root.target == "cuda":
            return None
        if self.typing:
            return Val("0", rtype) if rtype is not None else Val(None, NoneT(), const=None)
        site = Site(len(self.root.sites) + 1, kind, level, pred.type if pred is not None else None, rtype,
                    extra, self.lineno(node))
        self.root.sites.append(site)
        k = site.id
        if pred is not None:
            self.root.decls[f"ts_xa{k}"] = (pred.type.ctype if isinstance(pred.type, Scalar) else "ts::i64")
            self.emit_pre(f"S.ts_xa{k} = {pred.code};")
        if extra is not None and isinstance(extra, dict):
            for slot, val in extra.items():
                self.root.decls[f"ts_x{slot}{k}"] = "ts::i64"
                self.emit_pre(f"S.ts_x{slot}{k} = (ts::i64)({val});")
        if rtype is not None:
            self.root.decls[f"ts_xr{k}"] = rtype.ctype
        status = {"warp": "TS_WAIT_WARP", "block": "TS_WAIT_BLOCK", "grid": "TS_WAIT_GRID"}[level]
        self.emit_pre(f"S.pc = {k}; S.status = {status}; return; ts_resume_{k}: ;")
        if rtype is None:
            return Val(None, NoneT(), const=None)
        return Val(f"S.ts_xr{k}", rtype)

    def intr_syncthreads(self, node):
        self.args_of(node, 0, 0, "syncthreads")
        r = self._sync("syncthreads", node, "block")
        if r is None:
            return Val("__syncthreads()", NoneT())
        return r

    def _sync_pred(self, node, name, op):
        vals, _ = self.args_of(node, 1, 1, name)
        p = vals[0]
        pv = Val(f"(ts::i64){self.truth(p, node)}", INT64)
        r = self._sync(name, node, "block", pv, INT32 if op == "count" else INT32)
        if r is None:
            fn = {"count": "__syncthreads_count", "and": "__syncthreads_and", "or": "__syncthreads_or"}[op]
            return Val(f"((ts::i32){fn}({self.truth(p, node)}))", INT32, op == "count")
        return r

    def intr_syncthreads_count(self, node):
        return self._sync_pred(node, "syncthreads_count", "count")

    def intr_syncthreads_and(self, node):
        return self._sync_pred(node, "syncthreads_and", "and")

    def intr_syncthreads_or(self, node):
        return self._sync_pred(node, "syncthreads_or", "or")

    def intr_syncwarp(self, node):
        vals, _ = self.args_of(node, 0, 1, "syncwarp")
        mask = self.convert(vals[0], UINT32, node) if vals else "0xffffffffu"
        r = self._sync("syncwarp", node, "warp")
        if r is None:
            return Val(f"__syncwarp({mask})", NoneT())
        return r

    def _fence(self, node, cuda_fn):
        self.args_of(node, 0, 0, cuda_fn)
        if self.root.target == "cuda":
            return Val(f"{cuda_fn}()", NoneT())
        return Val("__atomic_thread_fence(__ATOMIC_SEQ_CST)", NoneT())

    def intr_threadfence(self, node):
        return self._fence(node, "__threadfence")

    def intr_threadfence_block(self, node):
        return self._fence(node, "__threadfence_block")

    def intr_threadfence_system(self, node):
        return self._fence(node, "__threadfence_system")

    # atomics
    def _atomic_target(self, node, name, nvals):
        vals, _ = self.args_of(node, 2 + nvals, 2 + nvals, f"atomic.{name}")
        arr, idx = vals[0], vals[1]
        if not isinstance(arr.type, ArrayT):
            self.error(node, f"atomic.{name}: the first argument must be an array, got {arr.type}")
        if arr.type.space == "const":
            self.error(node, f"atomic.{name}: cannot modify a constant array")
        elem = self.element(arr, node.args[1], node)
        if isinstance(elem.type, ArrayT):
            self.error(node, f"atomic.{name}: the index must select one element of a {arr.type.ndim}-d array")
        return arr.type.dtype, elem, vals[2:]

    def _atomic(self, node, name, fn, allowed):
        t, elem, rest = self._atomic_target(node, name, 1)
        if t.name not in allowed:
            self.error(node, f"atomic.{name} is not supported for {t.name} arrays "
                             f"(supported: {', '.join(sorted(allowed))})")
        val = self.convert(rest[0], t, node) if can_store(rest[0].type, t) or rest[0].type.weak else None
        if val is None:
            self.error(node, f"atomic.{name}: cannot store a {rest[0].type.name} value into a {t.name} array")
        return Val(f"ts::{fn}(&{elem.code}, {val})", t)

    def intr_atomic_add(self, node):
        return self._atomic(node, "add", "atomic_add", _ATOMIC_ARITH)

    def intr_atomic_sub(self, node):
        return self._atomic(node, "sub", "atomic_sub", _ATOMIC_ARITH)

    def intr_atomic_min(self, node):
        return self._atomic(node, "min", "atomic_min", _ATOMIC_ARITH)

    def intr_atomic_max(self, node):
        return self._atomic(node, "max", "atomic_max", _ATOMIC_ARITH)

    def intr_atomic_nanmin(self, node):
        return self._atomic(node, "nanmin", "atomic_nanmin", _ATOMIC_ARITH)

    def intr_atomic_nanmax(self, node):
        return self._atomic(node, "nanmax", "atomic_nanmax", _ATOMIC_ARITH)

    def intr_atomic_exch(self, node):
        return self._atomic(node, "exch", "atomic_exch", _ATOMIC_ARITH)

    def intr_atomic_and(self, node):
        return self._atomic(node, "and_", "atomic_and", _ATOMIC_INT)

    def intr_atomic_or(self, node):
        return self._atomic(node, "or_", "atomic_or", _ATOMIC_INT)

    def intr_atomic_xor(self, node):
        return self._atomic(node, "xor", "atomic_xor", _ATOMIC_INT)

    def intr_atomic_inc(self, node):
        return self._atomic(node, "inc", "atomic_inc", {"uint32", "uint64"})

    def intr_atomic_dec(self, node):
        return self._atomic(node, "dec", "atomic_dec", {"uint32", "uint64"})

    def intr_atomic_cas(self, node):
        t, elem, rest = self._atomic_target(node, "cas", 2)
        if t.name not in _ATOMIC_CAS:
            self.error(node, f"atomic.cas is not supported for {t.name} arrays")
        return Val(f"ts::atomic_cas(&{elem.code}, {self.convert(rest[0], t, node)}, {self.convert(rest[1], t, node)})", t)

    def intr_atomic_compare_and_swap(self, node):
        vals, _ = self.args_of(node, 3, 3, "atomic.compare_and_swap")
        arr = vals[0]
        if not isinstance(arr.type, ArrayT) or arr.type.ndim != 1:
            self.error(node, "atomic.compare_and_swap(ary, old, val) takes a 1-d array")
        t = arr.type.dtype
        if t.name not in _ATOMIC_CAS:
            self.error(node, f"atomic.compare_and_swap is not supported for {t.name} arrays")
        elem = f"{self.data_ptr(arr)}[0]"
        return Val(f"ts::atomic_cas(&{elem}, {self.convert(vals[1], t, node)}, {self.convert(vals[2], t, node)})", t)

    # warp intrinsics
    def _shfl(self, node, name, cuda_fn):
        vals, _ = self.args_of(node, 3, 3, name)
        mask, value, lane = vals
        t = value.type
        if not isinstance(t, Scalar) or t.kind == "c" or t.name in ("float16", "bfloat16"):
            self.error(node, f"{name}: the value must be a bool, integer, float32 or float64, got {t}")
        t = t.strong()
        if not is_intlike(lane.type):
            self.error(node, f"{name}: the lane/delta/mask must be an integer")
        if self.root.target == "cuda":
            v = value.code
            if t.kind == "b":
                return Val(f"((bool){cuda_fn}({self.convert(mask, UINT32, node)}, (int){v}, "
                           f"(int)({lane.code})))", BOOL)
            ct = t.ctype if t.itemsize >= 4 else "int"
            return Val(f"(({t.ctype}){cuda_fn}({self.convert(mask, UINT32, node)}, ({ct}){v}, "
                       f"(int)({lane.code})))", t)
        return self._sync(name, node, "warp", Val(value.code, t), t,
                          {"l": lane.code, "m": self.convert(mask, UINT32, node)})

    def intr_shfl_sync(self, node):
        return self._shfl(node, "shfl_sync", "__shfl_sync")

    def intr_shfl_up_sync(self, node):
        return self._shfl(node, "shfl_up_sync", "__shfl_up_sync")

    def intr_shfl_down_sync(self, node):
        return self._shfl(node, "shfl_down_sync", "__shfl_down_sync")

    def intr_shfl_xor_sync(self, node):
        return self._shfl(node, "shfl_xor_sync", "__shfl_xor_sync")

    def _vote(self, node, name, cuda_fn, rtype):
        vals, _ = self.args_of(node, 2, 2, name)
        mask, pred = vals
        if self.root.target == "cuda":
            code = f"{cuda_fn}({self.convert(mask, UINT32, node)}, {self.truth(pred, node)})"
            return Val(f"(({rtype.ctype}){code})", rtype)
        if name == "eq_sync":
            pv = Val(f"(ts::i64){self.truth(pred, node)}", INT64)
        else:
            pv = Val(f"(ts::i64){self.truth(pred, node)}", INT64)
        return self._sync(name, node, "warp", pv, rtype, {"m": self.convert(mask, UINT32, node)})

    def _match(self, node, name):
        """match_any_sync(mask, value): the lanes of mask whose value equals this lane's;
        match_all_sync(mask, value): (mask, True) when every lane of mask has the same value, else
        (0, False)."""
        vals, _ = self.args_of(node, 2, 2, name)
        mask, value = vals
        t = value.type
        if not isinstance(t, Scalar) or t.kind not in "iuf" or t.name in ("float16", "bfloat16"):
            self.error(node, f"{name}: the value must be an integer, float32 or float64, got {t}")
        t = t.strong()
        if t.kind in "iu" and t.itemsize < 4:
            t = INT32
        v = self.convert(value, t, node)
        m = self.convert(mask, UINT32, node)
        if self.root.target == "cuda":
            ct = {"int32": "int", "uint32": "unsigned", "int64": "long long", "uint64": "unsigned long long",
                  "float32": "float", "float64": "double"}[t.name]
            if name == "match_any_sync":
                return Val(f"((ts::u32)__match_any_sync({m}, ({ct})({v})))", UINT32)
            r = self.declare_temp(UINT32, "mr")
            p = self.declare_temp(INT32, "mp")
            self.emit_pre(f"{r} = (ts::u32)__match_all_sync({m}, ({ct})({v}), &{p});")
            return Val(None, TupleT((UINT32, BOOL)), items=[Val(r, UINT32), Val(f"({p} != 0)", BOOL)])
        bits = {"float32": f"(ts::u64)ts::bitcast<ts::u32>({v})", "float64": f"ts::bitcast<ts::u64>({v})"}.get(
            t.name, f"(ts::u64)(ts::i64)({v})")
        r = self._sync(name, node, "warp", Val(bits, UINT64), UINT32, {"m": m})
        if name == "match_any_sync":
            return r
        return Val(None, TupleT((UINT32, BOOL)), items=[r, Val(f"({r.code} != 0u)", BOOL)])

    def intr_nanosleep(self, node):
        vals, _ = self.args_of(node, 1, 1, "nanosleep")
        if not is_intlike(vals[0].type):
            self.error(node, f"nanosleep takes an integer number of nanoseconds, got {vals[0].type}")
        if self.root.target == "cuda":
            return Val(f"__nanosleep((unsigned)({vals[0].code}))", NoneT())
        return Val(f"(void)({vals[0].code})", NoneT())   # the CPU backend's threads do not spin

    def intr_match_any_sync(self, node):
        return self._match(node, "match_any_sync")

    def intr_match_all_sync(self, node):
        return self._match(node, "match_all_sync")

    def intr_ballot_sync(self, node):
        return self._vote(node, "ballot_sync", "__ballot_sync", UINT32)

    def intr_any_sync(self, node):
        return self._vote(node, "any_sync", "__any_sync", INT32)

    def intr_all_sync(self, node):
        return self._vote(node, "all_sync", "__all_sync", INT32)

    def intr_eq_sync(self, node):
        if self.root.target == "cuda":
            vals, _ = self.args_of(node, 2, 2, "eq_sync")
            mask, pred = vals
            return Val(f"((ts::i32)(__match_any_sync({self.convert(mask, UINT32, node)}, "
                       f"(int){self.truth(pred, node)}) == {self.convert(mask, UINT32, node)}))", INT32)
        return self._vote(node, "eq_sync", None, INT32)

    def intr_activemask(self, node):
        self.args_of(node, 0, 0, "activemask")
        if self.root.target == "cuda":
            return Val("((ts::u32)__activemask())", UINT32)
        return self._sync("activemask", node, "warp", None, UINT32)

    def intr_lanemask_lt(self, node):
        self.args_of(node, 0, 0, "lanemask_lt")
        lane = self.lane_or_warp("laneid").code
        return Val(f"((ts::u32)((1ull << {lane}) - 1))", UINT32)

    def _bits(self, node, name):
        vals, _ = self.args_of(node, 1, 1, name)
        v = vals[0]
        if not is_int(v.type):
            self.error(node, f"{name} takes an integer, got {v.type}")
        wide = v.type.itemsize == 8  # a Python int is int64 here, as in Numba (clz(1) is 63)
        ut = "ts::u64" if wide else "ts::u32"
        return v, ut, wide

    def intr_popc(self, node):
        v, ut, _ = self._bits(node, "popc")
        return Val(f"((ts::i32)ts::popc(({ut})({v.code})))", INT32, True)

    def intr_clz(self, node):
        v, ut, _ = self._bits(node, "clz")
        return Val(f"((ts::i32)ts::clz(({ut})({v.code})))", INT32, True)

    def intr_ffs(self, node):
        v, ut, _ = self._bits(node, "ffs")
        return Val(f"((ts::i32)ts::ffs(({ut})({v.code})))", INT32, True)

    def intr_brev(self, node):
        v, ut, wide = self._bits(node, "brev")
        return Val(f"ts::brev(({ut})({v.code}))", UINT64 if wide else UINT32)

    def intr_fma(self, node):
        vals, _ = self.args_of(node, 3, 3, "fma")
        t = float_type_of(promote(*[v.type for v in vals]))
        if t.kind != "f":
            self.error(node, "fma takes real numbers")
        ft = t if t.name in ("float32", "float64") else FLOAT32
        return Val(self.round_half(f"ts::fma({', '.join(self.convert(v, ft, node) for v in vals)})", t), t)

    def intr_cbrt(self, node):
        vals, _ = self.args_of(node, 1, 1, "cbrt")
        t = float_type_of(vals[0].type)
        ft = t if t.name in ("float32", "float64") else FLOAT32
        return Val(self.round_half(f"ts::cbrt({self.convert(vals[0], ft, node)})", t), t)

    def intr_selp(self, node):
        vals, _ = self.args_of(node, 3, 3, "selp")
        p, a, b = vals
        t = promote(a.type, b.type)
        return Val(f"({self.truth(p, node)} ? {self.convert(a, t, node)} : {self.convert(b, t, node)})", t)

    # block and warp collectives
    def _collective(self, node, name, level, kind):
        vals, kw = self.args_of(node, 1, 2, name)
        value = vals[0]
        op = kw.get("op", vals[1] if len(vals) > 1 else None)
        t = value.type
        if not isinstance(t, Scalar):
            self.error(node, f"{name}: the value must be a number, got {t}")
        t = t.strong()
        if op is None:
            opname = "sum"
        elif op.is_const and isinstance(op.const, str):
            opname = op.const
            if opname not in ("sum", "min", "max"):
                self.error(node, f"{name}: op must be 'sum', 'min', 'max' or a device function, got {opname!r}")
        elif op.is_const:
            from . import _dispatch
            if not isinstance(op.const, _dispatch.DeviceFunction):
                self.error(node, f"{name}: op must be 'sum', 'min', 'max' or a device function")
            opname = self.operator_function(op.const, t, node)
        else:
            self.error(node, f"{name}: op must be a compile-time constant")
        if t.kind == "b" and opname == "sum":
            t = INT64
        if self.root.target == "cuda":
            self.suspends = True
            fn = {"reduce": "reduce", "inclusive_scan": "inclusive_scan", "exclusive_scan": "exclusive_scan"}[kind]
            opc = {"sum": "ts::OpSum", "min": "ts::OpMin", "max": "ts::OpMax"}.get(opname, opname)
            return Val(f"ts::{level}_{fn}<{t.ctype}, {opc}>({self.convert(value, t, node)})", t)
        return self._sync(f"{level}_{kind}", node, level, Val(self.convert(value, t, node), t), t, None) \
            if self.typing else self._collective_site(node, level, kind, value, t, opname)

    def _collective_site(self, node, level, kind, value, t, opname):
        r = self._sync(f"{level}_{kind}", node, level, Val(self.convert(value, t, node), t), t, None)
        self.root.sites[-1].op = opname
        return r

    def operator_function(self, dfn, t: Scalar, node) -> str:
        """A device function as a standalone C++ functor type (for reductions and scans)."""
        key = (id(dfn), t.name)
        if key in self.root.function_keys:
            return self.root.function_keys[key]
        fn = dfn.select([t, t])
        sub = FunctionCompiler(fn, [t, t], self.root, kernel_name=self.kernel_name, mode="function",
                               prefix="", display_name=dfn.__name__, numbers=dfn.numbers)
        sub.run_typing()
        rt = self.unify_returns(sub.return_types, sub, node)
        if not isinstance(rt, Scalar):
            self.error(node, f"the operator '{dfn.__name__}' must return a number")
        sub.return_type = t
        if sub.suspends:
            self.error(node, f"the operator '{dfn.__name__}' cannot use barriers or warp intrinsics")
        saved_decls = self.root.decls
        self.root.decls = {}
        sub._pass(typing=False)
        decls = self.root.decls
        self.root.decls = saved_decls
        name = self.root.fresh("TsOp")
        qual = "__device__ __host__" if self.root.target == "cuda" else ""
        params = ", ".join(f"{t.ctype} {sub.vars[p].cname}" for p in sub.params)
        body = [f"struct {name} {{", f"  {qual} {t.ctype} operator()({params}) const {{"]
        for cname, ctype in decls.items():
            if cname in [sub.vars[p].cname for p in sub.params]:
                continue
            body.append("    " + _decl(cname, ctype))
        for name_, info in sub.vars.items():
            if name_ not in sub.params and info.cname and isinstance(info.type, (Scalar, ArrayT, RecordT)):
                body.append("    " + _decl(info.cname, info.type.ctype))
        body += ["  " + ln for ln in sub.lines]
        body += ["  }", "};"]
        self.root.functions.append("\n".join(body))
        self.root.function_keys[key] = name
        return name

    def intr_block_reduce(self, node):
        return self._collective(node, "block_reduce", "block", "reduce")

    def intr_block_inclusive_scan(self, node):
        return self._collective(node, "block_inclusive_scan", "block", "inclusive_scan")

    def intr_block_exclusive_scan(self, node):
        return self._collective(node, "block_exclusive_scan", "block", "exclusive_scan")

    def intr_warp_reduce(self, node):
        return self._collective(node, "warp_reduce", "warp", "reduce")

    def intr_warp_inclusive_scan(self, node):
        return self._collective(node, "warp_inclusive_scan", "warp", "inclusive_scan")

    def intr_warp_exclusive_scan(self, node):
        return self._collective(node, "warp_exclusive_scan", "warp", "exclusive_scan")

    def intr_cg_this_grid(self, node):
        self.args_of(node, 0, 0, "cg.this_grid")
        return Val(None, CT, const=_GridGroup())

    def grid_sync(self, node):
        """cg.this_grid().sync(): CUDA, a barrier over a counter in global memory (the launch
        checks that every block is resident at once); CPU, a site every thread of the grid meets."""
        self.root.uses_grid_sync = True
        self.suspends = True
        if self.root.target == "cuda":
            return Val("ts::grid_sync(ts_grid_bar)", NoneT())
        return self._sync("grid_sync", node, "grid")

    # ---- math --------------------------------------------------------------------------------------
    def call_math(self, fn, node, vals=None) -> Val:
        name = getattr(fn, "__name__", str(fn))
        spec = _MATH.get(name)
        if spec is None:
            self.error(node, f"math.{name} is not supported in kernels")
        nargs, kind = spec
        if vals is None:
            vals, _ = self.args_of(node, nargs if isinstance(nargs, int) else nargs[0],
                                   nargs if isinstance(nargs, int) else nargs[1], f"math.{name}")
        for v in vals:
            if not isinstance(v.type, Scalar):
                self.error(node, f"math.{name} takes numbers, got {v.type}")
            if v.type.kind == "c":
                return self.call_cmath(getattr(cmath, name, fn), node, vals)
        t = float_type_of(promote(*[v.type for v in vals]).strong())
        if all(v.type.weak for v in vals):
            t = FLOAT64
        ft = t if t.name in ("float32", "float64") else FLOAT32
        args = [self.convert(v, ft, node) for v in vals]
        if kind == "f":
            cfn = {"fabs": "fabs", "gamma": "tgamma"}.get(name, name)
            if name == "log" and len(args) == 2:
                return Val(self.round_half(f"(ts::log({args[0]}) / ts::log({args[1]}))", t), t)
            return Val(self.round_half(f"ts::{cfn}({', '.join(args)})", t), t)
        if kind == "i":   # floor, ceil, trunc -> int64 (Python's int result)
            return Val(f"ts::cast<ts::i64>(ts::{name}({args[0]}))", INT64)
        if kind == "b":
            return Val(f"ts::{name}({args[0]})", BOOL)
        if kind == "deg":
            k = "57.29577951308232" if name == "degrees" else "0.017453292519943295"
            return Val(self.round_half(f"({args[0]} * ({ft.ctype}){k})", t), t)
        if kind == "ldexp":
            return Val(self.round_half(f"ts::ldexp({args[0]}, (int)({vals[1].code}))", t), t)
        if kind == "tuple":   # frexp, modf: libdevice's functions of the float type (as Numba's CUDA target)
            ret, types, code = _libdevice.LIBDEVICE[name + ("f" if ft == FLOAT32 else "")]
            return self.table_results(ret, types, code, args)
        self.error(node, f"math.{name} is not supported")

    # ---- NumPy ufuncs ------------------------------------------------------------------------------
    def call_numpy(self, uf, node) -> Val:
        """np.sin(x) on numbers; np.sin(x, out) on arrays (as Numba: the output array passed as the
        last positional argument, the call a statement): a loop over out's elements, the inputs
        broadcast against it."""
        name = uf.__name__
        if name not in _NUMPY_ALL:
            self.numpy_unsupported(name, node)
        nin = uf.nin
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.error(node, f"np.{name}(): *args are not supported")
        if node.keywords:
            self.error(node, f"np.{name}(): keyword arguments are not supported in kernels; pass the output "
                             "array as the last positional argument, as in Numba")
        vals = [self.expr(a) for a in node.args]
        if len(vals) not in (nin, nin + 1):
            self.error(node, f"np.{name}() takes {nin} input{'s' if nin > 1 else ''} and an optional output "
                             f"array, got {len(vals)} arguments")
        ins, out = vals[:nin], (vals[nin] if len(vals) > nin else None)
        for v in ins:
            if not isinstance(v.type, (Scalar, ArrayT)) or isinstance(v.type, ArrayT) and v.type.is_record:
                self.error(node, f"np.{name} takes numbers and arrays of numbers, got {v.type}")
        if out is None:
            if any(isinstance(v.type, ArrayT) for v in ins):
                self.error(node, f"np.{name} on arrays in a kernel needs the output array as its last positional "
                                 f"argument, as in Numba: np.{name}(x, out)")
            return self.numpy_scalar(name, ins, node)
        if not isinstance(out.type, ArrayT) or out.type.is_record:
            self.error(node, f"np.{name}: the output must be an array of numbers, got {out.type}")
        if out.type.space == "const":
            self.error(node, f"np.{name}: cannot write to a constant array")
        if node is not self.stmt_call:
            self.error(node, f"np.{name}(..., out) on arrays is a statement in kernels: its value cannot be used")
        self.each_element(out, ins, lambda args: self.numpy_scalar(name, args, node), node, f"np.{name}")
        return Val(None, NoneT())

    def each_element(self, out: Val, ins, compute, node, what):
        """out[...] = compute(items of ins) for every element of the array out: a loop over its
        elements, the array inputs broadcast against it (as NumPy's)."""
        ot = out.type
        for v in ins:
            if isinstance(v.type, ArrayT) and v.type.ndim > ot.ndim:
                self.error(node, f"{what}: a {v.type.ndim}-d input does not broadcast to a {ot.ndim}-d array")
        self.flush_pre()
        # NumPy's broadcast check: an input axis of another length than the target's (and not 1)
        # raises ValueError (in debug mode; else the thread stops, as after any raise)
        bad = []
        for v in ins:
            if isinstance(v.type, TupleT) and len(v.items) != 1:   # a 1-d array along the last axis
                bad.append(f"{len(v.items)} != {self.extent(out, ot.ndim - 1).code}")
            if isinstance(v.type, ArrayT):
                off = ot.ndim - v.type.ndim
                bad += [f"({self.extent(v, d).code} != 1 && {self.extent(v, d).code} != "
                        f"{self.extent(out, d + off).code})" for d in range(v.type.ndim)]
        if bad and self.mode != "function":
            self.emit(f"if ({' || '.join(bad)}) {{")
            self.indent += 1
            self.fail(ValueError, f"{what}: the input's shape does not broadcast to the target's", node)
            self.indent -= 1
            self.emit("}")
        k = self.declare_temp(INT64, "k")
        n = self.array_size(out).code
        source = next((v for v in ins if isinstance(v.type, ArrayT)), None)
        if source is None:
            self.emit(f"for ({k} = 0; {k} < {n}; ++{k}) {{")
        else:
            # memmove's order: when out starts after its input (a[1:] = a[:-1]), the last element
            # first, so that a view overlapping its input reads each element before it is written
            step = self.declare_temp(INT64, "k")
            backwards = (f"((const char*)({self.data_ptr(out)}) > "
                         f"(const char*)({self.data_ptr(source)}))")
            self.emit(f"for ({step} = 0; {step} < {n}; ++{step}) {{")
            self.emit(f"  {k} = {backwards} ? {n} - 1 - {step} : {step};")
        self.indent += 1
        idx = []
        for d in range(ot.ndim):
            i = self.declare_temp(INT64, "i")
            inner = [self.extent(out, e).code for e in range(d + 1, ot.ndim)]
            q = f"({k} / ({' * '.join(inner)}))" if inner else k
            self.emit(f"{i} = {q} % {self.extent(out, d).code};" if d else f"{i} = {q};")
            idx.append(i)

        def item(arr, indices, broadcast):
            terms = []
            for d, i in enumerate(indices):
                if broadcast:
                    i = f"({self.extent(arr, d).code} == 1 ? 0ll : {i})"
                terms.append(f"{i} * {self.stride_elems(arr, d)}")
            return Val(f"{self.data_ptr(arr)}[{' + '.join(terms) or '0'}]", arr.type.dtype)

        def tuple_item(v):
            at = Val("0ll" if len(v.items) == 1 else idx[-1], INT64)
            return self.tuple_item_at(v, at, node)

        args = [item(v, idx[ot.ndim - v.type.ndim:], True) if isinstance(v.type, ArrayT)
                else tuple_item(v) if isinstance(v.type, TupleT) else v for v in ins]
        result = compute(args)
        self.emit(f"{item(out, idx, False).code} = {self.convert(result, ot.dtype, node)};")
        self.indent -= 1
        self.emit("}")

    def numpy_unsupported(self, name, node):
        for a in node.args:   # an unsupported construct in the arguments is the first error
            self.expr(a)
        self.error(node, f"np.{name} is not supported in kernels (NumPy functions in kernels: "
                         f"{', '.join(sorted(_NUMPY_ALL))}; arrays are made with local.array or "
                         "shared.array: cuda.local.array in tessel.numba)")

    def numpy_scalar(self, name, vals, node) -> Val:
        for v in vals:
            if not isinstance(v.type, Scalar):
                self.error(node, f"np.{name} takes numbers, got {v.type}")
        if name in _NUMPY_BINOPS:
            return self.binop(_NUMPY_BINOPS[name](), vals[0], vals[1], node)
        if name in _NUMPY_COMPARE or name in ("maximum", "minimum", "fmax", "fmin"):
            a, b = vals
            t = promote(a.type, b.type)
            t = t.strong() if not (a.type.weak and b.type.weak) else t
            if t.kind == "c":
                self.error(node, f"np.{name} does not take complex numbers in kernels")
            if name in _NUMPY_COMPARE:
                return Val(f"({self.convert(a, t, node)} {_NUMPY_COMPARE[name]} {self.convert(b, t, node)})", BOOL)
            x, y = self.declare_temp(t, "mx"), self.declare_temp(t, "mx")
            self.emit_pre(f"{x} = {self.convert(a, t, node)};")
            self.emit_pre(f"{y} = {self.convert(b, t, node)};")
            sym = ">" if name in ("maximum", "fmax") else "<"
            if t.kind != "f":
                return Val(f"({x} {sym} {y} ? {x} : {y})", t)
            if name in ("maximum", "minimum"):   # a NaN wins
                return Val(f"(({x} != {x} || {x} {sym} {y}) ? {x} : {y})", t)
            return Val(f"(({y} != {y} || {x} {sym} {y}) ? {x} : {y})", t)   # fmax, fmin: a NaN loses
        if name in ("logical_and", "logical_or", "logical_xor"):
            sym = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}[name]
            return Val(f"({self.truth(vals[0], node)} {sym} {self.truth(vals[1], node)})", BOOL)
        if name == "logical_not":
            return Val(f"(!{self.truth(vals[0], node)})", BOOL)
        if name == "invert":
            t = vals[0].type.strong()
            if t.kind == "b":
                return Val(f"(!{vals[0].code})", BOOL)
            if t.kind not in "iu":
                self.error(node, f"np.invert takes integers and booleans, got {t}")
            return Val(f"(({t.ctype})~({vals[0].code}))", t)
        if name == "absolute":
            return _b_abs(self, node, vals)
        if name in ("floor", "ceil", "trunc"):
            t = vals[0].type
            if t.kind in "ub" or t.kind == "i":
                t = FLOAT64
            t = t.strong()
            if t.kind == "c":
                self.error(node, f"np.{name} does not take complex numbers")
            ft = t if t.name in ("float32", "float64") else FLOAT32
            return Val(self.round_half(f"ts::{name}({self.convert(vals[0], ft, node)})", t), t)
        return self.call_math(_NUMPY_UFUNCS[name], node, vals)   # by name (math.exp2 is Python 3.11's)

    def call_cmath(self, fn, node, vals=None) -> Val:
        name = getattr(fn, "__name__", str(fn))
        if vals is None:
            vals, _ = self.args_of(node, 1, 2, f"cmath.{name}")
        if name in ("polar",):
            z = vals[0]
            t = z.type if z.type.kind == "c" else COMPLEX128
            c = self.convert(z, t, node)
            ft = Scalar("float32" if t.name == "complex64" else "float64")
            return Val(None, TupleT((ft, ft)), items=[Val(f"ts::cabs({c})", ft), Val(f"ts::phase({c})", ft)])
        if name == "rect":
            t = float_type_of(promote(vals[0].type, vals[1].type))
            ct = Scalar("complex64" if t.name == "float32" else "complex128")
            ft = FLOAT32 if ct.name == "complex64" else FLOAT64
            return Val(f"ts::crect({self.convert(vals[0], ft, node)}, {self.convert(vals[1], ft, node)})", ct)
        t = vals[0].type
        ct = t.strong() if t.kind == "c" else (Scalar("complex64") if t.name == "float32" else COMPLEX128)
        z = self.convert(vals[0], ct, node)
        ft = Scalar("float32" if ct.name == "complex64" else "float64")
        if name in ("phase",):
            return Val(f"ts::phase({z})", ft)
        if name == "abs":
            return Val(f"ts::cabs({z})", ft)
        if name in ("isnan", "isinf", "isfinite"):
            return Val(f"ts::c{name}({z})", BOOL)
        if name in ("exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
                    "atan", "asinh", "acosh", "atanh"):
            if name == "log" and len(vals) == 2:
                return Val(f"(ts::clog({z}) / ts::clog({self.convert(vals[1], ct, node)}))", ct)
            return Val(f"ts::c{name}({z})", ct)
        self.error(node, f"cmath.{name} is not supported in kernels")


# ---- tables -----------------------------------------------------------------------------------------
_OPSYM = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%", "Pow": "**",
          "BitAnd": "&", "BitOr": "|", "BitXor": "^", "LShift": "<<", "RShift": ">>", "MatMult": "@"}
_FOLD = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mult": lambda a, b: a * b,
         "Div": lambda a, b: a / b, "FloorDiv": lambda a, b: a // b, "Mod": lambda a, b: a % b,
         "Pow": lambda a, b: a ** b if not (isinstance(a, int) and isinstance(b, int) and b > 64) else
         (_ for _ in ()).throw(ValueError()),
         "BitAnd": lambda a, b: a & b, "BitOr": lambda a, b: a | b, "BitXor": lambda a, b: a ^ b,
         "LShift": lambda a, b: a << b if b < 64 else (_ for _ in ()).throw(ValueError()),
         "RShift": lambda a, b: a >> b}

_ATOMIC_ARITH = {"int32", "uint32", "int64", "uint64", "float32", "float64"}
_ATOMIC_INT = {"int32", "uint32", "int64", "uint64"}
_ATOMIC_CAS = {"int32", "uint32", "int64", "uint64", "float32", "float64"}

# name -> (number of args, kind): f float result, i int result, b bool result
_MATH = {n: (1, "f") for n in ("sqrt", "exp", "exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan",
                               "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs",
                               "erf", "erfc", "lgamma", "gamma", "cbrt")}
_MATH.update({"log": ((1, 2), "f"), "atan2": (2, "f"), "pow": (2, "f"), "fmod": (2, "f"), "hypot": (2, "f"),
              "copysign": (2, "f"), "floor": (1, "i"), "ceil": (1, "i"), "trunc": (1, "i"),
              "isnan": (1, "b"), "isinf": (1, "b"), "isfinite": (1, "b"), "degrees": (1, "deg"),
              "radians": (1, "deg"), "ldexp": (2, "ldexp"), "fma": (3, "f"), "remainder": (2, "f"),
              "frexp": (1, "tuple"), "modf": (1, "tuple")})
_MATH_FUNCS = {getattr(math, n) for n in _MATH if hasattr(math, n)}
_CMATH_FUNCS = {getattr(cmath, n) for n in ("exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh",
                                           "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "phase",
                                           "polar", "rect", "isnan", "isinf", "isfinite")}
# the operator module's functions (those Numba's CUDA target has): the operators' expressions
_OPERATORS = {getattr(operator, n): ("binary", getattr(ast, op)) for ns, op in (
    (("add", "iadd"), "Add"), (("sub", "isub"), "Sub"), (("mul", "imul"), "Mult"), (("truediv", "itruediv"), "Div"),
    (("floordiv", "ifloordiv"), "FloorDiv"), (("mod", "imod"), "Mod"), (("pow", "ipow"), "Pow"),
    (("lshift", "ilshift"), "LShift"), (("rshift", "irshift"), "RShift"), (("and_", "iand"), "BitAnd"),
    (("or_", "ior"), "BitOr"), (("xor", "ixor"), "BitXor")) for n in ns}
_OPERATORS.update({getattr(operator, n): ("compare", getattr(ast, op)) for n, op in (
    ("eq", "Eq"), ("ne", "NotEq"), ("lt", "Lt"), ("le", "LtE"), ("gt", "Gt"), ("ge", "GtE"))})
_OPERATORS.update({getattr(operator, n): ("unary", getattr(ast, op)) for n, op in (
    ("neg", "USub"), ("pos", "UAdd"), ("invert", "Invert"), ("not_", "Not"))})
# NumPy's ufuncs in kernels (their name -> the math function computing them): on numbers, and on
# arrays with the output array passed (np.sin(x, out)), as Numba's CUDA target
_NUMPY_UFUNCS = {n: n for n in ("sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                                "tan", "sinh", "cosh", "tanh", "isnan", "isinf", "isfinite", "hypot", "copysign",
                                "fmod", "cbrt", "fabs", "degrees", "radians")}
_NUMPY_UFUNCS.update({"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
                      "arccosh": "acosh", "arctanh": "atanh", "deg2rad": "radians", "rad2deg": "degrees",
                      "floor": "floor", "ceil": "ceil", "trunc": "trunc", "absolute": "fabs"})
# NumPy's arithmetic ufuncs: Python's operators, which follow NumPy's rules in kernels
_NUMPY_BINOPS = {"add": ast.Add, "subtract": ast.Sub, "multiply": ast.Mult, "divide": ast.Div,
                 "true_divide": ast.Div, "floor_divide": ast.FloorDiv, "remainder": ast.Mod, "power": ast.Pow,
                 "bitwise_and": ast.BitAnd, "bitwise_or": ast.BitOr, "bitwise_xor": ast.BitXor,
                 "left_shift": ast.LShift, "right_shift": ast.RShift}
_NUMPY_COMPARE = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<=", "equal": "==",
                  "not_equal": "!="}
_NUMPY_ALL = set(_NUMPY_UFUNCS) | set(_NUMPY_BINOPS) | set(_NUMPY_COMPARE) | {
    "maximum", "minimum", "fmax", "fmin", "logical_and", "logical_or", "logical_xor", "logical_not", "invert"}
_PRANGE = object()
# Names only the compiler's own rewritten loops use (for x in a: ... becomes a loop over range()).
_INTERNAL_NAMES = {"_ts_range": range, "_ts_len": len, "_ts_min": min}


def _device_array_of(obj):
    """The tessel array of a device array (a tessel array, Numba's device array or anything with
    ``__tessel_array__``), or None."""
    if isinstance(obj, (type, pytypes.ModuleType, pytypes.FunctionType)):
        return None
    try:
        arr = getattr(obj, "__tessel_array__", obj)
    except Exception:  # noqa: BLE001 - not an array
        return None
    if type(arr).__name__ != "Array" or not type(arr).__module__.startswith("tessel"):
        return None
    return arr


class _DTypeMarker:
    def __init__(self, scalar):
        self.scalar = scalar


def _ct_key(value):
    """What a compile-time value compares as: dtypes (NumPy's, tessel's, Numba-style, an array's
    .dtype) by name, anything else as itself."""
    if isinstance(value, _DTypeMarker):
        return ("dtype", value.scalar.name)
    if _is_dtype_object(value):
        try:
            return ("dtype", _dtype_scalar(value).name)
        except TypeError:
            pass
    return value


class _GridGroup:
    """cg.this_grid()'s value: its one method is sync()."""


class _InnerFunction:
    """A function defined in the function being compiled (``def`` or ``lambda``): its definition
    and the enclosing function's compiler."""

    def __init__(self, fdef, outer, name):
        self.fdef, self.outer, self.__name__ = fdef, outer, name


class _BoundMethod:
    def __init__(self, name, base):
        self.name = name
        self.base = base


def _structured_dtype(d):
    """The structured NumPy dtype a compile-time dtype stands for (np.dtype([...]), Numba's Record
    type), or None."""
    for cand in (d, getattr(d, "dtype", None)):
        if isinstance(cand, np.dtype) and cand.names is not None:
            return cand
    return None


class _ValNode(ast.expr):
    """An expression already compiled: an item of a *tuple argument."""
    _fields = ()

    def __init__(self, val):
        super().__init__()
        self.val = val


def _static_record_type(dtype, node, fc, what):
    """The RecordT of the records of a local or shared array: bytes aligned to 16, records
    itemsize bytes apart."""
    fields = []
    for name in dtype.names:
        ftype, offset = dtype.fields[name][:2]
        base, shape = ftype.base, tuple(ftype.shape)
        if base.names is not None or base.kind not in "biufc" or base.byteorder == ">":
            fc.error(node, f"{what}: the record field {name!r} has dtype {ftype}; the fields of records in "
                           "kernels are numbers or arrays of numbers")
        fields.append((name, scalar_from_dtype(base), shape, int(offset)))
    align = 16
    while align > 1 and dtype.itemsize % align:
        align //= 2
    descr = ", ".join(f"{n}: {dtype.fields[n][0]}" for n in dtype.names)
    return RecordT(tuple(fields), int(dtype.itemsize), Scalar("uint8"), align, descr)


def _decl(cname, ctype) -> str:
    if isinstance(ctype, tuple):
        return f"{ctype[0]} {cname}[{ctype[1]}];"
    return f"{ctype} {cname};"


# ---- builtins -----------------------------------------------------------------------------------------
def _b_range(c, node):
    c.error(node, "range() is valid only as the iterable of a for loop")


def _b_len(c, node):
    vals, _ = c.args_of(node, 1, 1, "len")
    v = vals[0]
    if isinstance(v.type, ArrayT):
        if v.type.ndim == 0:
            c.error(node, "len() of a 0-d array")
        return c.extent(v, 0)
    if v.items is not None:
        return Val(f"{len(v.items)}ll", WEAK_INT, True, const=len(v.items))
    c.error(node, f"len() of {v.type}")


def _b_minmax(which):
    def f(c, node):
        vals, _ = c.args_of(node, 1, 64, which)
        if len(vals) == 1 and vals[0].items is not None:
            vals = vals[0].items
        if len(vals) < 2:
            c.error(node, f"{which}() needs at least 2 arguments in a kernel")
        for v in vals:
            c.scalar_check(v, node, f"{which}()")
        t = unify(*[v.type for v in vals])
        t = t.strong() if not all(v.type.weak for v in vals) else t
        if t.kind == "c":
            c.error(node, f"{which}() of complex numbers")
        fn = "ts::vmin" if which == "min" else "ts::vmax"
        ct = t.ctype
        code = c.convert(vals[0], t, node)
        for v in vals[1:]:
            code = f"{fn}<{ct}>({code}, {c.convert(v, t, node)})"
        return Val(code, t, all(v.nonneg for v in vals) if which == "max" else all(v.nonneg for v in vals))
    return f


def _b_abs(c, node, vals=None):
    if vals is None:
        vals, _ = c.args_of(node, 1, 1, "abs")
    v = vals[0]
    c.scalar_check(v, node, "abs()")
    t = v.type
    if t.kind == "c":
        ft = Scalar("float32" if t.name == "complex64" else "float64")
        return Val(f"ts::cabs({v.code})", ft, True)
    if t.kind == "f":
        ft = t.strong() if t.name in ("float32", "float64") else FLOAT32
        return Val(c.round_half(f"ts::fabs({c.convert(v, ft, node)})", t.strong()), t, True)
    if t.kind == "b":
        return v
    return Val(f"ts::iabs<{t.ctype}>({v.code})", t, True)


def _b_round(c, node):
    vals, _ = c.args_of(node, 1, 2, "round")
    v = vals[0]
    c.scalar_check(v, node, "round()")
    if v.type.kind in "iub":
        return v
    ft = v.type.strong() if v.type.name in ("float32", "float64") else FLOAT32
    x = c.convert(v, ft, node)
    if len(vals) == 1:
        return Val(f"ts::cast<ts::i64>(ts::rint({x}))", INT64)
    nd = vals[1]
    return Val(f"ts::round_digits<{ft.ctype}>({x}, (int)({nd.code}))", v.type.strong())


def _b_sum(c, node):
    """sum(t, start=0) of a tuple of numbers: start + t[0] + t[1] + ..., in order."""
    vals, _ = c.args_of(node, 1, 2, "sum")
    seq = vals[0]
    if seq.items is None:
        what = "an array" if isinstance(seq.type, ArrayT) else str(seq.type)
        c.error(node, f"sum() of {what} is not supported in kernels (sum() takes a tuple of numbers; "
                      "add an array's elements in a loop)")
    acc = vals[1] if len(vals) > 1 else Val("0ll", WEAK_INT, True, const=0)
    for it in seq.items:
        c.scalar_check(it, node, "sum()")
        acc = c.binop(ast.Add(), acc, it, node)
    return acc


def _b_pow(c, node):
    vals, _ = c.args_of(node, 2, 2, "pow")
    return c.binop(ast.Pow(), vals[0], vals[1], node)


def _b_divmod(c, node):
    vals, _ = c.args_of(node, 2, 2, "divmod")
    q = c.binop(ast.FloorDiv(), vals[0], vals[1], node)
    r = c.binop(ast.Mod(), vals[0], vals[1], node)
    return Val(None, TupleT((q.type, r.type)), items=[q, r])


def _b_int(c, node):
    vals, _ = c.args_of(node, 0, 1, "int")
    if not vals:
        return Val("0ll", WEAK_INT, True, const=0)
    v = vals[0]
    c.scalar_check(v, node, "int()")
    if v.type.kind == "c":
        c.error(node, "int() of a complex number")
    if v.is_const and v.type.weak:
        r = int(v.const)
        return Val(_literal_code(r, WEAK_INT), WEAK_INT, r >= 0, const=r)
    return Val(f"ts::cast<ts::i64>({v.code})", INT64, v.nonneg)


def _b_float(c, node):
    vals, _ = c.args_of(node, 0, 1, "float")
    if not vals:
        return Val("0.0", WEAK_FLOAT, True, const=0.0)
    v = vals[0]
    if v.is_const and isinstance(v.const, str):
        # float("inf"), float("-inf"), float("nan"), float("1.5"): a constant
        try:
            r = float(v.const)
        except ValueError:
            c.error(node, f"float({v.const!r}): not a number")
        return Val(_literal_code(r, WEAK_FLOAT), WEAK_FLOAT, not r < 0, const=r)
    c.scalar_check(v, node, "float()")
    if v.type.kind == "c":
        c.error(node, "float() of a complex number; take .real or abs() first")
    if v.is_const and v.type.weak:
        r = float(v.const)
        return Val(_literal_code(r, WEAK_FLOAT), WEAK_FLOAT, r >= 0, const=r)
    return Val(f"ts::cast<double>({v.code})", FLOAT64, v.nonneg)


def _b_bool(c, node):
    vals, _ = c.args_of(node, 0, 1, "bool")
    if not vals:
        return Val("false", BOOL, True, const=False)
    return Val(c.truth(vals[0], node), BOOL, True)


def _b_complex(c, node):
    vals, _ = c.args_of(node, 0, 2, "complex")
    if not vals:
        return Val(_literal_code(0j, WEAK_COMPLEX), WEAK_COMPLEX, const=0j)
    re = c.convert(vals[0], FLOAT64, node)
    im = c.convert(vals[1], FLOAT64, node) if len(vals) > 1 else "0.0"
    return Val(f"ts::c128({re}, {im})", COMPLEX128)


def _b_print(c, node):
    fmt, args = [], []
    for a in node.args:
        v = c.expr(a)
        if v.is_const and isinstance(v.const, str):
            fmt.append(v.const.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
            continue
        if v.items is not None:
            c.error(node, "print() of a tuple is not supported in kernels")
        if not isinstance(v.type, Scalar):
            c.error(node, f"print() of {v.type} is not supported in kernels")
        k = v.type.kind
        if k == "b":
            fmt.append("%s")
            args.append(f"(({v.code}) ? \"True\" : \"False\")")
        elif k == "i":
            fmt.append("%lld")
            args.append(f"(long long)({v.code})")
        elif k == "u":
            fmt.append("%llu")
            args.append(f"(unsigned long long)({v.code})")
        elif k == "f":
            fmt.append("%f")
            args.append(f"(double)({c.convert(v, FLOAT64, node)})")
        else:
            fmt.append("(%f%+fj)")
            z = c.convert(v, COMPLEX128, node)
            args += [f"({z}).re", f"({z}).im"]
    kw = {k.arg: k.value for k in node.keywords}
    sep = " "
    end = "\\n"
    if "sep" in kw:
        sep = c.expr(kw["sep"]).const
    if "end" in kw:
        end = c.expr(kw["end"]).const.replace("\n", "\\n")
    c.root.uses_print = True
    text = sep.join(fmt) + end
    return Val(f"TS_PRINTF(\"{text}\"{''.join(', ' + a for a in args)})", NoneT())


class _RangeHelper:
    def __init__(self, name):
        self.__name__ = name


_RANGE_LEN = _RangeHelper("_ts_range_len")
_RANGE_ITEM = _RangeHelper("_ts_range_item")


def _range_parts(c, vals, node):
    for v in vals:
        if not is_intlike(v.type):
            c.error(node, f"range() arguments must be integers, got {v.type}")
    one = Val("1ll", WEAK_INT, True, const=1)
    zero = Val("0ll", WEAK_INT, True, const=0)
    if len(vals) == 1:
        return zero, vals[0], one
    if len(vals) == 2:
        return vals[0], vals[1], one
    return vals[0], vals[1], vals[2]


def _b_range_len(c, node):
    """len(range(start, stop, step)) of a loop over enumerate/zip of a range."""
    vals, _ = c.args_of(node, 1, 3, "range")
    start, stop, step = _range_parts(c, vals, node)
    a, b, s = (c.convert(v, INT64, node) for v in (start, stop, step))
    return Val(f"ts::range_len({a}, {b}, {s})", INT64, True)


def _b_range_item(c, node):
    vals, _ = c.args_of(node, 2, 4, "range")
    start, _stop, step = _range_parts(c, vals[:-1], node)
    k = vals[-1]
    t = promote(start.type, step.type).strong()
    t = INT64 if t.kind == "b" or t.itemsize < 8 else t
    return Val(f"({c.convert(start, t, node)} + ({c.convert(k, t, node)}) * {c.convert(step, t, node)})", t,
               start.nonneg and step.nonneg)


_INTERNAL_NAMES.update({"_ts_range_len": _RANGE_LEN, "_ts_range_item": _RANGE_ITEM})
_BUILTINS = {_RANGE_LEN: _b_range_len, _RANGE_ITEM: _b_range_item, range: _b_range, len: _b_len, min: _b_minmax("min"), max: _b_minmax("max"), abs: _b_abs,
             round: _b_round, pow: _b_pow, divmod: _b_divmod, int: _b_int, float: _b_float, bool: _b_bool,
             complex: _b_complex, print: _b_print, sum: _b_sum}


def _outside_integer_type(left, right, t, opname):
    """The result of `left opname right` when one side is a Python int constant outside the range of
    the integer type t they compare in (every value of t is then below or above it), else None."""
    if t.kind not in "iu" or left.is_const == right.is_const:
        return None
    const_left = left.is_const
    c = left.const if const_left else right.const
    if not isinstance(c, (int, np.integer)) or isinstance(c, (bool, np.bool_)):
        return None
    info = np.iinfo(t.name)
    if info.min <= int(c) <= info.max:
        return None
    above = int(c) > info.max  # the constant is above every value of t
    if opname in ("Eq", "NotEq"):
        return opname == "NotEq"
    value_below = above  # value < c
    if const_left:       # c OP value
        return {"Lt": not value_below, "LtE": not value_below, "Gt": value_below, "GtE": value_below}[opname]
    return {"Lt": value_below, "LtE": value_below, "Gt": not value_below, "GtE": not value_below}[opname]


# ---- whole kernels -------------------------------------------------------------------------------------
_RUNTIME = None


def runtime_source() -> str:
    global _RUNTIME
    if _RUNTIME is None:
        import os
        with open(os.path.join(os.path.dirname(__file__), "runtime.h")) as f:
            _RUNTIME = f.read().replace("#pragma once\n", "", 1)
    return _RUNTIME


def _param_decls(names, types, target):
    """The flattened parameters: an array is its data pointer, then its shape, then its strides; a
    tuple its items, in order. Returns the parameters and, per variable to set, (its name, the
    parameter expression, its type, the kernel parameter it belongs to)."""
    params, unpack = [], []

    def add(name, t, base):
        if isinstance(t, TupleT):
            for k, it in enumerate(t.items):
                add(f"{name}__{k}", it, base)
        elif isinstance(t, ArrayT):
            ct, nd = t.storage_ctype, t.storage_ndim
            params.append(f"{ct}* p_{name}_data")
            params.extend(f"ts::i64 p_{name}_s{d}" for d in range(nd))
            params.extend(f"ts::i64 p_{name}_t{d}" for d in range(nd))
            if nd:
                shape = ", ".join(f"p_{name}_s{d}" for d in range(nd))
                strides = ", ".join(f"p_{name}_t{d}" for d in range(nd))
                unpack.append((name, f"ts::mkarr<{ct}, {nd}>(p_{name}_data, {{{shape}}}, {{{strides}}})", t, base))
            else:
                unpack.append((name, f"ts::mkarr0<{ct}>(p_{name}_data)", t, base))
        elif isinstance(t, RecordT):
            # a single record: the address of its bytes (a 1-d byte array's data, extent and stride)
            params.extend([f"unsigned char* p_{name}_data", f"ts::i64 p_{name}_s0", f"ts::i64 p_{name}_t0"])
            unpack.append((name, f"p_{name}_data", t, base))
        else:
            params.append(f"{t.ctype} p_{name}")
            unpack.append((name, f"p_{name}", t, base))

    for name, t in zip(names, types):
        add(name, t, name)
    return params, unpack


def generate(pyfunc, arg_types, target: str, options: dict, symbol: str):
    """C++ source of the kernel for `target` ("cuda" or "cpu") and the argument types.

    Returns (source, info) where info has the sites, whether it suspends, the array names."""
    root = Root(target, options)
    fc = FunctionCompiler(pyfunc, arg_types, root, kernel_name=pyfunc.__name__, mode="kernel",
                          numbers=options.get("numbers", "numpy"))
    fc.run_typing()
    if root.fission_node is not None and (fc.suspends or root.inlined_raise):
        # barriers elsewhere in the kernel (or a device function's raise, which must end the thread,
        # not the iteration): the grid-stride loop pauses its threads instead
        root.fission_disabled = True
        root.fission_node = None
        fc.run_typing()
    root.suspending = fc.suspends and target == "cpu"
    # a second typing with the final flags (the suspension decides how returns are written)
    root.decls.clear()
    root.local_bytes.clear()
    root.sites.clear()
    root.shared.clear()
    root.shared_keys.clear()
    root.array_names.clear()
    root.raises.clear()
    root.fission.clear()
    fc._pass(typing=False)
    body = fc.lines
    decls = dict(root.decls)
    for name, info in fc.vars.items():
        if info.cname and isinstance(info.type, (Scalar, ArrayT, RecordT)):
            decls[info.cname] = info.type.ctype
    params, unpack = _param_decls(fc.params, arg_types, target)
    param_inits = []
    # CPU: a parameter the kernel never assigns is a constant of each function, not a per-thread
    # variable (so a loop over threads reads it from a register, not from each thread's state)
    stored = {n.id for n in ast.walk(fc.fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    root.fixed_lines = []
    for name, code, t, base in unpack:
        info = fc.vars.get(name)
        if info is None or not info.cname:
            continue
        if target == "cpu" and base not in stored and info.type == t:
            root.fixed_lines.append(f"  {info.type.ctype} const {info.cname} = {code};")
            decls.pop(info.cname, None)
            continue
        if isinstance(t, Scalar) and info.type != t:
            code = f"ts::cast<{info.type.ctype}>({code})"
        param_inits.append(f"{info.cname} = {code};")
    out = [runtime_source(), ""]
    out += root.consts
    out += root.functions
    debug = bool(options.get("debug"))
    names_table = ", ".join(f'"{n}"' for n in root.array_names) or '""'
    if target == "cuda":
        out.append(_cuda_kernel(symbol, params, decls, param_inits, body, root, debug))
    else:
        out.append(_cpu_kernel(symbol, params, decls, param_inits, body, root, debug, arg_types, fc))
    src = "\n".join(out) + "\n"
    return src, {"array_names": list(root.array_names), "raises": list(root.raises), "suspends": fc.suspends,
                 "grid_sync": root.uses_grid_sync,
                 "uses_dynamic_shared": root.uses_dynamic_shared,
                 "static_shared_bytes": _static_shared_layout(root)[1],
                 "local_bytes": sum(root.local_bytes.values()), "const_bytes": root.const_bytes,
                 "captured": root.captured}


def _static_shared_layout(root):
    offsets, off = [], 0
    for cname, ctype, count, itemsize in root.shared:
        off = (off + 15) // 16 * 16
        offsets.append((cname, ctype, count, off))
        off += count * itemsize
    return offsets, off


def _cuda_kernel(symbol, params, decls, param_inits, body, root, debug):
    lines = []
    if root.uses_grid_sync:
        params = params + ["unsigned int* ts_grid_bar"]
    if debug:
        params = params + ["ts::DebugRecord* ts_dbg"]
        lines.append("""
__device__ __forceinline__ ts::i64 ts_check_index(ts::DebugRecord* r, ts::i64 i, ts::i64 n, int a, int d, int line) {
  if (i >= 0 && i < n) return i;
  if (atomicCAS(&r->failed, 0, 1) == 0) {
    r->line = line; r->array = a; r->dim = d; r->index = i; r->extent = n;
    r->thread[0] = threadIdx.x; r->thread[1] = threadIdx.y; r->thread[2] = threadIdx.z;
    r->block[0] = blockIdx.x; r->block[1] = blockIdx.y; r->block[2] = blockIdx.z;
  }
  asm volatile("exit;");
  return 0;
}
#define ts_chk(i, n, a, d, line) ts_check_index(ts_dbg, i, n, a, d, line)
__device__ void ts_raise_exception(ts::DebugRecord* r, int k, int line) {
  if (atomicCAS(&r->failed, 0, 1) == 0) {
    r->line = line; r->array = k; r->dim = -1; r->index = 0; r->extent = 0;
    r->thread[0] = threadIdx.x; r->thread[1] = threadIdx.y; r->thread[2] = threadIdx.z;
    r->block[0] = blockIdx.x; r->block[1] = blockIdx.y; r->block[2] = blockIdx.z;
  }
  asm volatile("exit;");
}
#define ts_raise(k, line) ts_raise_exception(ts_dbg, k, line)
template <class T> __device__ __forceinline__ T ts_nonzero(ts::DebugRecord* r, T v, int k, int line) {
  if (v == T(0)) ts_raise_exception(r, k, line);
  return v;
}
#define ts_nz(v, k, line) ts_nonzero(ts_dbg, v, k, line)""")
    lines.append("#define ts_dyn_shared() ts::ts_dyn_shared_ptr()")
    lines.append("#define ts_dyn_shared_bytes() ts::dyn_shared_bytes()")
    lines.append(f'extern "C" __global__ void {symbol}({", ".join(params) or "void"}) {{')
    for cname, ctype, count, itemsize in root.shared:
        lines.append(f"  __shared__ __align__(16) {ctype} {cname}[{count}];")
    for cname, ctype in decls.items():
        lines.append("  " + _decl(cname, ctype))
    for p in param_inits:
        lines.append("  " + p)
    lines += body
    lines.append("}")
    return "\n".join(lines)


def _cpu_kernel(symbol, params, decls, param_inits, body, root, debug, arg_types, fc):
    """The CPU backend: blocks over OpenMP threads; in a block, threads one after another (or as
    resumable functions when they meet at barriers and warp intrinsics)."""
    suspending = root.suspending
    offsets, static_bytes = _static_shared_layout(root)
    L = []
    L.append("#include <vector>\n#include <stdexcept>\n#include <cstdlib>\n#include <algorithm>\n#include <omp.h>")
    L.append("namespace {")
    L.append("struct TsBlock {\n  ts::i64 bx, by, bz, dx, dy, dz, gx, gy, gz;\n  char* shared;\n  char* dyn;\n"
             "  ts::u64 dyn_bytes;\n  TsHostLaunch* L;\n};")
    L.append("struct TsIndexError { ts::DebugRecord r; };")
    if debug:
        L.append("""
inline ts::i64 ts_check_index(ts::i64 i, ts::i64 n, int a, int d, int line, const TsBlock& B, ts::i64 tid) {
  if (i >= 0 && i < n) return i;
  TsIndexError e;
  e.r.failed = 1; e.r.line = line; e.r.array = a; e.r.dim = d; e.r.index = i; e.r.extent = n;
  e.r.thread[0] = tid % B.dx; e.r.thread[1] = (tid / B.dx) % B.dy; e.r.thread[2] = tid / (B.dx * B.dy);
  e.r.block[0] = B.bx; e.r.block[1] = B.by; e.r.block[2] = B.bz;
  throw e;
}
#define ts_chk(i, n, a, d, line, B, tid) ts_check_index(i, n, a, d, line, B, tid)
inline void ts_raise(int k, int line, const TsBlock& B, ts::i64 tid) {
  TsIndexError e;
  e.r.failed = 1; e.r.line = line; e.r.array = k; e.r.dim = -1; e.r.index = 0; e.r.extent = 0;
  e.r.thread[0] = tid % B.dx; e.r.thread[1] = (tid / B.dx) % B.dy; e.r.thread[2] = tid / (B.dx * B.dy);
  e.r.block[0] = B.bx; e.r.block[1] = B.by; e.r.block[2] = B.bz;
  throw e;
}
template <class T> inline T ts_nz(T v, int k, int line, const TsBlock& B, ts::i64 tid) {
  if (v == T(0)) ts_raise(k, line, B, tid);
  return v;
}""")
    L.append("#define ts_dyn_shared() (B.dyn)")
    L.append("#define ts_dyn_shared_bytes() (B.dyn_bytes)")
    for cname, ctype, count, off in offsets:
        L.append(f"constexpr ts::i64 {cname}_off = {off};")
    # parameters
    fields = []
    for p in params:
        fields.append(f"  {p};")
    L.append("struct TsParams {\n" + "\n".join(fields) + "\n};")
    pnames = [p.rsplit(" ", 1)[1] for p in params]
    unpack_p = "\n".join(f"  {p.rsplit(' ', 1)[1]} = P.{p.rsplit(' ', 1)[1]};" for p in params)
    if root.fission.get("body") is not None:
        L.append(_cpu_fission(params, decls, param_inits, body, root))
        runner = ""
    elif not suspending:
        L.append("inline __attribute__((always_inline)) void ts_thread(const TsParams& P, TsBlock& B, ts::i64 ts_tx, "
                 "ts::i64 ts_ty, ts::i64 ts_tz, ts::i64 ts_tid) {")
        L.append("  (void)ts_tx; (void)ts_ty; (void)ts_tz; (void)ts_tid; (void)B;")
        for p in params:
            L.append(f"  {p.rsplit(' ', 1)[0]} const {p.rsplit(' ', 1)[1]} = P.{p.rsplit(' ', 1)[1]};")
        L += root.fixed_lines
        for cname, ctype in decls.items():
            L.append("  " + _decl(cname, ctype))
        L += ["  " + p for p in param_inits]
        L += body
        L.append("}")
        runner = """
void ts_run_block(const TsParams& P, TsBlock& B) {
  ts::i64 tid = 0;
  for (ts::i64 z = 0; z < B.dz; ++z)
    for (ts::i64 y = 0; y < B.dy; ++y)
      for (ts::i64 x = 0; x < B.dx; ++x, ++tid) ts_thread(P, B, x, y, z, tid);
}"""
    else:
        L.append("enum { TS_RUN = 0, TS_WAIT_WARP = 1, TS_WAIT_BLOCK = 2, TS_DONE = 3, TS_WAIT_GRID = 4 };")
        L.append("struct TsState {\n  int pc;\n  int status;\n  ts::i64 tx, ty, tz;")
        for cname, ctype in decls.items():
            L.append("  " + _decl(cname, ctype))
        L.append("};")
        L.append("void ts_thread(const TsParams& P, TsBlock& B, TsState& S, ts::i64 ts_tid) {")
        L.append("  const ts::i64 ts_tx = S.tx, ts_ty = S.ty, ts_tz = S.tz;")
        L.append("  (void)ts_tx; (void)ts_ty; (void)ts_tz; (void)ts_tid; (void)B;")
        for p in params:
            L.append(f"  {p.rsplit(' ', 1)[0]} const {p.rsplit(' ', 1)[1]} = P.{p.rsplit(' ', 1)[1]};")
        L += root.fixed_lines
        for cname, ctype in decls.items():
            L.append(f"  auto& {cname} = S.{cname};")
        L.append("  switch (S.pc) {\n    case 0: break;")
        for s in root.sites:
            L.append(f"    case {s.id}: goto ts_resume_{s.id};")
        L.append("    default: return;\n  }")
        L += ["  " + p for p in param_inits]
        L += body
        L.append("  S.status = TS_DONE;")
        L.append("}")
        L.append(_cpu_exchange(root))
        L.append("const bool ts_is_yield[] = {false" + "".join(", true" if x.kind == "yield" else ", false"
                                                             for x in root.sites) + "};")
        runner = """
// One block. Sweeps run every thread that can run (or is paused in a grid-stride loop) until it
// stops at a site; once none can, the lanes of a warp waiting at a warp site exchange and run on
// (every other lane of their warp is then at a site or done), else the threads at a block barrier
// do.
// (A grid barrier stops the block: ts_run_block returns, and the entry resumes every block once
// all have stopped there.)
void ts_run_block(const TsParams& P, TsBlock& B, std::vector<TsState>& st, std::vector<int>& who,
                  bool start = true) {
  const ts::i64 n = B.dx * B.dy * B.dz;
  if (start) {
    st.resize(n);
    who.resize(n);
    ts::i64 tid = 0;
    for (ts::i64 z = 0; z < B.dz; ++z)
      for (ts::i64 y = 0; y < B.dy; ++y)
        for (ts::i64 x = 0; x < B.dx; ++x, ++tid) {
          st[tid].pc = 0; st[tid].status = TS_RUN; st[tid].tx = x; st[tid].ty = y; st[tid].tz = z;
        }
  }
  TsState* s = st.data();
  for (;;) {
    for (bool again = true; again;) {
      again = false;
      for (ts::i64 t = 0; t < n; ++t) {
        TsState& S = s[t];
        if (S.status == TS_RUN || (S.status == TS_WAIT_BLOCK && ts_is_yield[S.pc])) {
          S.status = TS_RUN;
          ts_thread(P, B, S, t);
          again |= S.status == TS_WAIT_BLOCK && ts_is_yield[S.pc];
        }
      }
    }
    bool exchanged = false;
    for (ts::i64 w0 = 0; w0 < n; w0 += 32) {
      const ts::i64 w1 = std::min<ts::i64>(w0 + 32, n);
      int site = -1, count = 0;
      for (ts::i64 t = w0; t < w1 && site < 0; ++t)
        if (s[t].status == TS_WAIT_WARP) site = s[t].pc;
      if (site < 0) continue;
      for (ts::i64 t = w0; t < w1; ++t)
        if (s[t].status == TS_WAIT_WARP && s[t].pc == site) who[count++] = (int)t;
      ts_exchange(site, s, who.data(), count, B);
      for (int j = 0; j < count; ++j) s[who[j]].status = TS_RUN;
      exchanged = true;
    }
    if (exchanged) continue;
    int site = -1, count = 0;
    for (ts::i64 t = 0; t < n && site < 0; ++t)
      if (s[t].status == TS_WAIT_BLOCK) site = s[t].pc;
    if (site < 0) break;
    for (ts::i64 t = 0; t < n; ++t)
      if (s[t].status == TS_WAIT_BLOCK && s[t].pc == site) who[count++] = (int)t;
    ts_exchange(site, s, who.data(), count, B);
    for (int j = 0; j < count; ++j) s[who[j]].status = TS_RUN;
  }
}"""
    if runner:
        L.append(runner)
    L.append("}  // namespace")
    # entry
    n = len(params)
    L.append("#define TS_ARRAY_NAMES " + (", ".join(_c_string(a) for a in root.array_names) or '""'))
    L.append("#define TS_KERNEL_NAME " + _c_string(fc.name))
    L.append("#define TS_KERNEL_FILE " + _c_string(fc.filename))
    L.append(f'extern "C" int {symbol}(TsHostLaunch* L, void** params) {{')
    L.append("  TsParams P;")
    for i, p in enumerate(params):
        ctype, name = p.rsplit(" ", 1)
        L.append(f"  std::memcpy(&P.{name}, params[{i}], sizeof(P.{name}));")
    L.append("""  const ts::i64 gx = L->grid[0], gy = L->grid[1], gz = L->grid[2];
  const ts::i64 nblocks = gx * gy * gz;
  const ts::i64 nthreads = (ts::i64)L->block[0] * L->block[1] * L->block[2];
  const ts::u64 dyn_bytes = L->shared_bytes;
  int failed = 0;
  ts::DebugRecord rec;
  std::memset(&rec, 0, sizeof rec);""")
    par = "if (nblocks > 1 && nblocks * nthreads >= 4096)"
    if any(x.level == "grid" for x in root.sites):
        L.append(_cpu_grid_entry(static_bytes))
        L.append(_CPU_ERROR_TAIL)
        return "\n".join(L)
    if root.fission.get("body") is not None:
        L.append(_cpu_fission_entry(static_bytes))
        L.append(_CPU_ERROR_TAIL)
        return "\n".join(L)
    L.append("  const int nt = L->num_threads > 0 ? L->num_threads : 0;   // 0: OpenMP's default")
    L.append(f"  #pragma omp parallel {par} num_threads(nt > 0 ? nt : omp_get_max_threads())\n  {{")
    L.append(f"    std::vector<char> shared((size_t)({static_bytes} + 16) + dyn_bytes + 16);")
    fission = root.fission.get("body") is not None
    if suspending:
        L.append("    std::vector<TsState> st;\n    std::vector<int> who;")
    elif fission:
        L.append("    std::vector<TsState> st;")
    L.append("""    TsBlock B;
    B.dx = L->block[0]; B.dy = L->block[1]; B.dz = L->block[2];
    B.gx = gx; B.gy = gy; B.gz = gz; B.L = L;
    char* base = (char*)(((std::uintptr_t)shared.data() + 15) & ~(std::uintptr_t)15);
    B.shared = base;""")
    L.append(f"    B.dyn = base + (({static_bytes} + 15) / 16 * 16);\n    B.dyn_bytes = dyn_bytes;")
    L.append("    #pragma omp for schedule(dynamic, 1)\n    for (ts::i64 b = 0; b < nblocks; ++b) {")
    L.append("      if (__atomic_load_n(&failed, __ATOMIC_RELAXED)) continue;")
    L.append("      B.bx = b % gx; B.by = (b / gx) % gy; B.bz = b / (gx * gy);")
    L.append("      try {")
    L.append("        ts_run_block(P, B" + (", st, who" if suspending else (", st" if fission else "")) + ");")
    L.append("""      } catch (const TsIndexError& e) {
        #pragma omp critical(ts_error)
        { if (!failed) { rec = e.r; failed = 1; } }
      }
    }
  }""")
    L.append(_CPU_ERROR_TAIL)
    return "\n".join(L)


_CPU_ERROR_TAIL = """  if (failed && rec.dim == -1) {   // a raise: the launch raises the exception (see _dispatch)
    L->error_code = 2;
    std::snprintf(L->error, sizeof L->error, "kernel '%s' (%s:%d): exception %d raised in thread (%lld, %lld, %lld) "
                  "of block (%lld, %lld, %lld)", TS_KERNEL_NAME, TS_KERNEL_FILE, rec.line, rec.array, rec.thread[0],
                  rec.thread[1], rec.thread[2], rec.block[0], rec.block[1], rec.block[2]);
    return 1;
  }
  if (failed) {
    static const char* const names[] = {TS_ARRAY_NAMES};
    const int na = (int)(sizeof(names) / sizeof(names[0]));
    L->error_code = 1;
    std::snprintf(L->error, sizeof L->error,
                  "kernel '%s' (%s:%d): index %lld is out of bounds for axis %d with size %lld of array '%s', "
                  "in thread (%lld, %lld, %lld) of block (%lld, %lld, %lld)", TS_KERNEL_NAME, TS_KERNEL_FILE,
                  rec.line, rec.index, rec.dim, rec.extent, (rec.array >= 0 && rec.array < na) ? names[rec.array] : "?",
                  rec.thread[0], rec.thread[1], rec.thread[2], rec.block[0], rec.block[1], rec.block[2]);
    return 1;
  }
  return 0;
}"""


def _cpu_fission_entry(static_bytes) -> str:
    """Kernels run iteration-major: OpenMP threads take groups of about 4096 threads' worth of
    consecutive blocks, each block with its own shared memory."""
    return f"""  const ts::i64 group = std::max<ts::i64>(1, 4096 / std::max<ts::i64>(1, nthreads));
  const ts::i64 ngroups = (nblocks + group - 1) / group;
  const size_t per_block = (size_t)({static_bytes} + 15) / 16 * 16 + (dyn_bytes + 15) / 16 * 16 + 16;
  const int nt = L->num_threads > 0 ? L->num_threads : 0;
  #pragma omp parallel if (ngroups > 1 && nblocks * nthreads >= 4096) num_threads(nt > 0 ? nt : omp_get_max_threads())
  {{
    std::vector<TsState> st;
    std::vector<TsBlock> Bs(group);
    std::vector<char> shared(per_block * group + 16);
    char* base = (char*)(((std::uintptr_t)shared.data() + 15) & ~(std::uintptr_t)15);
    #pragma omp for schedule(dynamic, 1)
    for (ts::i64 g = 0; g < ngroups; ++g) {{
      if (__atomic_load_n(&failed, __ATOMIC_RELAXED)) continue;
      const ts::i64 b0 = g * group, nb = std::min<ts::i64>(group, nblocks - b0);
      for (ts::i64 j = 0; j < nb; ++j) {{
        TsBlock& B = Bs[j];
        const ts::i64 b = b0 + j;
        B.dx = L->block[0]; B.dy = L->block[1]; B.dz = L->block[2];
        B.gx = gx; B.gy = gy; B.gz = gz; B.L = L;
        B.bx = b % gx; B.by = (b / gx) % gy; B.bz = b / (gx * gy);
        B.shared = base + j * per_block;
        B.dyn = B.shared + (({static_bytes} + 15) / 16 * 16);
        B.dyn_bytes = dyn_bytes;
      }}
      try {{
        ts_run_group(P, Bs.data(), nb, st);
      }} catch (const TsIndexError& e) {{
        #pragma omp critical(ts_error)
        {{ if (!failed) {{ rec = e.r; failed = 1; }} }}
      }}
    }}
  }}"""


def _cpu_grid_entry(static_bytes) -> str:
    """Kernels with a grid barrier: every block keeps its threads' states and its shared memory;
    all blocks run (in parallel) until each stops at the barrier, then all resume."""
    return f"""  if (nblocks * nthreads > (1ll << 24)) {{
    L->error_code = 2;
    std::snprintf(L->error, sizeof L->error, "kernel '%s': a grid-synchronizing launch of %lld threads is more than "
                  "the CPU backend runs at once (2^24)", TS_KERNEL_NAME, (long long)(nblocks * nthreads));
    return 2;
  }}
  const size_t shared_size = (size_t)({static_bytes} + 16) / 16 * 16 + dyn_bytes + 32;
  std::vector<std::vector<TsState>> st(nblocks);
  std::vector<std::vector<int>> who(nblocks);
  std::vector<std::vector<char>> shm(nblocks);
  for (bool start = true;; start = false) {{
    #pragma omp parallel for schedule(dynamic, 1) if (nblocks > 1) \
        num_threads(L->num_threads > 0 ? L->num_threads : omp_get_max_threads())
    for (ts::i64 b = 0; b < nblocks; ++b) {{
      if (__atomic_load_n(&failed, __ATOMIC_RELAXED)) continue;
      if (start) shm[b].assign(shared_size, 0);
      TsBlock B;
      B.dx = L->block[0]; B.dy = L->block[1]; B.dz = L->block[2];
      B.gx = gx; B.gy = gy; B.gz = gz; B.L = L;
      char* base = (char*)(((std::uintptr_t)shm[b].data() + 15) & ~(std::uintptr_t)15);
      B.shared = base;
      B.dyn = base + (({static_bytes} + 15) / 16 * 16);
      B.dyn_bytes = dyn_bytes;
      B.bx = b % gx; B.by = (b / gx) % gy; B.bz = b / (gx * gy);
      try {{
        ts_run_block(P, B, st[b], who[b], start);
      }} catch (const TsIndexError& e) {{
        #pragma omp critical(ts_error)
        {{ if (!failed) {{ rec = e.r; failed = 1; }} }}
      }}
    }}
    if (failed) break;
    bool waiting = false;
    for (ts::i64 b = 0; b < nblocks; ++b)
      for (TsState& S : st[b])
        if (S.status == TS_WAIT_GRID) {{ S.status = TS_RUN; waiting = true; }}
    if (!waiting) break;
  }}"""


def _cpu_fission(params, decls, param_inits, body, root) -> str:
    """A kernel whose top-level grid-stride loop runs iteration-major across a block: each thread
    runs the statements before the loop, then iteration k of every thread's loop runs (in thread
    order) before iteration k+1, then each thread runs the statements after the loop."""
    fl = root.fission
    body_local = dict(fl["body_decls"])
    for cname in fl["body_vars"]:
        if cname in decls:
            body_local[cname] = decls[cname]
    state = {k: v for k, v in decls.items() if k not in body_local}
    unpack = [f"  {p.rsplit(' ', 1)[0]} const {p.rsplit(' ', 1)[1]} = P.{p.rsplit(' ', 1)[1]};" for p in params]
    unpack += root.fixed_lines
    L = ["struct TsState {\n  ts::i64 tx, ty, tz;"]
    L += ["  " + _decl(c, t) for c, t in state.items()]
    L.append("};")
    head = "(const TsParams& P, TsBlock& B, TsState& S, ts::i64 ts_tid)"
    refs = [f"  auto& {c} = S.{c};" for c in state]
    idx = ["  const ts::i64 ts_tx = S.tx, ts_ty = S.ty, ts_tz = S.tz;",
           "  (void)ts_tx; (void)ts_ty; (void)ts_tz; (void)ts_tid; (void)B;"]
    L.append("void ts_prefix" + head + " {")
    L += idx + unpack + refs + ["  " + p for p in param_inits] + body[:fl["split"]]
    L.append("}")
    L.append("inline __attribute__((always_inline)) void ts_body(const TsParams& P, TsBlock& B, TsState& S, "
             "ts::i64 ts_tid, ts::i64 ts_gl_i) {")
    L += idx + unpack + refs + ["  " + _decl(c, t) for c, t in body_local.items()] + fl["body"]
    L.append("}")
    L.append("void ts_suffix" + head + " {")
    L += idx + unpack + refs + body[fl["split"]:]
    L.append("}")
    L.append("""
// A group of consecutive blocks (their threads' states side by side): when thread i of the group
// starts at first + i with one step and stop for all, iteration k covers [first + k step,
// first + k step + threads) and the group walks memory in order.
void ts_run_group(const TsParams& P, TsBlock* Bs, ts::i64 nb, std::vector<TsState>& st) {
  const ts::i64 n = Bs[0].dx * Bs[0].dy * Bs[0].dz, m = nb * n;
  st.resize(m);
  TsState* s = st.data();
  for (ts::i64 j = 0; j < nb; ++j) {
    ts::i64 tid = 0;
    for (ts::i64 z = 0; z < Bs[j].dz; ++z)
      for (ts::i64 y = 0; y < Bs[j].dy; ++y)
        for (ts::i64 x = 0; x < Bs[j].dx; ++x, ++tid) {
          TsState& S = s[j * n + tid];
          S.tx = x; S.ty = y; S.tz = z;
          ts_prefix(P, Bs[j], S, tid);
        }
  }
  bool contiguous = s[0].ts_gl_step >= m;
  for (ts::i64 t = 1; t < m && contiguous; ++t)
    contiguous = s[t].ts_gl_first == s[0].ts_gl_first + t && s[t].ts_gl_step == s[0].ts_gl_step &&
                 s[t].ts_gl_stop == s[0].ts_gl_stop;
  if (contiguous) {
    const ts::i64 step = s[0].ts_gl_step, stop = s[0].ts_gl_stop;
    for (ts::i64 lo = s[0].ts_gl_first; lo < stop; lo += step) {
      for (ts::i64 j = 0; j < nb; ++j) {
        const ts::i64 base = lo + j * n;
        if (base >= stop) break;
        const ts::i64 count = std::min<ts::i64>(n, stop - base);
        TsBlock& B = Bs[j];
        TsState* sj = s + j * n;
        for (ts::i64 t = 0; t < count; ++t) ts_body(P, B, sj[t], t, base + t);
      }
    }
  } else {
    for (ts::i64 j = 0; j < nb; ++j) {
      TsState* sj = s + j * n;
      for (ts::i64 k = 0;; ++k) {
        bool any = false;
        for (ts::i64 t = 0; t < n; ++t) {
          TsState& S = sj[t];
          const ts::i64 i = S.ts_gl_first + k * S.ts_gl_step;
          if (S.ts_gl_step > 0 ? i < S.ts_gl_stop : i > S.ts_gl_stop) {
            any = true;
            ts_body(P, Bs[j], S, t, i);
          }
        }
        if (!any) break;
      }
    }
  }
  for (ts::i64 j = 0; j < nb; ++j)
    for (ts::i64 t = 0; t < n; ++t) ts_suffix(P, Bs[j], s[j * n + t], t);
}""")
    return "\n".join(L)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cpu_exchange(root) -> str:
    """For each site, what the threads that stopped there exchange (in lane/thread order)."""
    L = ["void ts_exchange(int site, TsState* st, const int* who, int n, TsBlock& B) {",
         "  (void)st; (void)who; (void)n; (void)B;", "  switch (site) {"]
    for s in root.sites:
        k = s.id
        L.append(f"    case {k}: {{")
        kind = s.kind
        if kind in ("syncthreads", "syncwarp", "yield", "grid_sync"):
            pass
        elif kind in ("syncthreads_count", "syncthreads_and", "syncthreads_or"):
            L.append(f"      ts::i32 c = 0; for (int j = 0; j < n; ++j) c += st[who[j]].ts_xa{k} != 0;")
            r = {"syncthreads_count": "c", "syncthreads_and": "(c == n)", "syncthreads_or": "(c > 0)"}[kind]
            L.append(f"      for (int j = 0; j < n; ++j) st[who[j]].ts_xr{k} = (ts::i32){r};")
        elif kind.startswith("shfl"):
            L.append("      unsigned present = 0; for (int j = 0; j < n; ++j) present |= 1u << (who[j] & 31);")
            L.append("      const int base = who[0] & ~31;")
            L.append("      for (int j = 0; j < n; ++j) {")
            L.append(f"        TsState& s = st[who[j]]; const int lane = who[j] & 31; const ts::i64 l = s.ts_xl{k};")
            src = {"shfl_sync": "(int)(l & 31)", "shfl_up_sync": "(int)(lane - l)", "shfl_down_sync": "(int)(lane + l)",
                   "shfl_xor_sync": "(int)(lane ^ (l & 31))"}[kind]
            L.append(f"        const int src = {src};")
            L.append(f"        s.ts_xr{k} = (src >= 0 && src < 32 && (present >> src & 1u)) ? st[base + src].ts_xa{k} "
                     f": s.ts_xa{k};")
            L.append("      }")
        elif kind in ("ballot_sync", "any_sync", "all_sync", "eq_sync", "activemask"):
            L.append("      unsigned bits = 0, present = 0;")
            L.append("      for (int j = 0; j < n; ++j) { present |= 1u << (who[j] & 31);")
            if kind != "activemask":
                L.append(f"        if (st[who[j]].ts_xa{k}) bits |= 1u << (who[j] & 31);")
            L.append("      }")
            L.append("      for (int j = 0; j < n; ++j) {")
            if kind == "activemask":
                L.append(f"        st[who[j]].ts_xr{k} = present;")
            else:
                L.append(f"        const unsigned m = (unsigned)st[who[j]].ts_xm{k} & present;")
                r = {"ballot_sync": "(bits & m)", "any_sync": "(ts::i32)((bits & m) != 0)",
                     "all_sync": "(ts::i32)((bits & m) == m)",
                     "eq_sync": "(ts::i32)((bits & m) == m || (bits & m) == 0)"}[kind]
                L.append(f"        st[who[j]].ts_xr{k} = {r};")
            L.append("      }")
        elif kind in ("match_any_sync", "match_all_sync"):
            L.append("      unsigned present = 0; for (int j = 0; j < n; ++j) present |= 1u << (who[j] & 31);")
            L.append("      for (int j = 0; j < n; ++j) {")
            L.append(f"        TsState& s = st[who[j]]; const unsigned m = (unsigned)s.ts_xm{k} & present; "
                     "unsigned same = 0;")
            L.append(f"        for (int q = 0; q < n; ++q) if ((m >> (who[q] & 31) & 1u) && "
                     f"st[who[q]].ts_xa{k} == s.ts_xa{k}) same |= 1u << (who[q] & 31);")
            L.append(f"        s.ts_xr{k} = " + ("same;" if kind == "match_any_sync" else "(same == m) ? m : 0u;"))
            L.append("      }")
        elif kind.endswith(("_reduce", "_inclusive_scan", "_exclusive_scan")):
            t = s.rtype
            op = {"sum": "ts::OpSum", "min": "ts::OpMin", "max": "ts::OpMax"}.get(s.op, s.op)
            L.append(f"      {op} op; {t.ctype} acc = st[who[0]].ts_xa{k};")
            if kind.endswith("_reduce"):
                L.append(f"      for (int j = 1; j < n; ++j) acc = op(acc, st[who[j]].ts_xa{k});")
                L.append(f"      for (int j = 0; j < n; ++j) st[who[j]].ts_xr{k} = acc;")
            elif kind.endswith("_inclusive_scan"):
                L.append(f"      st[who[0]].ts_xr{k} = acc;")
                L.append(f"      for (int j = 1; j < n; ++j) {{ acc = op(acc, st[who[j]].ts_xa{k}); "
                         f"st[who[j]].ts_xr{k} = acc; }}")
            else:
                L.append(f"      st[who[0]].ts_xr{k} = ts::Identity<{op}>::template get<{t.ctype}>();")
                L.append(f"      for (int j = 1; j < n; ++j) {{ st[who[j]].ts_xr{k} = acc; "
                         f"acc = op(acc, st[who[j]].ts_xa{k}); }}")
        L.append("      break;\n    }")
    L.append("    default: break;\n  }\n}")
    return "\n".join(L)
