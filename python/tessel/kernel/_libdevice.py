"""The half-precision functions (Numba's ``cuda.fp16``) and the libdevice functions (Numba's
``cuda.libdevice``) of the kernel language, as tables the compiler reads.

Each entry is ``name: (result, arguments, code)``: the result type (a dtype name, or a tuple of
them for the functions that return several values), the argument types (arguments are converted
to them, as Numba's typed signatures convert), and the C++ code: an expression over ``{0}``,
``{1}``, ... (the converted arguments), or for several results a statement that sets ``{r0}``,
``{r1}``, ...; a dict ``{"cuda": ..., "cpu": ...}`` where the two backends differ. The helpers
are runtime.h's (``ts::``). Numba's libdevice functions take and return ``int32``/``int64`` for
their unsigned variants too (``umax``, ``uint2float_rn``, ...): the bits are read as unsigned.
"""
from __future__ import annotations

H, F, D, I, L, S, B = "float16", "float32", "float64", "int32", "int64", "int16", "bool"

# ---- cuda.fp16 --------------------------------------------------------------------------------------
FP16 = {
    "hadd": (H, (H, H), "({0} + {1})"),
    "hsub": (H, (H, H), "({0} - {1})"),
    "hmul": (H, (H, H), "({0} * {1})"),
    "hdiv": (H, (H, H), "({0} / {1})"),
    "hneg": (H, (H,), "(-{0})"),
    "habs": (H, (H,), "ts::habs({0})"),
    "hfma": (H, (H, H, H), "ts::hfma({0}, {1}, {2})"),
    "hrcp": (H, (H,), "ts::f16(1.0f / float({0}))"),
    "heq": (B, (H, H), "({0} == {1})"),
    "hne": (B, (H, H), "ts::hne({0}, {1})"),
    "hge": (B, (H, H), "({0} >= {1})"),
    "hgt": (B, (H, H), "({0} > {1})"),
    "hle": (B, (H, H), "({0} <= {1})"),
    "hlt": (B, (H, H), "({0} < {1})"),
    "hmax": (H, (H, H), "ts::hmax({0}, {1})"),
    "hmin": (H, (H, H), "ts::hmin({0}, {1})"),
}
for _name, _fn in (("hsqrt", "sqrt"), ("hrsqrt", "rsqrt"), ("hexp", "exp"), ("hexp2", "exp2"), ("hexp10", "exp10"),
                   ("hlog", "log"), ("hlog2", "log2"), ("hlog10", "log10"), ("hsin", "sin"), ("hcos", "cos"),
                   ("hceil", "ceil"), ("hfloor", "floor"), ("hrint", "rint"), ("htrunc", "trunc")):
    FP16[_name] = (H, (H,), f"ts::f16(ts::{_fn}(float({{0}})))")

# ---- cuda.libdevice ---------------------------------------------------------------------------------
LIBDEVICE = {}


def _both(base, result, args, code_d, code_f=None, *, f_name=None):
    """base (float64) and base + "f" (float32) from one template over the types."""
    LIBDEVICE[base] = (result if result != "T" else D, tuple(D if a == "T" else a for a in args), code_d)
    LIBDEVICE[f_name or base + "f"] = (result if result != "T" else F, tuple(F if a == "T" else a for a in args),
                                       code_f if code_f is not None else code_d)


# float math with ts:: overloads for float and double
for _fn in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos", "cosh", "erf", "erfc", "exp",
            "exp2", "expm1", "fabs", "floor", "lgamma", "log", "log10", "log1p", "log2", "sin", "sinh", "sqrt",
            "tan", "tanh", "tgamma", "trunc", "rsqrt", "rcbrt", "exp10", "cospi", "sinpi", "erfinv", "erfcinv",
            "erfcx", "normcdf", "normcdfinv", "logb", "nearbyint", "rint", "round", "j0", "j1", "y0", "y1"):
    _both(_fn, "T", ("T",), f"ts::{_fn}({{0}})")
for _fn in ("atan2", "copysign", "fmod", "hypot", "pow", "fdim", "fmax", "fmin", "nextafter", "remainder"):
    _both(_fn, "T", ("T", "T"), f"ts::{_fn}({{0}}, {{1}})")
