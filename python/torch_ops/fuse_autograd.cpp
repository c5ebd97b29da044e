// tessel.torch's compiled autograd op: tt.fuse's eager calls with grad run their forward and
// backward kernels from C++ (a torch::autograd::Function), so that neither the forward nor the
// backward, which PyTorch's autograd engine calls on its own thread, passes through Python.
//
// Why: on the H200's host an empty Python torch.autograd.Function cost 106-163 us forward plus
// backward, more than the GPU time of a 2.5e7-element swish step's kernels (about 0.2 ms), so a
// step through Python was bound by the host (bench/peers/torch_training.py, swish_gate).
//
// The kernels are tessel's, run through tessel's C table (python/bindings/fused_c_api.hpp), so
// they share the one tessel library of the Python module: its kernel caches, its caching
// allocator (the outputs are tessel memory, handed to torch with a deleter) and its streams
// (each call runs on PyTorch's current stream of the device). Everything a call needs besides
// the tensors was decided in Python once per dtypes and requires_grad of the arguments, and is
// registered here as a plan (tessel.torch._fuse._EagerPlan); the op takes the plan's id.
//
// The ops (namespace tessel_torch) are private to tessel.torch: torch.compile, dispatch modes and
// functorch transforms see tt.fuse's registered Python custom ops instead.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fused_c_api.hpp"

namespace {

namespace dl = tessel::python::dlpack;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const tessel::python::FusedCApi* api = nullptr;

// ---- dtypes ----
struct DTypeEntry {
  at::ScalarType type;
  const char* name;  // str(torch dtype) without "torch."
  dl::DLDataType dl;
};
const DTypeEntry kDTypes[] = {
    {at::kBool, "bool", {dl::kDLBool, 8, 1}},          {at::kChar, "int8", {dl::kDLInt, 8, 1}},
    {at::kByte, "uint8", {dl::kDLUInt, 8, 1}},         {at::kShort, "int16", {dl::kDLInt, 16, 1}},
    {at::kUInt16, "uint16", {dl::kDLUInt, 16, 1}},     {at::kUInt32, "uint32", {dl::kDLUInt, 32, 1}},
    {at::kUInt64, "uint64", {dl::kDLUInt, 64, 1}},
    {at::kInt, "int32", {dl::kDLInt, 32, 1}},          {at::kLong, "int64", {dl::kDLInt, 64, 1}},
    {at::kHalf, "float16", {dl::kDLFloat, 16, 1}},     {at::kBFloat16, "bfloat16", {dl::kDLBfloat, 16, 1}},
    {at::kFloat, "float32", {dl::kDLFloat, 32, 1}},    {at::kDouble, "float64", {dl::kDLFloat, 64, 1}},
    {at::kComplexFloat, "complex64", {dl::kDLComplex, 64, 1}},
    {at::kComplexDouble, "complex128", {dl::kDLComplex, 128, 1}},
};

dl::DLDataType dl_dtype(at::ScalarType type, const std::string& op) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.type == type) return e.dl;
  }
  TORCH_CHECK_TYPE(false, op, ": tensors of dtype ", type, " are not supported");
}

at::ScalarType scalar_type(dl::DLDataType t) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dl.code == t.code && e.dl.bits == t.bits && t.lanes == 1) return e.type;
  }
  TORCH_CHECK(false, "tessel.torch: a tessel result of DLPack dtype code ", int(t.code), " bits ", int(t.bits),
              " has no torch dtype");
}

at::ScalarType dtype_named(const std::string& name) {
  const std::string bare = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  for (const DTypeEntry& e : kDTypes) {
    if (bare == e.name) return e.type;
  }
  TORCH_CHECK_VALUE(false, "tessel_torch: unknown dtype name '", name, "'");
}

// ---- calls into tessel ----
struct ErrorReport {
  std::string kind, message;
};

void report_error(void* ctx, const char* kind, const char* message) {
  auto* e = static_cast<ErrorReport*>(ctx);
  e->kind = kind;
  e->message = message;
}

// tessel's error as the Python exception it names, after the op's label (tessel names its own
// op, "fused", not the user's function).
[[noreturn]] void raise(const ErrorReport& e, const std::string& op) {
  if (e.kind == "TypeError") TORCH_CHECK_TYPE(false, op, ": ", e.message);
  if (e.kind == "ValueError") TORCH_CHECK_VALUE(false, op, ": ", e.message);
  if (e.kind == "MemoryError") TORCH_CHECK_WITH(OutOfMemoryError, false, op, ": ", e.message);
  TORCH_CHECK(false, op, ": ", e.message);
}

