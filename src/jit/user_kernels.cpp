#include "tessel/jit/user_kernels.hpp"

#include <cctype>
#include <map>
#include <mutex>
#include <sstream>

#include "core/inline_buffer.hpp"
#include "jit/elementwise_host.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/checks.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::jit {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

[[noreturn]] void needs_cuda(const std::string& what, const std::string& name, const std::string& why) {
  throw DeviceError(what + " '" + name + "': needs a CUDA device; " + why);
}

Device check_cuda_device(const std::string& what, const std::string& name, Device device) {
  if (!cuda_available()) needs_cuda(what, name, "CUDA is unavailable: " + cuda_unavailable_reason());
  if (!device.is_cuda()) needs_cuda(what, name, "got " + device.str());
  return device;
}

}  // namespace

struct RawKernel::Loaded {
  std::mutex mutex;
  std::map<int, Kernel> by_device;
};

RawKernel::RawKernel(std::string source, std::string name, std::vector<std::string> options)
    : loaded_(std::make_shared<Loaded>()) {
  if (name.empty()) throw ValueError("RawKernel: the kernel name is empty");
  request_.source = std::move(source);
  request_.name = std::move(name);
  request_.options = std::move(options);
}

namespace {

// Checked mode `bounds`: the launch synchronizes, so a fault inside the kernel (an out-of-range
// index shows up as an illegal address) is raised here, naming the kernel.
void synchronize_checked(const char* what, const std::string& name, const Stream& stream) {
  try {
    stream.synchronize();
  } catch (const CudaError& e) {
    throw CudaError(std::string("checked mode (bounds): ") + what + " '" + name + "' failed: " + e.what() +
                        " (run under compute-sanitizer for the faulting access)",
                    e.code(), e.fatal());
  }
}

}  // namespace

Kernel RawKernel::kernel(Device device) const {
  check_cuda_device("RawKernel", request_.name, device);
  {
    std::lock_guard<std::mutex> lock(loaded_->mutex);
    const auto it = loaded_->by_device.find(device.index);
    if (it != loaded_->by_device.end()) return it->second;
  }
  // Compiled outside the lock: a compile can take a second, and two threads racing here load the
  // same cached binary.
  Kernel k = get_kernel(request_, device);
  std::lock_guard<std::mutex> lock(loaded_->mutex);
  return loaded_->by_device.emplace(device.index, std::move(k)).first->second;
}

void RawKernel::launch(Dim3 grid, Dim3 block, const std::vector<KernelArg>& args, std::size_t shared_mem,
                       const std::optional<Stream>& stream) const {
  TESSEL_RANGE(request_.name.c_str(), "RawKernel", stream);
  if (!cuda_available()) needs_cuda("RawKernel", request_.name, "CUDA is unavailable: " + cuda_unavailable_reason());
  const Stream s = stream ? *stream : current_stream(current_device());
  const Kernel k = kernel(s.device());
  std::vector<void*> params;
  params.reserve(args.size());
  for (const KernelArg& a : args) params.push_back(const_cast<void*>(a.data()));
  LaunchConfig config;
  config.grid = grid;
  config.block = block;
  config.shared_mem = shared_mem;
  k.launch(config, params, s);
  if (profile::checks() & profile::check_bounds) synchronize_checked("RawKernel", request_.name, s);
}

std::vector<ElementwiseOperand> parse_elementwise_params(const std::string& params, bool outputs,
                                                         const std::string& kernel_name) {
  std::vector<ElementwiseOperand> out;
  const std::string where = "ElementwiseKernel '" + kernel_name + "': ";
  if (trim(params).empty()) return out;
  std::stringstream list(params);
  std::string item;
  while (std::getline(list, item, ',')) {
    std::istringstream words(trim(item));
    std::string type, name, extra;
    words >> type >> name >> extra;
    if (type == "raw") {
      throw ValueError(where + "'raw' parameters are not supported yet (in \"" + trim(item) + "\")");
    }
    if (type.empty() || name.empty() || !extra.empty()) {
      throw ValueError(where + "each parameter is \"<dtype> <name>\", got \"" + trim(item) + "\"");
    }
    ElementwiseOperand op;
    op.dtype = parse_dtype(type);
    op.name = name;
    op.is_output = outputs;
    out.push_back(op);
  }
  return out;
}

