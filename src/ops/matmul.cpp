// matmul, vecdot and MatmulPlan: validation with NumPy matmul semantics, normalization of the
// operands into a backend::MatmulProblem (no copies when a matrix has a unit stride in either
// dimension and its batch dimensions collapse to one stride), the candidate list of a layout,
// autotuning with CUDA events, and the autotune cache in memory and on disk.
#include "tessel/ops/matmul.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "array/backend.hpp"
#include "backend/matmul.hpp"
#include "ops/op_stream.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/profile_range.hpp"
#include "tessel/jit/hash.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/reduce.hpp"

namespace tessel {

// ---------------------------------------------------------------------------------------------
// names
MatmulEpilogue parse_matmul_epilogue(std::string_view name) {
  if (name == "none") return MatmulEpilogue::none;
  if (name == "relu") return MatmulEpilogue::relu;
  if (name == "gelu") return MatmulEpilogue::gelu;
  if (name == "gelu_tanh") return MatmulEpilogue::gelu_tanh;
  throw ValueError(fmt::format("matmul: unknown epilogue \"{}\" (expected none, relu, gelu or gelu_tanh)", name));
}
const char* matmul_epilogue_name(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::none: return "none";
    case MatmulEpilogue::relu: return "relu";
    case MatmulEpilogue::gelu: return "gelu";
    case MatmulEpilogue::gelu_tanh: return "gelu_tanh";
  }
  return "?";
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

// Everything one product needs, after validation and normalization.
struct Prepared {
  Device device;
  Stream stream;
  Shape result_shape;
  Shape full_shape;       // batch + (m, n): result_shape with the axes of 1-D operands kept
  DType out_dtype = DType::float32;
  Array a, b;             // (batch..., m, k) and (batch..., k, n) views or copies
  Array result;           // what matmul returns (out when given)
  Array d, d_final;       // D as written by the backend; d_final: where it is copied at the end (or undefined)
  Array aux, aux_final;
  Array bias;
  Array c;                // broadcast view of options.c, copied into d when beta != 0
  backend::MatmulProblem problem;
  std::string signature;  // the layouts that a plan is valid for
};

// plan_mode: the layout of `out` is not part of the signature (a plan runs on any out); D is then
// written directly only when out is contiguous, as the plan's candidates were made for.
Prepared prepare(const Array& a_in, const Array& b_in, const MatmulOptions& options, const Array& out,
                 const OptionalStream& stream_arg, bool plan_mode = false) {
  if (!a_in.defined() || !b_in.defined()) throw ValueError("matmul: a and b must be defined arrays");
  check_same_device(b_in, "b", a_in);
  check_same_device(options.bias, "bias", a_in);
  check_same_device(options.c, "c", a_in);
  check_same_device(options.aux, "aux", a_in);
  check_same_device(out, "out", a_in);
  Prepared p;
  p.device = a_in.device();
  p.stream = detail::op_stream(a_in, stream_arg, kOp);
  const DType dtype = a_in.dtype();
  if (a_in.dtype() != b_in.dtype() || !supported_dtype(dtype)) {
    throw DTypeError(fmt::format(
        "matmul: unsupported dtype combination {} @ {} (supported: a and b both float16, bfloat16, float32, "
        "float64, complex64, complex128, or int8)",
        dtype_name(a_in.dtype()), dtype_name(b_in.dtype())));
  }
  p.out_dtype = dtype == DType::int8 ? DType::int32 : dtype;
  const bool real_float = dtype == DType::float16 || dtype == DType::bfloat16 || dtype == DType::float32 ||
                          dtype == DType::float64;
  if (!real_float && (options.bias.defined() || options.epilogue != MatmulEpilogue::none || options.aux.defined())) {
    throw DTypeError(fmt::format("matmul: bias, epilogues and aux are supported for real floating dtypes only, not {}",
                                 dtype_name(dtype)));
  }
  if (dtype == DType::int8 && (options.alpha != 1.0 || options.beta != 0.0)) {
    throw DTypeError("matmul: int8 products take alpha=1 and beta=0 only");
  }
  if (options.compute == MatmulCompute::tf32 && dtype != DType::float32 && dtype != DType::complex64) {
    throw ValueError(fmt::format("matmul: compute=tf32 needs float32 or complex64 inputs, not {}", dtype_name(dtype)));
  }
  if (options.aux.defined() && options.epilogue == MatmulEpilogue::none) {
    throw ValueError("matmul: aux needs an epilogue (relu, gelu or gelu_tanh)");
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
  auto check_output = [&](const Array& x, const char* what) {
    if (!x.defined()) return;
    check_writable(x, kOp);
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
  check_output(options.aux, "aux");
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
  p.signature = fmt::format("{}|a={}|b={}|out={}|bias={}|aux={}|c={}|beta={}|epi={}|compute={}", p.device.str(),
                            layout_str(a_in), layout_str(b_in), plan_mode ? std::string("-") : layout_str(out), layout_str(options.bias),
                            layout_str(options.aux), options.beta != 0.0 ? shape_str(options.c.shape()) : "-",
                            options.beta != 0.0 ? 1 : 0, matmul_epilogue_name(options.epilogue),
                            matmul_compute_name(options.compute));

  // Result arrays.
  p.result = out.defined() ? out : empty(p.result_shape, p.out_dtype, p.device, p.stream);
  p.full_shape = full;
  auto writable = [&](const Array& user, Array& target, Array& final_copy) {
    Array view = user.ndim() == static_cast<std::int64_t>(full.size()) ? user : user.view(full);
    // A plan's candidates were made for a contiguous, 16-byte aligned D (a fresh allocation).
    // Every element of D reads many of A and B: an out= sharing their storage goes through a
    // temporary, so the product never reads what it has already overwritten.
    bool aliases = false;
    for (const Array* in : {&a_in, &b_in, &options.bias, &options.c}) {
      aliases = aliases || (in->defined() && in->storage() == user.storage());
    }
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
  if (options.aux.defined()) writable(options.aux, p.aux, p.aux_final);

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

// ---------------------------------------------------------------------------------------------
// autotune cache
std::mutex cache_mutex;
std::unordered_map<std::string, std::string>& winner_cache() {  // cache key -> candidate name
  static std::unordered_map<std::string, std::string> cache;
  return cache;
}

std::string disk_path(const std::string& key) {
  return matmul_cache_dir() + "/" + jit::hash128(key).hex() + ".json";
}

std::optional<std::string> cached_winner(const std::string& key, bool& from_disk) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = winner_cache().find(key);
  if (it != winner_cache().end()) {
    from_disk = false;
    return it->second;
  }
  std::ifstream in(disk_path(key));
  if (!in) return std::nullopt;
  try {
    nlohmann::json j;
    in >> j;
    if (j.at("key").get<std::string>() != key) return std::nullopt;  // a hash collision
    const std::string winner = j.at("winner").get<std::string>();
    winner_cache()[key] = winner;
    from_disk = true;
    return winner;
  } catch (const std::exception& error) {
    TESSEL_LOG_WARN(fmt::format("matmul: ignoring the unreadable autotune cache file {}: {}", disk_path(key), error.what()));
    return std::nullopt;
  }
}

void store_winner(const std::string& key, const std::vector<MatmulCandidate>& candidates, const std::string& winner) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  winner_cache()[key] = winner;
  nlohmann::json j;
  j["key"] = key;
  j["winner"] = winner;
  j["candidates"] = nlohmann::json::array();
  for (const MatmulCandidate& c : candidates) {
    j["candidates"].push_back({{"name", c.name}, {"time_ms", c.time_ms}, {"sustained_ms", c.sustained_ms}, {"ok", c.ok}});
  }
  try {
    std::filesystem::create_directories(matmul_cache_dir());
    const std::string path = disk_path(key);
    const std::string temp = path + ".tmp" + std::to_string(reinterpret_cast<std::uintptr_t>(&j));
    {
      std::ofstream out(temp);
      out << j.dump(2) << "\n";
    }
    std::filesystem::rename(temp, path);  // atomic: readers never see half a file
    TESSEL_LOG_INFO(fmt::format("matmul: autotune winner {} stored in {}", winner, path));
  } catch (const std::exception& error) {
    TESSEL_LOG_WARN(fmt::format("matmul: could not write the autotune cache: {}", error.what()));
  }
}

// Part of every cache key: a change in how the autotuner ranks candidates must not reuse winners
// ranked the old way. 2: single runs, then the finalists back to back (autotune_sustain_ms).
constexpr const char* kAutotuneRanking = "ranking 2";

std::string environment_key(Device device) {
  if (device.is_cpu()) return fmt::format("cpu|openblas|{}", kAutotuneRanking);
#if defined(TESSEL_HAVE_CUDA)
  const DeviceProperties& props = device_properties(device.index);
  return fmt::format("{}|sm_{}{}|{}|driver {}|{}", props.name, props.cc_major, props.cc_minor,
                     backend::cuda::matmul_library_version(), driver_version(), kAutotuneRanking);
#else
  return "cuda-unavailable";
#endif
}

}  // namespace

namespace {
std::mutex cache_dir_mutex;
std::string& cache_dir_override() {
  static std::string folder;
  return folder;
}
}  // namespace

void set_matmul_cache_dir(const std::string& folder) {
  std::lock_guard<std::mutex> lock(cache_dir_mutex);
  cache_dir_override() = folder;
}

std::string matmul_cache_dir() {
  {
    std::lock_guard<std::mutex> lock(cache_dir_mutex);
    if (!cache_dir_override().empty()) return cache_dir_override();
  }
  const std::string& base = config().cache_dir;
  if (!base.empty()) return base + "/matmul";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tessel/matmul";
}

// ---------------------------------------------------------------------------------------------
// plans
namespace detail {

// The candidates of one layout and the selection; shared by matmul()'s plan cache and MatmulPlan.
struct MatmulPlanCore {
  std::string signature, key;
  Device device;
  std::unique_ptr<backend::cuda::MatmulCandidates> cuda;
  std::vector<MatmulCandidate> candidates;
  int selected = 0;
  bool from_cache = false;
  std::mutex run_mutex;

  void run(int candidate, const backend::MatmulProblem& problem, const Stream& stream) {
    // cuBLASLt descriptors carry the bias/aux pointers: one run at a time per core.
    std::lock_guard<std::mutex> lock(run_mutex);
    if (device.is_cpu()) {
      backend::cpu::matmul(problem, stream);
      return;
    }
#if defined(TESSEL_HAVE_CUDA)
    cuda->run(candidate, problem, stream);
#else
    (void)candidate;
    throw DeviceError("matmul: tessel was built without CUDA");
#endif
  }
};

MatmulCandidate candidate_named(std::string name) {
  MatmulCandidate c;
  c.name = std::move(name);
  return c;
}

std::shared_ptr<MatmulPlanCore> make_core(const Prepared& p) {
  auto core = std::make_shared<MatmulPlanCore>();
  core->signature = p.signature;
  core->device = p.device;
  core->key = p.signature + "|" + environment_key(p.device);
  if (p.result.size() == 0 || p.problem.k == 0) {
    core->candidates.push_back(candidate_named("trivial:empty"));  // nothing to multiply: run_prepared fills D
    return core;
  }
  if (p.device.is_cpu()) {
    core->candidates.push_back(candidate_named("cpu:openblas"));
  } else {
#if defined(TESSEL_HAVE_CUDA)
    core->cuda = backend::cuda::plan_matmul(p.problem, p.device);
    for (int i = 0; i < core->cuda->size(); ++i) core->candidates.push_back(candidate_named(core->cuda->name(i)));
#else
    throw DeviceError("matmul: tessel was built without CUDA");
#endif
  }
  bool from_disk = false;
  if (auto winner = cached_winner(core->key, from_disk)) {
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

struct MatmulPlanState {
  std::shared_ptr<MatmulPlanCore> core;
  Array a, b;
  MatmulOptions options;
};

}  // namespace detail

namespace {

std::mutex plan_cache_mutex;
std::unordered_map<std::string, std::shared_ptr<detail::MatmulPlanCore>>& plan_cache() {
  static std::unordered_map<std::string, std::shared_ptr<detail::MatmulPlanCore>> cache;
  return cache;
}

std::shared_ptr<detail::MatmulPlanCore> cached_core(const Prepared& p) {
  std::lock_guard<std::mutex> lock(plan_cache_mutex);
  auto& cache = plan_cache();
  auto it = cache.find(p.signature);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 512) cache.clear();  // a bound, not an LRU: layouts rarely number this many
  auto core = detail::make_core(p);
  cache[p.signature] = core;
  return core;
}

// Runs candidate `index` of core on p and finishes the outputs.
Array run_prepared(detail::MatmulPlanCore& core, int index, Prepared& p) {
  if (p.result.size() == 0) return p.result;
  const bool cuda = p.device.is_cuda();
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
#if defined(TESSEL_HAVE_CUDA)
      p.d.storage()->wait_on_stream(p.stream);
      backend::cuda::apply_epilogue(pr, p.stream.handle());
#endif
    }
  } else {
    core.run(index, pr, p.stream);
  }
  if (cuda) {
    p.d.storage()->record_pending_write(p.stream);
    if (p.aux.defined()) p.aux.storage()->record_pending_write(p.stream);
  }
  if (p.d_final.defined()) copyto(p.d_final, p.d.reshape(p.result_shape, p.stream), p.stream);
  if (p.aux_final.defined()) copyto(p.aux_final, p.aux.reshape(p.result_shape, p.stream), p.stream);
  return p.result;
}

// TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS=T (default 20; 0 turns the phase off): how long each finalist
// runs back to back in the autotune's second phase. Single runs interleaved with other candidates
// rank some algorithms first that are slower in sustained use (on the H100, 8192^3 bf16: cuBLASLt
// algorithms timed 1.56 ms interleaved but 1.64-1.68 ms back to back, while the heuristic's first
// held 1.59 ms both ways; the power limit reacts over milliseconds, so a neighbour's lighter load
// lends headroom). A matmul in real use runs back to back, so finalists are ranked that way.
double autotune_sustain_ms() {
  static const double sustain = [] {
    const char* env = std::getenv("TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS");
    if (env == nullptr || *env == '\0') return 20.0;
    char* end = nullptr;
    const double value = std::strtod(env, &end);
    if (*end != '\0' || !(value >= 0 && value <= 1000)) {
      throw ValueError(
          fmt::format("TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS: expected a number of milliseconds in 0..1000, got \"{}\"", env));
    }
    return value;
  }();
  return sustain;
}

// Times `iterations` runs of every candidate with CUDA events (host clocks on the CPU) on a
// scratch output with D's layout, so the user's out and c are not touched.
void autotune_core(detail::MatmulPlanCore& core, const Prepared& p, int iterations) {
  if (iterations < 1) throw ValueError(fmt::format("MatmulPlan.autotune: iterations must be >= 1, got {}", iterations));
  TESSEL_LOG_INFO(fmt::format("matmul: autotuning {} ({} candidates, {} iterations each)", core.signature,
                              core.candidates.size(), iterations));
  backend::MatmulProblem pr = p.problem;
  // Same strides as D, so that the candidates see the planned layout.
  const std::int64_t span_d = (pr.batch - 1) * pr.batch_stride_d + (pr.m - 1) * pr.ldd + pr.n;
  auto scratch_buffer = Buffer::allocate(p.device, span_d * itemsize(p.out_dtype), p.stream);
  pr.d = scratch_buffer->data();
  std::shared_ptr<Buffer> aux_buffer;
  if (pr.aux) {
    const std::int64_t span = (pr.batch - 1) * pr.batch_stride_aux + (pr.m - 1) * pr.ldaux + pr.n;
    aux_buffer = Buffer::allocate(p.device, span * itemsize(p.out_dtype), p.stream);
    pr.aux = aux_buffer->data();
  }
  // On the CPU too: an input may still be landing from a device copy.
  for (const Array* x : {&p.a, &p.b, &p.bias}) {
    if (x->defined()) x->storage()->wait_on_stream(p.stream);
  }
  // Round-robin timing: each round runs every candidate once, so clock boost, thermal state and
  // other work on the GPU weigh on all candidates alike instead of on the last ones timed.
  const std::size_t count = core.candidates.size();
  auto fail = [&](std::size_t i, const Error& error) {
    MatmulCandidate& c = core.candidates[i];
    c.ok = false;
    c.time_ms = -1;
    c.error = error.what();
    TESSEL_LOG_INFO(fmt::format("matmul:   candidate {:2d} {} failed: {}", i, c.name, c.error));
  };
  // Runs candidate i `runs` times; false (and the candidate marked failed) when it throws.
  auto run_guarded = [&](std::size_t i, int runs) {
    try {
      for (int r = 0; r < runs; ++r) core.run(static_cast<int>(i), pr, p.stream);
      return true;
    } catch (const CudaError& error) {
      if (error.fatal()) throw;
      fail(i, error);
    } catch (const Error& error) {
      fail(i, error);
    }
    return false;
  };
  for (std::size_t i = 0; i < count; ++i) {  // warm-up; also surfaces failures
    core.candidates[i].ok = true;
    core.candidates[i].error.clear();
    core.candidates[i].time_ms = -1;
    core.candidates[i].sustained_ms = -1;
    run_guarded(i, 1);
  }
  // Median milliseconds per run of each candidate in `which`, over `rounds` round-robin rounds in
  // which a sample of candidate i is runs[i] back-to-back runs (-1 where it failed).
  auto median_per_run = [&](const std::vector<std::size_t>& which, int rounds, const std::vector<int>& runs) {
    std::vector<std::vector<double>> samples(count);
    if (p.device.is_cuda()) {
      std::vector<std::vector<std::pair<Event, Event>>> events(count);
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t i : which) {
          if (!core.candidates[i].ok) continue;
          events[i].emplace_back(Event(p.device), Event(p.device));
          events[i].back().first.record(p.stream);
          if (run_guarded(i, runs[i])) events[i].back().second.record(p.stream);
          else events[i].pop_back();
        }
      }
      for (std::size_t i : which) {
        if (!core.candidates[i].ok) continue;
        for (auto& [start, stop] : events[i]) {
          stop.synchronize();
          samples[i].push_back(start.elapsed_ms(stop) / runs[i]);
        }
      }
    } else {
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t i : which) {
          if (!core.candidates[i].ok) continue;
          const auto t0 = std::chrono::steady_clock::now();
          if (run_guarded(i, runs[i])) {
            samples[i].push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / runs[i]);
          }
        }
      }
    }
    std::vector<double> median(count, -1.0);
    for (std::size_t i : which) {
      if (!core.candidates[i].ok || samples[i].empty()) continue;
      std::sort(samples[i].begin(), samples[i].end());
      median[i] = samples[i][samples[i].size() / 2];
    }
    return median;
  };

  // Phase 1: single runs, round robin, so clock boost, thermal state and other work on the GPU
  // weigh on all candidates alike instead of on the last ones timed.
  std::vector<std::size_t> all(count);
  for (std::size_t i = 0; i < count; ++i) all[i] = i;
  const std::vector<double> single = median_per_run(all, iterations, std::vector<int>(count, 1));
  double best = -1;
  for (std::size_t i = 0; i < count; ++i) {
    MatmulCandidate& c = core.candidates[i];
    if (!c.ok || single[i] < 0) continue;
    c.time_ms = single[i];
    if (best < 0 || c.time_ms < best) best = c.time_ms;
    TESSEL_LOG_INFO(fmt::format("matmul:   candidate {:2d} {:32s} {:9.4f} ms (median of {} single runs)", i, c.name,
                                c.time_ms, iterations));
  }

  // Phase 2: the finalists (within kFinalistMargin of the best, at most kMaxFinalists, fastest
  // first) each run back to back for about autotune_sustain_ms(), three rounds, and the best
  // sustained median wins (see autotune_sustain_ms for why).
  constexpr double kFinalistMargin = 1.06;
  constexpr std::size_t kMaxFinalists = 4;
  std::vector<std::size_t> finalists;
  for (std::size_t i = 0; i < count; ++i) {
    if (core.candidates[i].ok && core.candidates[i].time_ms >= 0 && core.candidates[i].time_ms <= best * kFinalistMargin) {
      finalists.push_back(i);
    }
  }
  std::sort(finalists.begin(), finalists.end(),
            [&](std::size_t x, std::size_t y) { return core.candidates[x].time_ms < core.candidates[y].time_ms; });
  if (finalists.size() > kMaxFinalists) finalists.resize(kMaxFinalists);
  const double sustain_ms = autotune_sustain_ms();
  int best_index = -1;
  if (finalists.size() > 1 && sustain_ms > 0) {
    std::vector<int> runs(count, 1);
    for (std::size_t i : finalists) {
      const double per_run = std::max(core.candidates[i].time_ms, 1e-3);
      runs[i] = static_cast<int>(std::clamp(std::ceil(sustain_ms / per_run), 1.0, 1000.0));
    }
    const std::vector<double> sustained = median_per_run(finalists, 3, runs);
    double best_sustained = -1;
    for (std::size_t i : finalists) {
      MatmulCandidate& c = core.candidates[i];
      if (!c.ok || sustained[i] < 0) continue;
      c.sustained_ms = sustained[i];
      TESSEL_LOG_INFO(fmt::format("matmul:   finalist  {:2d} {:32s} {:9.4f} ms back to back ({} runs per sample)", i,
                                  c.name, c.sustained_ms, runs[i]));
      if (best_sustained < 0 || c.sustained_ms < best_sustained) {
        best_sustained = c.sustained_ms;
        best_index = static_cast<int>(i);
      }
    }
  }
  if (best_index < 0) {  // no second phase (or every finalist failed in it): the single-run best
    for (std::size_t i = 0; i < count; ++i) {
      const MatmulCandidate& c = core.candidates[i];
      if (c.ok && c.time_ms >= 0 && (best_index < 0 || c.time_ms < core.candidates[static_cast<std::size_t>(best_index)].time_ms)) {
        best_index = static_cast<int>(i);
      }
    }
  }
  if (best_index < 0) throw Error(fmt::format("matmul: autotune found no candidate that runs for {}", core.signature));
  if (p.device.is_cuda()) scratch_buffer->record_stream(p.stream);
  core.selected = best_index;
  core.from_cache = false;
  const MatmulCandidate& chosen = core.candidates[static_cast<std::size_t>(best_index)];
  TESSEL_LOG_INFO(chosen.sustained_ms >= 0
                      ? fmt::format("matmul: autotune chose {} ({:.4f} ms back to back, {:.4f} ms single)", chosen.name,
                                    chosen.sustained_ms, chosen.time_ms)
                      : fmt::format("matmul: autotune chose {} ({:.4f} ms)", chosen.name, chosen.time_ms));
  store_winner(core.key, core.candidates, core.candidates[best_index].name);
}

}  // namespace