_both("fma", "T", ("T", "T", "T"), "ts::fma({0}, {1}, {2})")
_both("powi", "T", ("T", I), "ts::powi({0}, (int){1})")
_both("ldexp", "T", ("T", I), "ts::ldexp({0}, (int){1})")
_both("scalbn", "T", ("T", I), "ts::scalbn({0}, (int){1})")
_both("ilogb", I, ("T",), "((ts::i32)ts::ilogb({0}))")
_both("jn", "T", (I, "T"), "ts::jn((int){0}, {1})")
_both("yn", "T", (I, "T"), "ts::yn((int){0}, {1})")
_both("llrint", L, ("T",), "ts::f2i<ts::i64>(ts::rint({0}))")
_both("llround", L, ("T",), "ts::f2i<ts::i64>(ts::round({0}))")
# functions that return several values (libdevice's pointer arguments)
LIBDEVICE["frexp"] = ((D, I), (D,), "{r0} = ts::frexp({0}, &{r1});")
LIBDEVICE["frexpf"] = ((F, I), (F,), "{r0} = ts::frexp({0}, &{r1});")
LIBDEVICE["modf"] = ((D, D), (D,), "{r0} = ts::modf({0}, &{r1});")
LIBDEVICE["modff"] = ((F, F), (F,), "{r0} = ts::modf({0}, &{r1});")
LIBDEVICE["remquo"] = ((D, I), (D, D), "{r0} = ts::remquo({0}, {1}, &{r1});")
LIBDEVICE["remquof"] = ((F, I), (F, F), "{r0} = ts::remquo({0}, {1}, &{r1});")
LIBDEVICE["sincos"] = ((D, D), (D,), "ts::sincos({0}, &{r0}, &{r1});")
LIBDEVICE["sincosf"] = ((F, F), (F,), "ts::sincos({0}, &{r0}, &{r1});")
LIBDEVICE["sincospi"] = ((D, D), (D,), "ts::sincospi({0}, &{r0}, &{r1});")
LIBDEVICE["sincospif"] = ((F, F), (F,), "ts::sincospi({0}, &{r0}, &{r1});")
LIBDEVICE["fast_sincosf"] = ((F, F), (F,), {"cuda": "__sincosf({0}, &{r0}, &{r1});",
                                            "cpu": "ts::sincos({0}, &{r0}, &{r1});"})
# predicates (int32 results, as libdevice's)
for _d, _f, _fn in (("isnand", "isnanf", "isnan"), ("isinfd", "isinff", "isinf"), ("isfinited", "finitef", "isfinite"),
                    ("signbitd", "signbitf", "signbit")):
    LIBDEVICE[_d] = (I, (D,), f"((ts::i32)ts::{_fn}({{0}}))")
    LIBDEVICE[_f] = (I, (F,), f"((ts::i32)ts::{_fn}({{0}}))")
# fast (approximate) float32 functions: CUDA's intrinsics; the CPU computes them exactly
for _fn, _cuda, _cpu in (("fast_cosf", "__cosf", "cos"), ("fast_exp10f", "__exp10f", "exp10"),
                         ("fast_expf", "__expf", "exp"), ("fast_log10f", "__log10f", "log10"),
                         ("fast_log2f", "__log2f", "log2"), ("fast_logf", "__logf", "log"),
                         ("fast_sinf", "__sinf", "sin"), ("fast_tanf", "__tanf", "tan")):
    LIBDEVICE[_fn] = (F, (F,), {"cuda": f"{_cuda}({{0}})", "cpu": f"ts::{_cpu}({{0}})"})
