// matmul, vecdot and MatmulPlan: the public entry points over the planning (matmul_plan.cpp) and
// the autotuning (matmul_autotune.cpp) of ops/matmul_plan.hpp.
#include "tessel/ops/matmul.hpp"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "ops/matmul_plan.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel {

// ---------------------------------------------------------------------------------------------
// names
MatmulEpilogue parse_matmul_epilogue(std::string_view name) {
  if (name == "none") return MatmulEpilogue::none;
  if (name == "relu") return MatmulEpilogue::relu;
  if (name == "gelu") return MatmulEpilogue::gelu;
  if (name == "gelu_tanh") return MatmulEpilogue::gelu_tanh;
  if (name == "relu_grad") return MatmulEpilogue::relu_grad;
  if (name == "gelu_grad") return MatmulEpilogue::gelu_grad;
  if (name == "gelu_tanh_grad") return MatmulEpilogue::gelu_tanh_grad;
  throw ValueError(fmt::format("matmul: unknown epilogue \"{}\" (expected none, relu, gelu, gelu_tanh, relu_grad, "
                               "gelu_grad or gelu_tanh_grad)", name));
}
const char* matmul_epilogue_name(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::none: return "none";
    case MatmulEpilogue::relu: return "relu";
    case MatmulEpilogue::gelu: return "gelu";
    case MatmulEpilogue::gelu_tanh: return "gelu_tanh";
    case MatmulEpilogue::relu_grad: return "relu_grad";
    case MatmulEpilogue::gelu_grad: return "gelu_grad";
    case MatmulEpilogue::gelu_tanh_grad: return "gelu_tanh_grad";
  }
  return "?";
}
bool is_matmul_grad_epilogue(MatmulEpilogue epilogue) {
  return epilogue == MatmulEpilogue::relu_grad || epilogue == MatmulEpilogue::gelu_grad ||
         epilogue == MatmulEpilogue::gelu_tanh_grad;
}
MatmulCompute parse_matmul_compute(std::string_view name) {
  if (name == "default") return MatmulCompute::default_;
  if (name == "fp32") return MatmulCompute::fp32;
  if (name == "tf32") return MatmulCompute::tf32;
  throw ValueError(fmt::format("matmul: unknown compute \"{}\" (expected default, fp32 or tf32)", name));
}
const char* matmul_compute_name(MatmulCompute compute) {
  switch (compute) {
    case MatmulCompute::default_: return "default";
    case MatmulCompute::fp32: return "fp32";
    case MatmulCompute::tf32: return "tf32";
  }
  return "?";
}

namespace detail {
struct MatmulPlanState {
  std::shared_ptr<MatmulPlanCore> core;
  Array a, b;
  MatmulOptions options;
};
}  // namespace detail

void clear_matmul_memory_cache() {
  detail::clear_matmul_winner_cache();
  detail::clear_matmul_plan_cache();
}

namespace {

// Integer products other than int8's (the int8 GEMM) have no BLAS. Each operand is split into
// 16-bit limbs (up to 16 bits, the value itself); a float64 GEMM of limbs is exact while k < 2^21
// (every product below 2^32, every sum below 2^53), and the limb products recombine with shifts in
// uint64, which wraps as the integer dtype does. O(m n + limbs (m k + k n)) memory.
Array exact_integer_matmul(const Array& a, const Array& b, const MatmulOptions& options, const Array& out,
                           const OptionalStream& stream) {
  const DType dtype = a.dtype();
  if (options.bias.defined() || options.epilogue != MatmulEpilogue::none || options.aux.defined() ||
      options.bias_grad.defined() || options.alpha != 1.0 || options.beta != 0.0) {
    throw DTypeError(fmt::format("matmul: {} products take no bias, epilogue, aux, bias_grad, alpha or beta",
                                 dtype_name(dtype)));
  }
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw ShapeError(fmt::format("matmul: operands must be at least 1-D, got a {} and b {}", shape_str(a.shape()),
                                 shape_str(b.shape())));
  }
  const int bits = 8 * static_cast<int>(itemsize(dtype));
  const int limbs = bits <= 16 ? 1 : bits / 16;
  auto limb = [&](const Array& x, int i) {
    return limbs == 1 ? astype(x, DType::float64, stream)
                      : astype(bitwise_and(right_shift(x, Scalar(16 * i), std::nullopt, stream), Scalar(0xFFFF),
                                           std::nullopt, stream),
                               DType::float64, stream);
  };
  const std::int64_t a_axis = a.ndim() - 1, b_axis = b.ndim() == 1 ? 0 : b.ndim() - 2;
  const std::int64_t k = a.dim(a_axis);
  constexpr std::int64_t kExactChunk = (std::int64_t{1} << 21) - 1;
  Array sum;  // uint64
  for (std::int64_t k0 = 0; k0 == 0 || k0 < k; k0 += kExactChunk) {
    const Slice part(k0, std::min(k, k0 + kExactChunk));
    const Array a_part = k > kExactChunk ? a.slice(a_axis, part) : a;
    const Array b_part = k > kExactChunk ? b.slice(b_axis, part) : b;
    std::vector<Array> a_limbs, b_limbs;
    for (int i = 0; i < limbs; ++i) {
      a_limbs.push_back(limb(a_part, i));
      b_limbs.push_back(limb(b_part, i));
    }
    for (int s = 0; s < limbs; ++s) {      // the limb products that land at bit 16 s
      for (int i = 0; i <= s; ++i) {
        const Array product = matmul(a_limbs[i], b_limbs[s - i], {}, Array(), stream);
        Array term = astype(astype(product, DType::int64, stream), DType::uint64, stream);
        if (s > 0) term = left_shift(term, Scalar(16 * s), std::nullopt, stream);
        sum = sum.defined() ? add(sum, term, std::nullopt, stream) : term;
      }
    }
  }
  const Array result = sum.dtype() == dtype ? sum : astype(sum, dtype, stream);
  if (!out.defined()) return result;
  if (out.shape() != result.shape()) {
    throw ShapeError(fmt::format("matmul: out has shape {} but the result of a {} @ b {} has shape {}",
                                 shape_str(out.shape()), shape_str(a.shape()), shape_str(b.shape()),
                                 shape_str(result.shape())));
  }
  if (out.dtype() != dtype) {
    throw DTypeError(fmt::format("matmul: out has dtype {} but the result is {}", dtype_name(out.dtype()),
                                 dtype_name(dtype)));
  }
  copyto(out, result, stream);
  return out;
}

}  // namespace