// Launchers are made on first use of a binding and never removed: a pointer found under the lock
// stays valid after it.
struct ElementwiseKernel::Launchers {
  std::mutex mutex;
  std::map<std::uint64_t, std::unique_ptr<ElementwiseLauncher>> by_binding;  // bit i: operand i is a scalar
};

ElementwiseKernel::ElementwiseKernel(const std::string& in_params, const std::string& out_params, std::string body,
                                     std::string name, std::string preamble) {
  spec_.name = std::move(name);
  spec_.operands = parse_elementwise_params(in_params, false, spec_.name);
  for (auto& op : parse_elementwise_params(out_params, true, spec_.name)) spec_.operands.push_back(op);
  // The launchers are keyed by a 64-bit mask of which operands are scalars.
  if (spec_.operands.size() > 64) {
    throw ValueError("ElementwiseKernel '" + spec_.name + "': at most 64 parameters, got " +
                     std::to_string(spec_.operands.size()));
  }
  std::string b = trim(body);
  if (!b.empty() && b.back() != ';' && b.back() != '}') b += ';';  // CuPy bodies may omit it
  spec_.body = b;
  spec_.preamble = std::move(preamble);
  spec_.widen_half = false;  // user code sees the declared types
  generate_elementwise_source(spec_);  // validates names now rather than at the first launch
  launchers_ = std::make_shared<Launchers>();
}

std::string ElementwiseKernel::source(ElementwiseLayout layout, int rank, bool index32) const {
  ElementwiseSpec s = spec_;
  s.layout = layout;
  s.rank = rank;
  s.index32 = index32;
  return generate_elementwise_source(s);
}

std::string ElementwiseKernel::host_source(ElementwiseLayout layout, int rank) const {
  ElementwiseSpec s = spec_;
  s.layout = layout;
  s.rank = rank;
  return detail::generate_elementwise_host_source(s);
}

void ElementwiseKernel::launch(const std::vector<std::int64_t>& shape, const std::vector<ElementwiseArg>& args,
                               Device device, const std::optional<Stream>& stream) const {
  tessel::detail::InlineBuffer<ElementwiseArgView, 8> views(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) views[i] = ElementwiseArgView::of(args[i]);
  launch(shape, views.data(), args.size(), device, stream);
}

void ElementwiseKernel::launch(const std::vector<std::int64_t>& shape, const ElementwiseArgView* args,
                               std::size_t count, Device device, const std::optional<Stream>& stream) const {
  TESSEL_RANGE(spec_.name.c_str(), "ElementwiseKernel", stream);
  // The CPU backend runs the host C++ version of the kernel (host_compiler.hpp).
  if (device.is_cuda()) check_cuda_device("ElementwiseKernel", spec_.name, device);
  if (count != spec_.operands.size()) {
    throw ValueError("ElementwiseKernel '" + spec_.name + "': takes " + std::to_string(spec_.operands.size()) +
                     " arguments (inputs then outputs), got " + std::to_string(count));
  }
  std::uint64_t binding = 0;  // bit i: operand i is a scalar (at most 64 operands, see the constructor)
  for (std::size_t i = 0; i < count; ++i) {
    const bool is_scalar = args[i].scalar != nullptr;
    if (spec_.operands[i].is_output && is_scalar) {
      throw ValueError("ElementwiseKernel '" + spec_.name + "': output '" + spec_.operands[i].name + "' must be an array");
    }
    if (is_scalar) binding |= std::uint64_t{1} << i;
  }
  const ElementwiseLauncher* launcher = nullptr;
  {
    std::lock_guard<std::mutex> lock(launchers_->mutex);
    std::unique_ptr<ElementwiseLauncher>& slot = launchers_->by_binding[binding];
    if (!slot) {
      ElementwiseSpec s = spec_;
      for (std::size_t i = 0; i < count; ++i) s.operands[i].is_scalar = (binding >> i) & 1u;
      slot = std::make_unique<ElementwiseLauncher>(std::move(s));  // cheap: compiles nothing yet
    }
    launcher = slot.get();
  }
  const Stream s = stream ? *stream : current_stream(device);
  launcher->launch(shape, args, count, device, s);
  if (device.is_cuda() && (profile::checks() & profile::check_bounds)) {
    synchronize_checked("ElementwiseKernel", spec_.name, s);
  }
}

}  // namespace tessel::jit
