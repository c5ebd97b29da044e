// matmul planning: validation with NumPy matmul semantics, normalization of the operands into a
// backend::MatmulProblem (no copies when a matrix has a unit stride in either dimension and its
// batch dimensions collapse to one stride), the candidate list of a layout, matmul()'s plan cache,
// and running a candidate.
#include "ops/matmul_plan.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "ops/op_stream.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::detail {
namespace {

constexpr const char* kOp = "matmul";

bool supported_dtype(DType dtype) {
  switch (dtype) {
    case DType::float16: case DType::bfloat16: case DType::float32: case DType::float64:
    case DType::complex64: case DType::complex128: case DType::int8:
      return true;
    default:
      return false;
  }
}

std::string layout_str(const Array& x) {
  if (!x.defined()) return "-";
  const auto address = reinterpret_cast<std::uintptr_t>(x.data());
  std::uintptr_t align = 16;
  while (align > 1 && address % align != 0) align /= 2;
  return fmt::format("{}{}s{}a{}", dtype_name(x.dtype()), shape_str(x.shape()), shape_str(x.strides()), align);
}

// The unit-stride form of an r x c matrix with strides (rs, cs), or nullopt when it has none.
std::optional<backend::MatmulOperand> matrix_operand(std::int64_t r, std::int64_t c, std::int64_t rs, std::int64_t cs) {
  backend::MatmulOperand op;
  if ((c <= 1 || cs == 1) && (r <= 1 || rs >= std::max<std::int64_t>(1, c))) {
    op.col_stride = 1;
    op.row_stride = r <= 1 ? std::max<std::int64_t>(1, c) : rs;
    return op;
  }
  if ((r <= 1 || rs == 1) && (c <= 1 || cs >= std::max<std::int64_t>(1, r))) {
    op.row_stride = 1;
    op.col_stride = c <= 1 ? std::max<std::int64_t>(1, r) : cs;
    return op;
  }
  return std::nullopt;
}

// One stride for all batch dimensions (0: broadcast), or nullopt when they do not collapse.
std::optional<std::int64_t> batch_stride(const Shape& shape, const Strides& strides, bool allow_zero) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (size, stride) of batch dims > 1
  for (std::size_t i = 0; i + 2 < shape.size(); ++i) {
    if (shape[i] > 1) dims.emplace_back(shape[i], strides[i]);
  }
  if (dims.empty()) return 0;
  const bool all_zero = std::all_of(dims.begin(), dims.end(), [](auto d) { return d.second == 0; });
  if (all_zero) return allow_zero ? std::optional<std::int64_t>(0) : std::nullopt;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].second <= 0) return std::nullopt;
    if (i + 1 < dims.size() && dims[i].second != dims[i + 1].second * dims[i + 1].first) return std::nullopt;
  }
  return dims.back().second;
}

// The operand of x (batch... x r x c), copying x to a contiguous array when its layout has no
// unit-stride form.
backend::MatmulOperand operand_of(Array& x, const Stream& stream) {
  const std::int64_t nd = x.ndim();
  auto try_layout = [&]() -> std::optional<backend::MatmulOperand> {
    auto op = matrix_operand(x.shape()[nd - 2], x.shape()[nd - 1], x.strides()[nd - 2], x.strides()[nd - 1]);
    auto bs = batch_stride(x.shape(), x.strides(), true);
    if (!op || !bs) return std::nullopt;
    op->batch_stride = *bs;
    op->data = x.data();
    return op;
  };
  if (auto op = try_layout()) return *op;
  x = x.copy(stream);
  return *try_layout();
}

// True when x (batch... x m x n) can be written directly as a row-major D.
bool writable_row_major(const Array& x) {
  const std::int64_t nd = x.ndim();
  const std::int64_t m = x.shape()[nd - 2], n = x.shape()[nd - 1];
  if (x.size() == 0) return true;
  if (n > 1 && x.strides()[nd - 1] != 1) return false;
  if (m > 1 && x.strides()[nd - 2] < std::max<std::int64_t>(1, n)) return false;
  return batch_stride(x.shape(), x.strides(), false).has_value();
}