Array matmul(const Array& a, const Array& b, const MatmulOptions& options, const Array& out,
             const OptionalStream& stream) {
  TESSEL_RANGE("matmul", a, b, out, stream);
  if (a.defined() && b.defined() && a.dtype() == b.dtype() && is_integer(a.dtype()) && a.dtype() != DType::int8) {
    if (b.device() != a.device()) {
      throw DeviceError(fmt::format("matmul: a is on {} but b is on {}", a.device().str(), b.device().str()));
    }
    return exact_integer_matmul(a, b, options, out, stream);
  }
  detail::MatmulPrepared p = detail::prepare_matmul(a, b, options, out, stream);
  std::shared_ptr<detail::MatmulPlanCore> core;
  if (p.result.size() > 0 && p.problem.k > 0) {
    core = detail::cached_matmul_core(p);
    detail::autotune_on_first_use(*core, p);
  }
  detail::MatmulPlanCore dummy;
  dummy.device = p.device;
  return TESSEL_RESULT(detail::run_matmul_plan(core ? *core : dummy, core ? core->selected : 0, p));
}

Array vecdot(const Array& x1, const Array& x2, std::int64_t axis, const OptionalStream& stream) {
  TESSEL_RANGE("vecdot", x1, x2, stream);
  if (x1.ndim() == 0 || x2.ndim() == 0) {
    throw ShapeError(fmt::format("vecdot: operands must be at least 1-D, got {} and {}", shape_str(x1.shape()),
                                 shape_str(x2.shape())));
  }
  if (axis >= 0) {
    throw ValueError(fmt::format("vecdot: axis must be negative (counted from the end), got {}", axis));
  }
  const std::int64_t nd = std::max(x1.ndim(), x2.ndim());
  if (-axis > std::min(x1.ndim(), x2.ndim())) {
    throw ShapeError(fmt::format("vecdot: axis {} is out of range for shapes {} and {}", axis, shape_str(x1.shape()),
                                 shape_str(x2.shape())));
  }
  if (x1.dim(axis) != x2.dim(axis)) {
    throw ShapeError(fmt::format("vecdot: the contracted axis {} has size {} in x1 {} but {} in x2 {}", axis,
                                 x1.dim(axis), shape_str(x1.shape()), x2.dim(axis), shape_str(x2.shape())));
  }
  auto move_last = [&](const Array& x) {
    std::vector<std::int64_t> order;
    const std::int64_t ax = x.ndim() + axis;
    for (std::int64_t i = 0; i < x.ndim(); ++i) {
      if (i != ax) order.push_back(i);
    }
    order.push_back(ax);
    return x.permute(order);
  };
  (void)nd;
  Array u = move_last(x1), v = move_last(x2);
  if (is_complex(u.dtype())) u = conj(u, std::nullopt, stream);
  // (..., 1, K) @ (..., K, 1) -> (..., 1, 1)
  Array r = matmul(u.expand_dims(-2), v.expand_dims(-1), {}, Array(), stream);
  return TESSEL_RESULT(r.squeeze({-1, -2}));
}