LIBDEVICE["fast_powf"] = (F, (F, F), {"cuda": "__powf({0}, {1})", "cpu": "ts::pow({0}, {1})"})
LIBDEVICE["fast_fdividef"] = (F, (F, F), {"cuda": "__fdividef({0}, {1})", "cpu": "({0} / {1})"})
LIBDEVICE["saturatef"] = (F, (F,), "ts::saturate({0})")
# integers
LIBDEVICE.update({
    "abs": (I, (I,), "ts::wabs({0})"),
    "llabs": (L, (L,), "ts::wabs({0})"),
    "brev": (I, (I,), "((ts::i32)ts::brev((ts::u32){0}))"),
    "brevll": (L, (L,), "((ts::i64)ts::brev((ts::u64){0}))"),
    "clz": (I, (I,), "((ts::i32)ts::clz((ts::u32){0}))"),
    "clzll": (I, (L,), "((ts::i32)ts::clz((ts::u64){0}))"),
    "ffs": (I, (I,), "((ts::i32)ts::ffs((ts::u32){0}))"),
    "ffsll": (I, (L,), "((ts::i32)ts::ffs((ts::u64){0}))"),
    "popc": (I, (I,), "((ts::i32)ts::popc((ts::u32){0}))"),
    "popcll": (I, (L,), "((ts::i32)ts::popc((ts::u64){0}))"),
    "byte_perm": (I, (I, I, I), "((ts::i32)ts::byte_perm((ts::u32){0}, (ts::u32){1}, (ts::u32){2}))"),
    "hadd": (I, (I, I), "ts::ihadd({0}, {1})"),
    "rhadd": (I, (I, I), "ts::irhadd({0}, {1})"),
    "uhadd": (I, (I, I), "((ts::i32)ts::uhadd((ts::u32){0}, (ts::u32){1}))"),
    "urhadd": (I, (I, I), "((ts::i32)ts::urhadd((ts::u32){0}, (ts::u32){1}))"),
    "max": (I, (I, I), "ts::vmax<ts::i32>({0}, {1})"),
    "min": (I, (I, I), "ts::vmin<ts::i32>({0}, {1})"),
    "umax": (I, (I, I), "((ts::i32)ts::vmax<ts::u32>((ts::u32){0}, (ts::u32){1}))"),
    "umin": (I, (I, I), "((ts::i32)ts::vmin<ts::u32>((ts::u32){0}, (ts::u32){1}))"),
    "llmax": (L, (L, L), "ts::vmax<ts::i64>({0}, {1})"),
    "llmin": (L, (L, L), "ts::vmin<ts::i64>({0}, {1})"),
    "ullmax": (L, (L, L), "((ts::i64)ts::vmax<ts::u64>((ts::u64){0}, (ts::u64){1}))"),
    "ullmin": (L, (L, L), "((ts::i64)ts::vmin<ts::u64>((ts::u64){0}, (ts::u64){1}))"),
    "mul24": (I, (I, I), "ts::mul24({0}, {1})"),
    "umul24": (I, (I, I), "((ts::i32)ts::umul24((ts::u32){0}, (ts::u32){1}))"),
    "mulhi": (I, (I, I), "ts::mulhi({0}, {1})"),
    "umulhi": (I, (I, I), "((ts::i32)ts::umulhi((ts::u32){0}, (ts::u32){1}))"),
    "mul64hi": (L, (L, L), "ts::mul64hi({0}, {1})"),
    "umul64hi": (L, (L, L), "((ts::i64)ts::umul64hi((ts::u64){0}, (ts::u64){1}))"),
    "sad": (I, (I, I, I), "((ts::i32)ts::sad({0}, {1}, (ts::u32){2}))"),
    "usad": (I, (I, I, I), "((ts::i32)ts::usad((ts::u32){0}, (ts::u32){1}, (ts::u32){2}))"),
    # bits
    "float_as_int": (I, (F,), "ts::bitcast<ts::i32>({0})"),
    "int_as_float": (F, (I,), "ts::bitcast<float>({0})"),
    "double_as_longlong": (L, (D,), "ts::bitcast<ts::i64>({0})"),
    "longlong_as_double": (D, (L,), "ts::bitcast<double>({0})"),
    "double2hiint": (I, (D,), "((ts::i32)(ts::u32)(ts::bitcast<ts::u64>({0}) >> 32))"),
    "double2loint": (I, (D,), "((ts::i32)(ts::u32)ts::bitcast<ts::u64>({0}))"),
    "hiloint2double": (D, (I, I), "ts::bitcast<double>(((ts::u64)(ts::u32){0} << 32) | (ts::u64)(ts::u32){1})"),
    "float2half_rn": (S, (F,), "((ts::i16)ts::f16({0}).bits)"),
    "half2float": (F, (S,), "float(ts::hraw((ts::u16){0}))"),
})