void row_major_strides(const Array& x, std::int64_t& ld, std::int64_t& bs) {
  const std::int64_t nd = x.ndim();
  const std::int64_t m = x.shape()[nd - 2], n = x.shape()[nd - 1];
  ld = m <= 1 ? std::max<std::int64_t>(1, n) : x.strides()[nd - 2];
  bs = batch_stride(x.shape(), x.strides(), false).value_or(0);
}

void check_same_device(const Array& x, const char* what, const Array& a) {
  if (x.defined() && x.device() != a.device()) {
    throw DeviceError(fmt::format("matmul: a is on {} but {} is on {}", a.device().str(), what, x.device().str()));
  }
}

}  // namespace

MatmulPrepared prepare_matmul(const Array& a_in, const Array& b_in, const MatmulOptions& options, const Array& out,
                              const OptionalStream& stream_arg, bool plan_mode) {
  if (!a_in.defined() || !b_in.defined()) throw ValueError("matmul: a and b must be defined arrays");
  check_same_device(b_in, "b", a_in);
  check_same_device(options.bias, "bias", a_in);
  check_same_device(options.c, "c", a_in);
  check_same_device(options.aux, "aux", a_in);
  check_same_device(options.bias_grad, "bias_grad", a_in);
  check_same_device(out, "out", a_in);
  MatmulPrepared p;
  p.device = a_in.device();
  p.stream = detail::op_stream(a_in, stream_arg, kOp);
  const DType dtype = a_in.dtype();
  if (a_in.dtype() != b_in.dtype() || !supported_dtype(dtype)) {
    throw DTypeError(fmt::format(
        "matmul: unsupported dtype combination {} @ {} (supported: a and b both float16, bfloat16, float32, "
        "float64, complex64, complex128, or an integer dtype; a MatmulPlan takes int8 among the integers)",
        dtype_name(a_in.dtype()), dtype_name(b_in.dtype())));
  }
  p.out_dtype = dtype == DType::int8 ? DType::int32 : dtype;
  const bool real_float = dtype == DType::float16 || dtype == DType::bfloat16 || dtype == DType::float32 ||
                          dtype == DType::float64;
  if (!real_float && (options.bias.defined() || options.epilogue != MatmulEpilogue::none || options.aux.defined() ||
                      options.bias_grad.defined())) {
    throw DTypeError(fmt::format(
        "matmul: bias, epilogues, aux and bias_grad are supported for real floating dtypes only, not {}",
        dtype_name(dtype)));
  }
  if (dtype == DType::int8 && (options.alpha != 1.0 || options.beta != 0.0)) {
    throw DTypeError("matmul: int8 products take alpha=1 and beta=0 only");
  }
  if (options.compute == MatmulCompute::tf32 && dtype != DType::float32 && dtype != DType::complex64) {
    throw ValueError(fmt::format("matmul: compute=tf32 needs float32 or complex64 inputs, not {}", dtype_name(dtype)));
  }
  const bool grad_epilogue = is_matmul_grad_epilogue(options.epilogue);
  if (options.aux.defined() && options.epilogue == MatmulEpilogue::none) {
    throw ValueError("matmul: aux needs an epilogue (relu, gelu, gelu_tanh or one of their _grad forms)");
  }
  if (grad_epilogue && !options.aux.defined()) {
    throw ValueError(fmt::format("matmul: epilogue {} needs aux, the forward's aux (the activation's input)",
                                 matmul_epilogue_name(options.epilogue)));
  }
  if (grad_epilogue && options.bias.defined()) {
    throw ValueError(fmt::format("matmul: epilogue {} takes no bias (it is the derivative of the forward's "
                                 "activation; bias_grad receives the bias gradient)",
                                 matmul_epilogue_name(options.epilogue)));
  }
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw ShapeError(fmt::format("matmul: operands must be at least 1-D, got a {} and b {}", shape_str(a_in.shape()),
                                 shape_str(b_in.shape())));
  }
  Array a = a_in.ndim() == 1 ? a_in.expand_dims(0) : a_in;
  Array b = b_in.ndim() == 1 ? b_in.expand_dims(1) : b_in;
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  if (b.dim(-2) != k) {
    throw ShapeError(fmt::format("matmul: inner dimensions do not match: a has shape {} and b has shape {} ({} != {})",
                                 shape_str(a_in.shape()), shape_str(b_in.shape()), k, b.dim(-2)));
  }
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(a_batch, b_batch, kOp);
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("matmul: the batch dimensions of a {} and b {} do not broadcast",
                                 shape_str(a_in.shape()), shape_str(b_in.shape())));
  }
  Shape full = batch;
  full.push_back(m);
  full.push_back(n);
  p.result_shape = batch;
  if (a_in.ndim() > 1) p.result_shape.push_back(m);
  if (b_in.ndim() > 1) p.result_shape.push_back(n);

  // out and aux: the result's shape and dtype
  auto check_output = [&](const Array& x, const char* what, bool written = true) {
    if (!x.defined()) return;
    if (written) check_writable(x, kOp);
    if (x.shape() != p.result_shape) {
      throw ShapeError(fmt::format("matmul: {} has shape {} but the result of a {} @ b {} has shape {}", what,
                                   shape_str(x.shape()), shape_str(a_in.shape()), shape_str(b_in.shape()),
                                   shape_str(p.result_shape)));
    }
    if (x.dtype() != p.out_dtype) {
      throw DTypeError(fmt::format("matmul: {} has dtype {} but the result is {}", what, dtype_name(x.dtype()),
                                   dtype_name(p.out_dtype)));
    }
  };
  check_output(out, "out");
  check_output(options.aux, "aux", !grad_epilogue);  // a *_grad epilogue reads aux
  if (options.bias_grad.defined()) {
    check_writable(options.bias_grad, kOp);
    if (options.bias_grad.ndim() != 1 || options.bias_grad.dim(0) != n) {
      throw ShapeError(fmt::format("matmul: bias_grad has shape {} but needs ({},) for the result {} of a {} @ b {}",
                                   shape_str(options.bias_grad.shape()), n, shape_str(p.result_shape),
                                   shape_str(a_in.shape()), shape_str(b_in.shape())));
    }
    if (options.bias_grad.dtype() != p.out_dtype) {
      throw DTypeError(fmt::format("matmul: bias_grad has dtype {} but the result is {}",
                                   dtype_name(options.bias_grad.dtype()), dtype_name(p.out_dtype)));
    }
  }
  if (options.bias.defined()) {
    if (options.bias.ndim() != 1 || options.bias.dim(0) != n) {
      throw ShapeError(fmt::format("matmul: bias has shape {} but needs ({},) for the result {} of a {} @ b {}",
                                   shape_str(options.bias.shape()), n, shape_str(p.result_shape),
                                   shape_str(a_in.shape()), shape_str(b_in.shape())));
    }
    if (options.bias.dtype() != p.out_dtype) {
      throw DTypeError(fmt::format("matmul: bias has dtype {} but the result is {}", dtype_name(options.bias.dtype()),
                                   dtype_name(p.out_dtype)));
    }
  }
  if (options.beta != 0.0) {
    if (!options.c.defined()) throw ValueError(fmt::format("matmul: beta={} needs c", options.beta));
    try {
      broadcast_shapes(options.c.shape(), p.result_shape, kOp);
      if (broadcast_shapes(options.c.shape(), p.result_shape, kOp) != p.result_shape) throw ShapeError("");
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("matmul: c has shape {}, which does not broadcast to the result shape {}",
                                   shape_str(options.c.shape()), shape_str(p.result_shape)));
    }
  }

  // The layout signature, from the arrays as given (before any copy).
  // bias_grad: only whether there is one (a second product writes it, whatever its layout).
  p.signature = fmt::format("{}|a={}|b={}|out={}|bias={}|aux={}|bgrad={}|c={}|beta={}|epi={}|compute={}",
                            p.device.str(), layout_str(a_in), layout_str(b_in),
                            plan_mode ? std::string("-") : layout_str(out), layout_str(options.bias),
                            layout_str(options.aux), options.bias_grad.defined() ? 1 : 0,
                            options.beta != 0.0 ? shape_str(options.c.shape()) : "-",
                            options.beta != 0.0 ? 1 : 0, matmul_epilogue_name(options.epilogue),
                            matmul_compute_name(options.compute));

  // Result arrays.
  p.result = out.defined() ? out : empty(p.result_shape, p.out_dtype, p.device, p.stream);
  p.full_shape = full;
  std::vector<const Array*> inputs = {&a_in, &b_in, &options.bias, &options.c};
  if (grad_epilogue) inputs.push_back(&options.aux);  // read by the *_grad epilogues
  auto writable = [&](const Array& user, Array& target, Array& final_copy) {
    Array view = user.ndim() == static_cast<std::int64_t>(full.size()) ? user : user.view(full);
    // A plan's candidates were made for a contiguous, 16-byte aligned D (a fresh allocation).
    // Every element of D reads many of A and B: an out= sharing their storage goes through a
    // temporary, so the product never reads what it has already overwritten.
    bool aliases = false;
    for (const Array* in : inputs) aliases = aliases || (in->defined() && in->storage() == user.storage());
    const bool direct = !aliases && (plan_mode ? view.is_contiguous() && reinterpret_cast<std::uintptr_t>(view.data()) % 16 == 0
                                               : writable_row_major(view));
    if (direct) {
      target = view;
    } else {
      target = empty(full, p.out_dtype, p.device, p.stream);
      final_copy = user;
    }
  };
  writable(p.result, p.d, p.d_final);
  if (grad_epilogue) {
    // An input of D's layout: a row-major view as it is, else a contiguous copy.
    const Array view = options.aux.view(full);
    p.aux = writable_row_major(view) ? view : view.contiguous(p.stream);
  } else if (options.aux.defined()) {
    writable(options.aux, p.aux, p.aux_final);
  }
  p.bias_grad = options.bias_grad;  // the out= of a second product (run_matmul_plan), which handles its layout

  // Operands.
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {m, k});
  b_full.insert(b_full.end(), {k, n});
  p.a = a.broadcast_to(a_full);
  p.b = b.broadcast_to(b_full);
  backend::MatmulProblem& pr = p.problem;
  pr.dtype = dtype;
  pr.out_dtype = p.out_dtype;
  pr.m = m;
  pr.n = n;
  pr.k = k;
  pr.batch = numel(batch);
  if (p.result.size() > 0 && k > 0) {
    pr.a = operand_of(p.a, p.stream);
    pr.b = operand_of(p.b, p.stream);
  }
  pr.d = p.d.data();
  row_major_strides(p.d, pr.ldd, pr.batch_stride_d);
  if (p.aux.defined()) {
    pr.aux = p.aux.data();
    row_major_strides(p.aux, pr.ldaux, pr.batch_stride_aux);
  }
  if (options.bias.defined()) {
    p.bias = options.bias.contiguous(p.stream);
    pr.bias = p.bias.data();
  }
  if (options.beta != 0.0) p.c = options.c;
  pr.alpha = options.alpha;
  pr.beta = options.beta;
  pr.epilogue = options.epilogue;
  pr.compute = options.compute;
  return p;
}

