// CUDA elementwise ops: one Expr tree per (op, dtypes, scalar operands), lowered once to an
// elementwise spec and kept in a jit::ElementwiseLauncher per spec key; the launcher chooses the
// layout, the index width and the launch shape, and compiles through the jit caches.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/elementwise.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::backend::cuda {
namespace {

using jit::Expr;

// Helpers the generated kernels need beyond tessel_device.cuh, and the op list's formulas
// (TESSEL_UNARY_FORMULAS) as device functions of the same names. `T` (a formula's `C`) is the
// body's compute type (float for float16/bfloat16).
// Guarded so that several generated kernels can share one program (the NVRTC test does).
constexpr const char* kPreamble = R"(
#ifndef TESSEL_OPS_PREAMBLE
#define TESSEL_OPS_PREAMBLE
namespace tessel_ops {
template <class T> __device__ __forceinline__ T wrap_add(T a, T b) { return (T)((unsigned long long)a + (unsigned long long)b); }
template <class T> __device__ __forceinline__ T wrap_sub(T a, T b) { return (T)((unsigned long long)a - (unsigned long long)b); }
template <class T> __device__ __forceinline__ T wrap_mul(T a, T b) { return (T)((unsigned long long)a * (unsigned long long)b); }
template <class T> __device__ __forceinline__ T wrap_neg(T a) { return (T)(0ULL - (unsigned long long)a); }
template <class T> __device__ __forceinline__ T abs_int(T a) { return a < T(0) ? wrap_neg(a) : a; }
template <class T> __device__ __forceinline__ T floor_divide_float(T a, T b) {
  if (isinf(a) || isinf(b)) return floor(a / b);
  if (b == T(0)) return a / b;
  const T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  if (div == T(0)) return copysign(T(0), a / b);
  T fl = floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
}
template <class T> __device__ __forceinline__ T power_int(T a, T b) {
  if (b < T(0)) {  // NumPy raises; we return 1 / a truncated
    if (a == T(1)) return T(1);
    if (a == T(-1)) return ((unsigned long long)b & 1ULL) ? T(-1) : T(1);
    return T(0);
  }
  unsigned long long r = 1, base = (unsigned long long)a, e = (unsigned long long)b;
  while (e) { if (e & 1ULL) r *= base; base *= base; e >>= 1; }
  return (T)r;
}
template <class T> __device__ __forceinline__ T shift_left(T a, T b) {
  if (b < T(0) || (unsigned long long)b >= sizeof(T) * 8) return T(0);
  return (T)((unsigned long long)a << (unsigned long long)b);
}
template <class T> __device__ __forceinline__ T shift_right(T a, T b) {
  if (b < T(0) || (unsigned long long)b >= sizeof(T) * 8) return a < T(0) ? T(-1) : T(0);
  return (T)(a >> b);
}
// nextafter of float16 (<10, -14, 15>) and bfloat16 (<7, -126, 127>) values widened to float:
// M stored mantissa bits, smallest normal exponent EMIN, largest exponent EMAX (as on the CPU).
template <int M, int EMIN, int EMAX> __device__ __forceinline__ float next_toward(float x, float y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  if (x == 0.0f) return copysignf(ldexpf(1.0f, EMIN - M), y);
  const bool up = y > x;
  if (isinf(x)) return copysignf(ldexpf(2.0f - ldexpf(1.0f, -M), EMAX), x);
  const float a = fabsf(x);
  int e = 0;
  frexpf(a, &e);
  int exponent = e - 1 > EMIN ? e - 1 : EMIN;
  if (up != (x > 0.0f) && a == ldexpf(1.0f, exponent) && exponent > EMIN) exponent -= 1;
  const float step = ldexpf(1.0f, exponent - M);
  const float r = up ? x + step : x - step;
  return r == 0.0f ? copysignf(0.0f, x) : r;  // from the smallest subnormal to zero of x's sign
}
template <class T> __device__ __forceinline__ tessel::complex<T> conj(tessel::complex<T> z) { return {z.re, -z.im}; }
template <class T> __device__ __forceinline__ T cabs(tessel::complex<T> z) { return hypot(z.re, z.im); }
using tessel::isnan;  // the formulas' isnan: false for integers, as the CPU loops' std::isnan
)"
#define TESSEL_UNARY_FORMULA(NAME, EXPR) \
  "template <class C> __device__ __forceinline__ C " #NAME "(C x) { return " #EXPR "; }\n"
    TESSEL_UNARY_FORMULAS(TESSEL_UNARY_FORMULA)
#undef TESSEL_UNARY_FORMULA
    R"(}  // namespace tessel_ops
#endif
)";