dl::DLTensor describe(const at::Tensor& t, const std::string& op) {
  dl::DLTensor d{};
  d.data = t.data_ptr();
  if (t.is_cuda()) {
    d.device = {dl::kDLCUDA, t.get_device()};
  } else {
    TORCH_CHECK_VALUE(t.is_cpu(), op, ": tensors must be on the CPU or a CUDA device, got ", t.device());
    d.device = {dl::kDLCPU, 0};
  }
  d.ndim = static_cast<std::int32_t>(t.dim());
  d.dtype = dl_dtype(t.scalar_type(), op);
  d.shape = const_cast<std::int64_t*>(t.sizes().data());
  d.strides = const_cast<std::int64_t*>(t.strides().data());
  return d;
}

// A torch tensor owning a tessel result (its deleter hands the memory back to tessel).
at::Tensor adopt(dl::DLManagedTensorVersioned* m) {
  const dl::DLTensor& t = m->dl_tensor;
  const at::Device device = t.device.device_type == dl::kDLCUDA
                                ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(t.device.device_id))
                                : at::Device(at::kCPU);
  auto sizes = at::IntArrayRef(t.shape, t.ndim);
  auto strides = at::IntArrayRef(t.strides, t.ndim);
  return at::for_blob(static_cast<char*>(t.data) + t.byte_offset, sizes)
      .strides(strides)
      .deleter([m](void*) { m->deleter(m); })
      .options(at::TensorOptions().dtype(scalar_type(t.dtype)).device(device))
      .target_device(device)
      .make_tensor();
}

void* current_stream(const at::Tensor& like) {
  if (!like.is_cuda()) return nullptr;
  const auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return guard->getStream(like.device()).native_handle();
}

// Runs a tessel FusedKernel on `inputs` on torch's current stream of their device: its outputs,
// or with `sum_dtype`, the sum of its one output.
std::vector<at::Tensor> run(const void* kernel, const std::vector<at::Tensor>& inputs, std::int32_t outputs,
                            const std::string& op, const at::ScalarType* sum_dtype = nullptr) {
  TORCH_CHECK(api != nullptr, "tessel_torch: the tessel C table is not set (tessel.torch sets it at import)");
  std::vector<dl::DLTensor> described;
  described.reserve(inputs.size());
  for (const at::Tensor& t : inputs) described.push_back(describe(t, op));
  dl::DLDataType sum{};
  if (sum_dtype != nullptr) sum = dl_dtype(*sum_dtype, op);
  std::vector<dl::DLManagedTensorVersioned*> results(static_cast<std::size_t>(outputs), nullptr);
  ErrorReport error;
  if (api->run(kernel, described.data(), static_cast<std::int32_t>(described.size()), current_stream(inputs.at(0)),
               sum_dtype != nullptr ? &sum : nullptr, results.data(), outputs, &error, &report_error) != 0) {
    raise(error, op);
  }
  std::vector<at::Tensor> tensors;
  tensors.reserve(results.size());
  for (dl::DLManagedTensorVersioned* m : results) tensors.push_back(adopt(m));
  return tensors;
}

// ---- plans ----
enum Reduction : std::int64_t { kNone = 0, kSum = 1, kMean = 2 };
constexpr double kLoScale = 1.0 / 2048.0;  // FusedReduction's hi + lo * 2^-11 (_fuse._LO_SCALE)

struct Plan {
  std::string label;                    // "tessel.torch.fuse(name)", for messages
  const void* forward = nullptr;        // FusedKernel: fn, or fn times a 0-d one (a reduction's summand)
  std::vector<std::int64_t> forward_reads;  // the inputs it reads, in order
  at::ScalarType result_dtype;          // torch's dtype of the op's result
  Reduction reduction = kNone;
  at::ScalarType accumulate;            // a reduction's summand and sum dtype
  at::ScalarType function_dtype;        // a reduction's dtype of fn(*inputs)
  const void* backward = nullptr;       // FusedKernel of the gradients that are not the incoming one; may be null
  std::vector<std::int64_t> saved;      // inputs saved for the backward, in order
  std::vector<std::int64_t> backward_reads;  // what it reads: input i < count, then the incoming gradient
                                             // (a reduction's hi and lo: count and count + 1)
  std::vector<std::int64_t> needed;     // the inputs that get a gradient
  std::vector<std::int64_t> source;     // per needed input: -1 the incoming gradient, else the backward's output
  std::vector<at::ScalarType> gradient_dtypes;  // per backward output: torch's dtype of its expression
  std::vector<at::ScalarType> input_dtypes;     // per needed input: its dtype
  std::int64_t count = 0;               // the op's tensors
};