# conversions and arithmetic with a rounding mode: _rn (to nearest), _rd (down), _ru (up), _rz (toward
# zero). CUDA has an intrinsic for each; the CPU rounds to integers with rint/floor/ceil/trunc and
# runs the others with the FPU's rounding mode set.
_MODES = {"rn": 0, "rd": 1, "ru": 2, "rz": 3}
_TO_INT = {"rn": "ts::rint", "rd": "ts::floor", "ru": "ts::ceil", "rz": "ts::trunc"}
for _m, _k in _MODES.items():
    for _src, _t in (("double", D), ("float", F)):
        for _dst, _res, _ct, _cast in (("int", I, "ts::i32", ""), ("ll", L, "ts::i64", ""),
                                       ("uint", I, "ts::u32", "(ts::i32)"), ("ull", L, "ts::u64", "(ts::i64)")):
            LIBDEVICE[f"{_src}2{_dst}_{_m}"] = (_res, (_t,), f"({_cast}ts::f2i<{_ct}>({_TO_INT[_m]}({{0}})))")
    for _name, _res, _arg, _ct, _pre in (("double2float", F, D, "float", ""), ("int2float", F, I, "float", ""),
                                         ("uint2float", F, I, "float", "(ts::u32)"),
                                         ("ll2float", F, L, "float", ""), ("ull2float", F, L, "float", "(ts::u64)"),
                                         ("ll2double", D, L, "double", ""), ("ull2double", D, L, "double", "(ts::u64)")):
        LIBDEVICE[f"{_name}_{_m}"] = (_res, (_arg,), {
            "cuda": f"__{_name}_{_m}({_pre}{{0}})",
            "cpu": f"(({_ct})({_pre}{{0}}))" if _m == "rn" else f"ts::rconv<{_ct}, {_k}>({_pre}{{0}})"})
    for _op, _fn in (("add", "radd"), ("sub", "rsub"), ("mul", "rmul"), ("div", "rdiv")):
        for _p, _t in (("f", F), ("d", D)):
            if _p == "d" and _op == "sub":
                continue   # libdevice has no __nv_dsub_*
            _sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[_op]
            LIBDEVICE[f"{_p}{_op}_{_m}"] = (_t, (_t, _t), {
                "cuda": f"__{_p}{_op}_{_m}({{0}}, {{1}})",
                "cpu": f"({{0}} {_sym} {{1}})" if _m == "rn" else f"ts::{_fn}<{_k}>({{0}}, {{1}})"})
    for _p, _t, _one in (("f", F, "1.0f"), ("d", D, "1.0")):
        LIBDEVICE[f"{_p}rcp_{_m}"] = (_t, (_t,), {
            "cuda": f"__{_p}rcp_{_m}({{0}})",
            "cpu": f"({_one} / {{0}})" if _m == "rn" else f"ts::rdiv<{_k}>(({_t == F and 'float' or 'double'}){_one}, {{0}})"})
        LIBDEVICE[f"{_p}sqrt_{_m}"] = (_t, (_t,), {
            "cuda": f"__{_p}sqrt_{_m}({{0}})",
            "cpu": "ts::sqrt({0})" if _m == "rn" else f"ts::rsqrt_r<{_k}>({{0}})"})
    LIBDEVICE[f"fmaf_{_m}"] = (F, (F, F, F), {"cuda": f"__fmaf_{_m}({{0}}, {{1}}, {{2}})",
                                            "cpu": "ts::fma({0}, {1}, {2})" if _m == "rn" else
                                            f"ts::rfma<{_k}>({{0}}, {{1}}, {{2}})"})
    LIBDEVICE[f"fma_{_m}"] = (D, (D, D, D), {"cuda": f"__fma_{_m}({{0}}, {{1}}, {{2}})",
                                           "cpu": "ts::fma({0}, {1}, {2})" if _m == "rn" else
                                           f"ts::rfma<{_k}>({{0}}, {{1}}, {{2}})"})
LIBDEVICE["int2double_rn"] = (D, (I,), "((double)({0}))")
LIBDEVICE["uint2double_rn"] = (D, (I,), "((double)(ts::u32)({0}))")
LIBDEVICE["frsqrt_rn"] = (F, (F,), {"cuda": "__frsqrt_rn({0})", "cpu": "((float)(1.0 / ts::sqrt((double){0})))"})

# Names of Numba's libdevice module that tessel does not provide, with the reason.
NOT_PROVIDED = {
    "nan": "Numba excludes it too (its argument is undocumented); use math.nan",
    "nanf": "Numba excludes it too (its argument is undocumented); use math.nan",
}
# Common spellings that are not libdevice's: the error says what to use.
ALIASES = {
    "isnan": "isnand (float64) or isnanf (float32)",
    "isinf": "isinfd (float64) or isinff (float32)",
    "isfinite": "isfinited (float64) or finitef (float32)",
    "signbit": "signbitd (float64) or signbitf (float32)",
}