// The C++ type of a value of `dtype` in the body (float16/bfloat16 are widened to float).
std::string body_type(DType dtype) {
  if (dtype == DType::float16 || dtype == DType::bfloat16) return "float";
  return cuda_type_name(dtype);
}

Expr fmt(const std::string& pattern, std::vector<Expr> args, DType dtype) {
  return Expr::format(pattern, std::move(args), dtype);
}

// The expression of one op over inputs of dtype `ct` (where: input 0 is bool). `rt` is the
// result dtype the ops layer chose.
}  // namespace

Expr op_expression(ElementwiseOp op, const std::vector<Expr>& x, DType rt) {
  const DType ct = op == ElementwiseOp::where ? x[1].dtype() : x[0].dtype();
  const std::string T = body_type(ct);
  const bool b = is_bool(ct), i = is_integer(ct), f = is_floating(ct), c = is_complex(ct);
  auto un = [&](const std::string& p) { return fmt(p, {x[0]}, rt); };
  auto bin = [&](const std::string& p) { return fmt(p, {x[0], x[1]}, rt); };
  // Real math by its CUDA name; complex through tessel::cx (tessel_device.cuh).
  auto math = [&](const std::string& f) { return un((c ? "tessel::cx::" + f : f) + "({0})"); };
  const std::string to_bool0 = "tessel::cast<bool>({0})", to_bool1 = "tessel::cast<bool>({1})";
  switch (op) {
    case ElementwiseOp::add: return bin(b ? "({0} || {1})" : i ? "tessel_ops::wrap_add({0}, {1})" : "({0} + {1})");
    case ElementwiseOp::subtract: return bin(i ? "tessel_ops::wrap_sub({0}, {1})" : "({0} - {1})");
    case ElementwiseOp::multiply: return bin(b ? "({0} && {1})" : i ? "tessel_ops::wrap_mul({0}, {1})" : "({0} * {1})");
    case ElementwiseOp::divide: return bin("({0} / {1})");
    case ElementwiseOp::floor_divide:
      return bin(i ? "tessel::floor_divide_int({0}, {1})" : "tessel_ops::floor_divide_float({0}, {1})");
    case ElementwiseOp::remainder:
      return bin(i ? "tessel::remainder_int({0}, {1})" : "tessel::remainder_float({0}, {1})");
    case ElementwiseOp::power:
      return bin(i ? "tessel_ops::power_int({0}, {1})" : c ? "tessel::cx::pow({0}, {1})" : "pow({0}, {1})");
    case ElementwiseOp::equal: return bin("({0} == {1})");
    case ElementwiseOp::not_equal: return bin("({0} != {1})");
    case ElementwiseOp::less: return bin("({0} < {1})");
    case ElementwiseOp::less_equal: return bin("({0} <= {1})");
    case ElementwiseOp::greater: return bin("({0} > {1})");
    case ElementwiseOp::greater_equal: return bin("({0} >= {1})");
    case ElementwiseOp::logical_and: return bin("(" + to_bool0 + " && " + to_bool1 + ")");
    case ElementwiseOp::logical_or: return bin("(" + to_bool0 + " || " + to_bool1 + ")");
    case ElementwiseOp::logical_xor: return bin("(" + to_bool0 + " != " + to_bool1 + ")");
    case ElementwiseOp::bitwise_and: return bin("(" + T + ")({0} & {1})");
    case ElementwiseOp::bitwise_or: return bin("(" + T + ")({0} | {1})");
    case ElementwiseOp::bitwise_xor: return bin("(" + T + ")({0} ^ {1})");
    case ElementwiseOp::left_shift: return bin("tessel_ops::shift_left({0}, {1})");
    case ElementwiseOp::right_shift: return bin("tessel_ops::shift_right({0}, {1})");
    case ElementwiseOp::minimum: return bin("tessel::minimum({0}, {1})");
    case ElementwiseOp::maximum: return bin("tessel::maximum({0}, {1})");
    case ElementwiseOp::fmin: return bin("tessel::fmin({0}, {1})");
    case ElementwiseOp::nextafter:
      return bin(ct == DType::float16    ? "tessel_ops::next_toward<10, -14, 15>({0}, {1})"
                 : ct == DType::bfloat16 ? "tessel_ops::next_toward<7, -126, 127>({0}, {1})"
                 : ct == DType::float32  ? "nextafterf({0}, {1})"
                                         : "nextafter({0}, {1})");
    case ElementwiseOp::fmax: return bin("tessel::fmax({0}, {1})");
    case ElementwiseOp::arctan2: return bin("atan2({0}, {1})");
    // CUDA's hypot and copysign give C99's special values (hypot(inf, NaN) = inf, NaN sign bits).
    case ElementwiseOp::hypot: return bin("hypot({0}, {1})");
    case ElementwiseOp::copysign: return bin("copysign({0}, {1})");
    case ElementwiseOp::logaddexp: return bin("tessel::cmath::logaddexp({0}, {1})");
    case ElementwiseOp::signbit: return un("(copysign((" + T + ")1, {0}) < (" + T + ")0)");
    case ElementwiseOp::negative: return un(i ? "tessel_ops::wrap_neg({0})" : "(-{0})");
    case ElementwiseOp::positive: return un("({0})");
    case ElementwiseOp::abs:
      return un(c ? "tessel_ops::cabs({0})" : f ? "fabs({0})" : (i && is_signed_integer(ct)) ? "tessel_ops::abs_int({0})" : "({0})");
    case ElementwiseOp::logical_not: return un("(!" + to_bool0 + ")");
    case ElementwiseOp::bitwise_not: return un(b ? "(!{0})" : "(" + T + ")(~{0})");
    case ElementwiseOp::square: return un(i ? "tessel_ops::wrap_mul({0}, {0})" : "({0} * {0})");
    case ElementwiseOp::reciprocal: return un("(" + T + "(1) / {0})");
    case ElementwiseOp::sign: return un("tessel::sign({0})");
    case ElementwiseOp::exp: return math("exp");
    case ElementwiseOp::exp2: return math("exp2");
    case ElementwiseOp::expm1: return math("expm1");
    case ElementwiseOp::log: return math("log");
    case ElementwiseOp::log2: return math("log2");
    case ElementwiseOp::log10: return math("log10");
    case ElementwiseOp::log1p: return math("log1p");
    case ElementwiseOp::sqrt: return math("sqrt");
    case ElementwiseOp::rsqrt: return un("rsqrt({0})");
    case ElementwiseOp::cbrt: return un("cbrt({0})");
    case ElementwiseOp::sin: return math("sin");
    case ElementwiseOp::cos: return math("cos");
    case ElementwiseOp::tan: return math("tan");
    case ElementwiseOp::arcsin: return math("asin");
    case ElementwiseOp::arccos: return math("acos");
    case ElementwiseOp::arctan: return math("atan");
    case ElementwiseOp::sinh: return math("sinh");
    case ElementwiseOp::cosh: return math("cosh");
    case ElementwiseOp::tanh: return math("tanh");
    case ElementwiseOp::arcsinh: return math("asinh");
    case ElementwiseOp::arccosh: return math("acosh");
    case ElementwiseOp::arctanh: return math("atanh");
#define TESSEL_UNARY_FORMULA(NAME, EXPR) \
  case ElementwiseOp::NAME: return un("tessel_ops::" #NAME "({0})");
    TESSEL_UNARY_FORMULAS(TESSEL_UNARY_FORMULA)
#undef TESSEL_UNARY_FORMULA
    case ElementwiseOp::erf: return un("erf({0})");
    case ElementwiseOp::floor: return un(f ? "floor({0})" : "({0})");
    case ElementwiseOp::ceil: return un(f ? "ceil({0})" : "({0})");
    case ElementwiseOp::trunc: return un(f ? "trunc({0})" : "({0})");
    case ElementwiseOp::round: return un(f ? "rint({0})" : c ? "tessel::cx::rint({0})" : "({0})");  // half to even
    case ElementwiseOp::isnan: return un("tessel::isnan({0})");
    case ElementwiseOp::isinf: return un("tessel::isinf({0})");
    case ElementwiseOp::isfinite: return un("tessel::isfinite({0})");
    case ElementwiseOp::real: return un(c ? "({0}).re" : "({0})");
    case ElementwiseOp::imag: return un(c ? "({0}).im" : "(" + T + ")(0)");
    case ElementwiseOp::conj: return un(c ? "tessel_ops::conj({0})" : "({0})");
    case ElementwiseOp::angle: return un(c ? "atan2(({0}).im, ({0}).re)" : "atan2((" + T + ")(0), {0})");
    case ElementwiseOp::where: return fmt("(tessel::cast<bool>({0}) ? {1} : {2})", {x[0], x[1], x[2]}, rt);
    default: break;
  }
  throw DTypeError(std::string("elementwise (cuda): no expression for ") + op_name(op));
}

const char* elementwise_preamble() { return kPreamble; }

namespace {

Expr build(ElementwiseOp op, const std::vector<DType>& in_dtypes, DType rt) {
  std::vector<Expr> x;
  for (std::size_t k = 0; k < in_dtypes.size(); ++k) x.push_back(Expr::input(static_cast<int>(k), in_dtypes[k]));
  return op_expression(op, x, rt);
}

// Everything the spec depends on. Layout, rank, index width and unroll are the launcher's
// choice per launch.
struct SpecKey {
  ElementwiseOp op;
  DType in[3];
  int arity;
  DType out;
  unsigned scalar_mask;  // bit k: input k is a by-value scalar
  bool operator==(const SpecKey& o) const {
    return op == o.op && arity == o.arity && out == o.out && scalar_mask == o.scalar_mask && in[0] == o.in[0] &&
           in[1] == o.in[1] && in[2] == o.in[2];
  }
};
struct SpecKeyHash {
  std::size_t operator()(const SpecKey& k) const {
    std::size_t h = static_cast<std::size_t>(k.op);
    for (DType d : k.in) h = h * 31 + static_cast<std::size_t>(d);
    h = (h * 31 + static_cast<std::size_t>(k.out)) * 7 + static_cast<std::size_t>(k.arity);
    return h * 31 + k.scalar_mask;
  }
};

jit::ElementwiseSpec make_spec(ElementwiseOp op, const std::vector<DType>& in_dtypes, DType out_dtype,
                               unsigned scalar_mask = 0) {
  Expr e = build(op, in_dtypes, out_dtype);
  std::vector<bool> is_scalar;
  for (std::size_t k = 0; k < in_dtypes.size(); ++k) is_scalar.push_back(((scalar_mask >> k) & 1u) != 0);
  jit::ElementwiseSpec spec =
      jit::lower_expressions(std::string("tessel_") + op_name(op), in_dtypes, is_scalar, {e}, {out_dtype});
  spec.preamble = kPreamble;
  return spec;
}

// One launcher per spec key, built on first use and kept for the process. The same op back to back
// (a loop of tiny ops) finds its launcher with one comparison: entries are never removed, so the
// pointer stays valid.
const jit::ElementwiseLauncher& launcher_for(const SpecKey& key) {
  thread_local SpecKey last_key{};
  thread_local const jit::ElementwiseLauncher* last = nullptr;
  if (last != nullptr && last_key == key) return *last;
  static std::mutex mutex;
  static auto* launchers = new std::unordered_map<SpecKey, std::unique_ptr<jit::ElementwiseLauncher>, SpecKeyHash>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = launchers->find(key);
  if (it == launchers->end()) {
    const std::vector<DType> in_dtypes(key.in, key.in + key.arity);
    it = launchers->emplace(key, std::make_unique<jit::ElementwiseLauncher>(
                                     make_spec(key.op, in_dtypes, key.out, key.scalar_mask)))
             .first;
  }
  last_key = key;
  last = it->second.get();
  return *last;
}

}  // namespace

std::string elementwise_source(ElementwiseOp op, const std::vector<DType>& input_dtypes, DType out_dtype,
                               unsigned scalar_mask, int unroll) {
  jit::ElementwiseSpec spec = make_spec(op, input_dtypes, out_dtype, scalar_mask);
  spec.unroll = unroll;
  return jit::generate_elementwise_source(spec);
}

void elementwise(ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const* scalars,
                 const DType* in_dtypes, const Array& out, const Stream& stream) {
  SpecKey key{op, {DType::bool_, DType::bool_, DType::bool_}, count, out.dtype(), 0};
  // Operands in the spec's order: the output, then the inputs; scalars are their value's bytes in
  // the input's dtype, passed by value. At most 3 inputs.
  constexpr int kMaxOperands = 4;
  jit::ElementwiseArgView views[kMaxOperands];
  alignas(16) unsigned char scalar_bytes[3][16] = {};
  views[0] = {out.data(), out.strides().data(), out.strides().size(), nullptr};
  for (int k = 0; k < count; ++k) {
    key.in[k] = in_dtypes[k];
    if (scalars[k]) {
      key.scalar_mask |= 1u << k;
      scalars[k]->store(in_dtypes[k], scalar_bytes[k]);
      views[k + 1] = {nullptr, nullptr, 0, scalar_bytes[k]};
    } else {
      views[k + 1] = {inputs[k]->data(), inputs[k]->strides().data(), inputs[k]->strides().size(), nullptr};
    }
  }
  launcher_for(key).launch(out.shape(), views, static_cast<std::size_t>(count) + 1, out.device(), stream);
}

}  // namespace tessel::backend::cuda