// ---------------------------------------------------------------------------------------------
// MatmulPlan
MatmulPlan::MatmulPlan(const Array& a, const Array& b, const MatmulOptions& options, const OptionalStream& stream)
    : state_(std::make_unique<detail::MatmulPlanState>()) {
  detail::MatmulPrepared p = detail::prepare_matmul(a, b, options, Array(), stream, true);
  state_->core = detail::make_matmul_core(p);
  state_->a = a;
  state_->b = b;
  state_->options = options;
  TESSEL_LOG_INFO(fmt::format("matmul: plan {} with {} candidates, selected {}{}", p.signature,
                              state_->core->candidates.size(), state_->core->candidates[state_->core->selected].name,
                              state_->core->from_cache ? " (cached autotune)" : " (heuristic)"));
}
MatmulPlan::~MatmulPlan() = default;
MatmulPlan::MatmulPlan(MatmulPlan&&) noexcept = default;
MatmulPlan& MatmulPlan::operator=(MatmulPlan&&) noexcept = default;

const std::vector<MatmulCandidate>& MatmulPlan::candidates() const { return state_->core->candidates; }

const std::vector<MatmulCandidate>& MatmulPlan::autotune(int iterations) {
  detail::MatmulPrepared p = detail::prepare_matmul(state_->a, state_->b, state_->options, Array(), std::nullopt, true);
  if (p.result.size() > 0 && p.problem.k > 0) detail::autotune_matmul(*state_->core, p, iterations);
  return state_->core->candidates;
}

void MatmulPlan::pin(int candidate_index) {
  const auto count = static_cast<int>(state_->core->candidates.size());
  if (candidate_index < 0 || candidate_index >= count) {
    throw IndexError(fmt::format("MatmulPlan.pin: candidate {} is out of range (the plan has {})", candidate_index, count));
  }
  state_->core->selected = candidate_index;
  state_->core->from_cache = false;
  TESSEL_LOG_INFO(fmt::format("matmul: pinned {}", state_->core->candidates[candidate_index].name));
}

void MatmulPlan::pin(const std::string& candidate_name) {
  const auto& c = state_->core->candidates;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i].name == candidate_name) return pin(static_cast<int>(i));
  }
  std::string names;
  for (const auto& x : c) names += (names.empty() ? "" : ", ") + x.name;
  throw ValueError(fmt::format("MatmulPlan.pin: no candidate named \"{}\" (candidates: {})", candidate_name, names));
}

const MatmulCandidate& MatmulPlan::selected() const { return state_->core->candidates[state_->core->selected]; }
bool MatmulPlan::from_cache() const { return state_->core->from_cache; }
const std::string& MatmulPlan::cache_key() const { return state_->core->key; }

Array MatmulPlan::execute(const Array& a, const Array& b, const MatmulExecuteOptions& given, const Array& out,
                          const OptionalStream& stream) {
  TESSEL_RANGE("MatmulPlan.execute", a, b, out, stream);
  const MatmulOptions& planned = state_->options;
  for (const auto& [x, what] : {std::pair<const Array*, const char*>{&a, "a"}, {&b, "b"}}) {
    if (x->defined() && x->device() != state_->core->device) {
      throw DeviceError(fmt::format("MatmulPlan.execute: the plan is for {} but {} is on {}", state_->core->device.str(),
                                    what, x->device().str()));
    }
  }
  // The epilogue and compute mode select the plan's kernels: a different one is an error, never
  // silently the planned one.
  if (given.epilogue && *given.epilogue != planned.epilogue) {
    throw ValueError(fmt::format("MatmulPlan.execute: epilogue {} differs from the planned epilogue {} (make a new plan)",
                                 matmul_epilogue_name(*given.epilogue), matmul_epilogue_name(planned.epilogue)));
  }
  if (given.compute && *given.compute != planned.compute) {
    throw ValueError(fmt::format("MatmulPlan.execute: compute {} differs from the planned compute {} (make a new plan)",
                                 matmul_compute_name(*given.compute), matmul_compute_name(planned.compute)));
  }
  MatmulOptions options = planned;
  if (given.bias.defined()) options.bias = given.bias;
  if (given.c.defined()) options.c = given.c;
  if (given.aux.defined()) options.aux = given.aux;
  if (given.bias_grad.defined()) options.bias_grad = given.bias_grad;
  if (given.alpha) options.alpha = *given.alpha;
  if (given.beta) options.beta = *given.beta;
  if ((options.beta != 0.0) != (planned.beta != 0.0)) {
    throw ValueError(fmt::format("MatmulPlan.execute: beta={} but the plan was made with beta={} (a plan reads c "
                                 "either always or never; make a new plan)",
                                 options.beta, planned.beta));
  }
  detail::MatmulPrepared p = detail::prepare_matmul(a, b, options, out, stream, true);
  if (p.signature != state_->core->signature) {
    throw ValueError(fmt::format("MatmulPlan.execute: the arrays' layout differs from the planned one: planned {}, got {}",
                                 state_->core->signature, p.signature));
  }
  return TESSEL_RESULT(detail::run_matmul_plan(*state_->core, state_->core->selected, p));
}

Array MatmulPlan::execute(const Array& out, const OptionalStream& stream) {
  return execute(state_->a, state_->b, MatmulExecuteOptions{}, out, stream);
}

}  // namespace tessel