void MatmulPlanCore::run(int candidate, const backend::MatmulProblem& problem, const Stream& stream) {
  std::lock_guard<std::mutex> lock(run_mutex);
  if (device.is_cpu()) {
    backend::cpu::matmul(problem, stream);
    return;
  }
  cuda->run(candidate, problem, stream);
}

namespace {

MatmulCandidate candidate_named(std::string name) {
  MatmulCandidate c;
  c.name = std::move(name);
  return c;
}

std::mutex plan_cache_mutex;
std::unordered_map<std::string, std::shared_ptr<MatmulPlanCore>>& plan_cache() {
  static std::unordered_map<std::string, std::shared_ptr<MatmulPlanCore>> cache;
  return cache;
}

}  // namespace

std::shared_ptr<MatmulPlanCore> make_matmul_core(const MatmulPrepared& p) {
  auto core = std::make_shared<MatmulPlanCore>();
  core->signature = p.signature;
  core->device = p.device;
  core->key = p.signature + "|" + matmul_environment_key(p.device);
  if (p.result.size() == 0 || p.problem.k == 0) {
    core->candidates.push_back(candidate_named("trivial:empty"));  // nothing to multiply: run_matmul_plan fills D
    return core;
  }
  if (p.device.is_cpu()) {
    core->candidates.push_back(candidate_named("cpu:openblas"));
  } else {
    core->cuda = backend::cuda::plan_matmul(p.problem, p.device);
    for (int i = 0; i < core->cuda->size(); ++i) core->candidates.push_back(candidate_named(core->cuda->name(i)));
  }
  bool from_disk = false;
  if (auto winner = cached_matmul_winner(core->key, from_disk)) {
    for (std::size_t i = 0; i < core->candidates.size(); ++i) {
      if (core->candidates[i].name == *winner) {
        core->selected = static_cast<int>(i);
        core->from_cache = true;
      }
    }
    TESSEL_LOG_INFO(fmt::format("matmul: autotune cache hit ({}) for {}: {}", from_disk ? "disk" : "memory",
                                core->signature, *winner));
  } else {
    std::string names;
    for (const auto& c : core->candidates) names += (names.empty() ? "" : ", ") + c.name;
    TESSEL_LOG_INFO(fmt::format("matmul: autotune cache miss for {}: {} candidates ({}), running {} until autotune()",
                                core->signature, core->candidates.size(), names, core->candidates[0].name));
  }
  return core;
}