void clear_matmul_memory_cache() {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    winner_cache().clear();
  }
  std::lock_guard<std::mutex> lock(plan_cache_mutex);
  plan_cache().clear();
}

Array matmul(const Array& a, const Array& b, const MatmulOptions& options, const Array& out,
             const OptionalStream& stream) {
  TESSEL_OP_RANGE("matmul");
  Prepared p = prepare(a, b, options, out, stream);
  if (p.result.size() == 0) return p.result;
  std::shared_ptr<detail::MatmulPlanCore> core;
  if (p.problem.k > 0) core = cached_core(p);
  detail::MatmulPlanCore dummy;
  dummy.device = p.device;
  return run_prepared(core ? *core : dummy, core ? core->selected : 0, p);
}

Array vecdot(const Array& x1, const Array& x2, std::int64_t axis, const OptionalStream& stream) {
  TESSEL_OP_RANGE("vecdot");
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
  return r.squeeze({-1, -2});
}

// ---------------------------------------------------------------------------------------------
// MatmulPlan
MatmulPlan::MatmulPlan(const Array& a, const Array& b, const MatmulOptions& options, const OptionalStream& stream)
    : state_(std::make_unique<detail::MatmulPlanState>()) {
  Prepared p = prepare(a, b, options, Array(), stream, true);
  state_->core = detail::make_core(p);
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
  Prepared p = prepare(state_->a, state_->b, state_->options, Array(), std::nullopt, true);
  if (p.result.size() > 0 && p.problem.k > 0) autotune_core(*state_->core, p, iterations);
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
  TESSEL_OP_RANGE("MatmulPlan.execute");
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
  if (given.alpha) options.alpha = *given.alpha;
  if (given.beta) options.beta = *given.beta;
  if ((options.beta != 0.0) != (planned.beta != 0.0)) {
    throw ValueError(fmt::format("MatmulPlan.execute: beta={} but the plan was made with beta={} (a plan reads c "
                                 "either always or never; make a new plan)",
                                 options.beta, planned.beta));
  }
  Prepared p = prepare(a, b, options, out, stream, true);
  if (p.signature != state_->core->signature) {
    throw ValueError(fmt::format("MatmulPlan.execute: the arrays' layout differs from the planned one: planned {}, got {}",
                                 state_->core->signature, p.signature));
  }
  return run_prepared(*state_->core, state_->core->selected, p);
}

Array MatmulPlan::execute(const Array& out, const OptionalStream& stream) {
  return execute(state_->a, state_->b, MatmulExecuteOptions{}, out, stream);
}

}  // namespace tessel