std::mutex plans_mutex;
std::vector<std::unique_ptr<Plan>> plans;

const Plan& plan_of(std::int64_t id) {
  std::lock_guard<std::mutex> lock(plans_mutex);
  TORCH_CHECK_VALUE(id >= 0 && id < static_cast<std::int64_t>(plans.size()), "tessel_torch::fuse: no plan ", id);
  return *plans[static_cast<std::size_t>(id)];
}

std::vector<at::ScalarType> dtypes_named(const std::vector<std::string>& names) {
  std::vector<at::ScalarType> types;
  for (const std::string& n : names) types.push_back(dtype_named(n));
  return types;
}

std::int64_t add_plan(std::string label, std::int64_t forward, std::vector<std::int64_t> forward_reads,
                      std::string result_dtype, std::int64_t reduction, std::string accumulate,
                      std::string function_dtype, std::int64_t backward, std::vector<std::int64_t> saved,
                      std::vector<std::int64_t> backward_reads, std::vector<std::int64_t> needed,
                      std::vector<std::int64_t> source, std::vector<std::string> gradient_dtypes,
                      std::vector<std::string> input_dtypes, std::int64_t count) {
  auto p = std::make_unique<Plan>();
  p->label = std::move(label);
  p->forward = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(forward));
  p->forward_reads = std::move(forward_reads);
  p->result_dtype = dtype_named(result_dtype);
  TORCH_CHECK_VALUE(reduction >= kNone && reduction <= kMean, "tessel_torch::add_plan: reduction ", reduction);
  p->reduction = static_cast<Reduction>(reduction);
  p->accumulate = dtype_named(accumulate);
  p->function_dtype = dtype_named(function_dtype);
  p->backward = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(backward));
  p->saved = std::move(saved);
  p->backward_reads = std::move(backward_reads);
  p->needed = std::move(needed);
  p->source = std::move(source);
  p->gradient_dtypes = dtypes_named(gradient_dtypes);
  p->input_dtypes = dtypes_named(input_dtypes);
  p->count = count;
  TORCH_CHECK_VALUE(p->forward != nullptr && p->needed.size() == p->source.size() &&
                        p->needed.size() == p->input_dtypes.size(),
                    "tessel_torch::add_plan: inconsistent plan for ", p->label);
  std::lock_guard<std::mutex> lock(plans_mutex);
  plans.push_back(std::move(p));
  return static_cast<std::int64_t>(plans.size()) - 1;
}

// A 0-d constant per device and dtype (the reduction's one and zero), made once.
at::Tensor cached_scalar(double value, const at::Device& device, at::ScalarType type) {
  struct Entry {
    double value;
    at::Device device;
    at::ScalarType type;
    at::Tensor tensor;
  };
  static std::mutex mutex;
  static auto* cache = new std::vector<Entry>();  // leaked: freed at exit, after CUDA is gone, they would fail
  std::lock_guard<std::mutex> lock(mutex);
  for (const Entry& e : *cache) {
    if (e.value == value && e.device == device && e.type == type) return e.tensor;
  }
  at::Tensor t = at::full({}, value, at::TensorOptions().dtype(type).device(device));
  cache->push_back({value, device, type, t});
  return t;
}

at::DimVector broadcast_shape(const std::vector<at::Tensor>& inputs) {
  at::DimVector shape;
  for (const at::Tensor& t : inputs) shape = at::infer_size_dimvector(shape, t.sizes());
  return shape;
}