std::shared_ptr<MatmulPlanCore> cached_matmul_core(const MatmulPrepared& p) {
  std::lock_guard<std::mutex> lock(plan_cache_mutex);
  auto& cache = plan_cache();
  auto it = cache.find(p.signature);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 512) cache.clear();  // a bound, not an LRU: layouts rarely number this many
  auto core = make_matmul_core(p);
  cache[p.signature] = core;
  return core;
}


void clear_matmul_plan_cache() {
  std::lock_guard<std::mutex> lock(plan_cache_mutex);
  plan_cache().clear();
}

Array run_matmul_plan(MatmulPlanCore& core, int index, MatmulPrepared& p) {
  if (p.result.size() == 0) {
    if (p.bias_grad.defined()) fill(p.bias_grad, 0, p.stream);  // a sum over no rows
    return p.result;
  }
  const bool cuda = p.device.is_cuda();
  DeviceGuard guard(p.device);  // the kernels below launch on the current device
  if (p.c.defined()) copyto(p.d, p.c.broadcast_to(p.result_shape).reshape(p.full_shape, p.stream), p.stream);
  backend::MatmulProblem& pr = p.problem;
  pr.d = p.d.data();
  for (const Array* x : {&p.a, &p.b, &p.bias, &p.aux, &p.d}) {
    if (!x->defined()) continue;
    if (cuda) {
      x->storage()->wait_on_stream(p.stream);
    } else {
      x->wait();  // the CPU backend reads on the host now
    }
  }
  if (pr.k == 0 && !cuda) {
    backend::cpu::matmul(pr, p.stream);  // applies beta and the epilogue when k == 0
  } else if (pr.k == 0) {
    // No products: D = beta*C (or zeros), then the epilogue.
    if (pr.beta == 0.0) {
      fill(p.d, 0, p.stream);
    } else if (pr.beta != 1.0) {
      multiply(p.d, Scalar(pr.beta), p.d, p.stream);
    }
    if (pr.bias || pr.aux || pr.epilogue != MatmulEpilogue::none) {
      p.d.storage()->wait_on_stream(p.stream);
      backend::cuda::apply_epilogue(pr, p.stream.handle());
    }
  } else {
    core.run(index, pr, p.stream);
  }
  if (cuda) {
    p.d.storage()->record_pending_write(p.stream);
    if (p.aux.defined() && !is_matmul_grad_epilogue(pr.epilogue)) p.aux.storage()->record_pending_write(p.stream);
  }
  if (p.bias_grad.defined()) {
    // The column sums as ones @ D: one read of D in its dtype, accumulated in float32 (float64)
    // and rounded once; a sum of half D would first widen all of it to float32 (one more pass).
    // cuBLASLt's fused DGELU_BGRAD was slower than DGELU and this GEMM (backend/cuda/matmul.cpp).
    const std::int64_t rows = p.problem.batch * p.problem.m;
    const Array ones = full({rows}, Scalar(1), p.out_dtype, p.device, p.stream);
    matmul(ones, p.d.reshape({rows, p.problem.n}, p.stream), {}, p.bias_grad, p.stream);
  }
  if (p.d_final.defined()) copyto(p.d_final, p.d.reshape(p.result_shape, p.stream), p.stream);
  if (p.aux_final.defined()) copyto(p.aux_final, p.aux.reshape(p.result_shape, p.stream), p.stream);
  return p.result;
}

}  // namespace tessel::detail