bool is_half(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

at::Tensor forward_values(const Plan& p, const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> reads;
  reads.reserve(p.forward_reads.size() + 1);
  for (std::int64_t i : p.forward_reads) reads.push_back(inputs[static_cast<std::size_t>(i)]);
  if (p.reduction == kNone) {
    at::Tensor out = run(p.forward, reads, 1, p.label)[0];
    return out.scalar_type() == p.result_dtype ? out : out.to(p.result_dtype);
  }
  const bool cpu = !inputs[0].is_cuda();
  if (cpu) {
    // The CPU backend evaluates op by op in the operands' dtype: half operands are widened first,
    // so that the values are computed in float as on CUDA.
    for (at::Tensor& t : reads) {
      if (is_half(t.scalar_type())) t = t.to(at::kFloat);
    }
  }
  reads.push_back(cached_scalar(1.0, inputs[0].device(), p.accumulate));
  at::Tensor total = run(p.forward, reads, 1, p.label, &p.accumulate)[0];
  if (p.reduction == kMean) {
    std::int64_t n = 1;  // the summand's elements: the broadcast shape of what it reads
    for (std::int64_t d : broadcast_shape(reads)) n *= d;
    total = total / static_cast<double>(n);
  }
  return total.scalar_type() == p.result_dtype ? total : total.to(p.result_dtype);
}

// The gradients that a backward under grad mode (create_graph=True) returns: they depend on the
// saved inputs and the incoming gradient through tessel's kernel, which has no derivative of its
// own, so their backward raises rather than give a wrong second derivative.
struct SecondDerivativeRefused : public torch::autograd::Function<SecondDerivativeRefused> {
  // `sources`: what the gradient depends on (the edges of the node apply makes).
  static at::Tensor forward(AutogradContext* ctx, const Plan* p, at::Tensor gradient, at::TensorList /*sources*/) {
    ctx->saved_data["plan"] = reinterpret_cast<std::intptr_t>(p);
    return gradient;
  }
  static variable_list backward(AutogradContext* ctx, variable_list) {
    const auto* p = reinterpret_cast<const Plan*>(ctx->saved_data["plan"].toInt());
    TORCH_CHECK(false, p->label,
                ": a second derivative is not supported (its backward kernel has no derivative of its own; "
                "create_graph=True gives the first derivative only)");
  }
};

struct FuseFunction : public torch::autograd::Function<FuseFunction> {
  static at::Tensor forward(AutogradContext* ctx, const Plan* p, at::TensorList inputs) {
    std::vector<at::Tensor> tensors(inputs.begin(), inputs.end());
    at::Tensor out = forward_values(*p, tensors);
    std::vector<at::Tensor> saved;
    saved.reserve(p->saved.size());
    for (std::int64_t i : p->saved) saved.push_back(tensors[static_cast<std::size_t>(i)]);
    ctx->save_for_backward(saved);
    ctx->saved_data["plan"] = reinterpret_cast<std::intptr_t>(p);
    // The shapes the gradients are summed to (flattened: rank, then the sizes), and the shape of
    // fn(*inputs), which a reduction's gradient is broadcast over.
    std::vector<std::int64_t> shapes;
    for (std::int64_t i : p->needed) {
      const at::IntArrayRef s = tensors[static_cast<std::size_t>(i)].sizes();
      shapes.push_back(static_cast<std::int64_t>(s.size()));
      shapes.insert(shapes.end(), s.begin(), s.end());
    }
    ctx->saved_data["shapes"] = std::move(shapes);
    if (p->reduction != kNone) {
      const at::DimVector shape = broadcast_shape(tensors);
      ctx->saved_data["shape"] = std::vector<std::int64_t>(shape.begin(), shape.end());
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* p = reinterpret_cast<const Plan*>(ctx->saved_data["plan"].toInt());
    variable_list result(static_cast<std::size_t>(p->count) + 1);
    at::Tensor grad = grads[0];
    if (!grad.defined()) return result;
    const variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> operands(static_cast<std::size_t>(p->count) + 2);
    for (std::size_t k = 0; k < p->saved.size(); ++k) operands[static_cast<std::size_t>(p->saved[k])] = saved[k];
    at::Tensor incoming = grad;  // the gradient of the output, the one passed through
    if (p->reduction != kNone) {
      const std::vector<std::int64_t> shape = ctx->saved_data["shape"].toIntVector();
      const std::vector<std::int64_t> ones(shape.size(), 1);
      std::int64_t n = 1;
      for (std::int64_t d : shape) n *= d;
      if (p->reduction == kMean) grad = grad / static_cast<double>(n);
      const at::ScalarType low = at::isFloatingType(p->function_dtype) ? p->function_dtype : grad.scalar_type();
      at::Tensor hi, lo;
      if (low == grad.scalar_type()) {
        hi = grad;
        lo = cached_scalar(0.0, grad.device(), low);
      } else {
        hi = grad.to(low);
        lo = ((grad - hi.to(grad.scalar_type())) / kLoScale).to(low);
      }
      hi = hi.reshape(ones).expand(shape);
      lo = lo.reshape(ones).expand(shape);
      if (!grad.is_cuda() && is_half(hi.scalar_type())) {
        // The CPU backend evaluates op by op in the operands' dtype: half operands widened to
        // float32 (hi + lo exactly); each gradient is rounded once below.
        for (at::Tensor& t : operands) {
          if (t.defined() && t.scalar_type() == hi.scalar_type()) t = t.to(at::kFloat);
        }
        hi = hi.to(at::kFloat) + lo.to(at::kFloat) * kLoScale;
        lo = at::zeros_like(hi);
      }
      operands[static_cast<std::size_t>(p->count)] = hi;
      operands[static_cast<std::size_t>(p->count) + 1] = lo;
    } else {
      operands[static_cast<std::size_t>(p->count)] = grad;
    }
    std::vector<at::Tensor> outputs;
    if (p->backward != nullptr) {
      std::vector<at::Tensor> reads;
      reads.reserve(p->backward_reads.size());
      for (std::int64_t r : p->backward_reads) reads.push_back(operands[static_cast<std::size_t>(r)]);
      outputs = run(p->backward, reads, static_cast<std::int32_t>(p->gradient_dtypes.size()), p->label);
    }
    const std::vector<std::int64_t> shapes = ctx->saved_data["shapes"].toIntVector();
    std::size_t at_shape = 0;
    const bool second = torch::autograd::GradMode::is_enabled();
    for (std::size_t k = 0; k < p->needed.size(); ++k) {
      const std::int64_t rank = shapes[at_shape];
      const at::IntArrayRef shape(shapes.data() + at_shape + 1, static_cast<std::size_t>(rank));
      at_shape += static_cast<std::size_t>(rank) + 1;
      at::Tensor g;
      if (p->source[k] < 0) {
        g = incoming;
      } else {
        g = outputs[static_cast<std::size_t>(p->source[k])];
        const at::ScalarType expression = p->gradient_dtypes[static_cast<std::size_t>(p->source[k])];
        if (g.scalar_type() != expression) g = g.to(expression);
      }
      if (g.sizes() != shape) g = g.sum_to_size(shape);  // a broadcast input: summed over its copies
      if (g.scalar_type() != p->input_dtypes[k]) g = g.to(p->input_dtypes[k]);
      if (second && p->source[k] >= 0) {
        std::vector<at::Tensor> sources(saved.begin(), saved.end());
        sources.push_back(incoming);
        g = SecondDerivativeRefused::apply(p, g, at::TensorList(sources));  // a TensorList: its tensors are the edges
      }
      result[static_cast<std::size_t>(p->needed[k]) + 1] = g;
    }
    return result;
  }
};

at::Tensor fuse_forward(std::int64_t id, at::TensorList inputs) {
  const Plan& p = plan_of(id);
  TORCH_CHECK_VALUE(static_cast<std::int64_t>(inputs.size()) == p.count, p.label, ": takes ", p.count,
                    " tensors, got ", inputs.size());
  return forward_values(p, std::vector<at::Tensor>(inputs.begin(), inputs.end()));
}

at::Tensor fuse_autograd(std::int64_t id, at::TensorList inputs) {
  const Plan& p = plan_of(id);
  TORCH_CHECK_VALUE(static_cast<std::int64_t>(inputs.size()) == p.count, p.label, ": takes ", p.count,
                    " tensors, got ", inputs.size());
  return FuseFunction::apply(&p, inputs);
}

void set_api(std::int64_t address) {
  const auto* table = reinterpret_cast<const tessel::python::FusedCApi*>(static_cast<std::uintptr_t>(address));
  TORCH_CHECK(table != nullptr && table->version == tessel::python::kFusedCApiVersion,
              "tessel_torch: the tessel C table has version ", table == nullptr ? 0 : table->version, ", expected ",
              tessel::python::kFusedCApiVersion, " (tessel and its torch ops come from different builds)");
  api = table;
}

}  // namespace

TORCH_LIBRARY(tessel_torch, m) {
  m.def("set_api(int address) -> ()", &set_api);
  m.def("add_plan(str label, int forward, int[] forward_reads, str result_dtype, int reduction, str accumulate, "
        "str function_dtype, int backward, int[] saved, int[] backward_reads, int[] needed, int[] source, "
        "str[] gradient_dtypes, str[] input_dtypes, int count) -> int",
        &add_plan);
  m.def("fuse(int plan, Tensor[] inputs) -> Tensor");
}

TORCH_LIBRARY_IMPL(tessel_torch, Autograd, m) { m.impl("fuse", &fuse_autograd); }
TORCH_LIBRARY_IMPL(tessel_torch, CompositeExplicitAutograd, m) { m.impl("fuse", &fuse_forward); }
