// Launching generated elementwise kernels over memory: layout choice, dimension collapsing, index
// width, launch shape. Backend-neutral: a CUDA device gets the NVRTC kernel (get_kernel raises
// DeviceError without CUDA), the CPU the same spec as host C++ (elementwise_host.hpp), compiled by
// the host compiler and called with the same packed parameters.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "core/inline_buffer.hpp"
#include "jit/elementwise_host.hpp"
#include "tessel/array/shape.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/host_compiler.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {
namespace {

// LaunchKey::device of host kernels (the CPU backend).
constexpr int kHostDevice = -1;

// What selects one compiled kernel of a launcher's spec.
struct LaunchKey {
  ElementwiseLayout layout;
  int rank;
  bool index32;
  int unroll;
  int device;  // the CUDA device's index; kHostDevice for the CPU
  std::uint64_t uniform;  // contiguous: bit k set when operand k is uniform
  bool operator==(const LaunchKey& o) const {
    return layout == o.layout && rank == o.rank && index32 == o.index32 && unroll == o.unroll && device == o.device &&
           uniform == o.uniform;
  }
};
struct LaunchKeyHash {
  std::size_t operator()(const LaunchKey& k) const {
    std::size_t h = static_cast<std::size_t>(k.layout);
    h = h * 31 + static_cast<std::size_t>(k.rank);
    h = h * 31 + static_cast<std::size_t>(k.index32);
    h = h * 31 + static_cast<std::size_t>(k.unroll);
    h = h * 31 + static_cast<std::size_t>(k.device);
    return h * 31 + static_cast<std::size_t>(k.uniform);
  }
};

}  // namespace

bool fits_index32(std::int64_t n, const std::vector<std::int64_t>& dims,
                  const std::vector<std::vector<std::int64_t>>& strides) {
  bool fits = n <= kElementwiseIndex32Limit;
  for (const auto& st : strides) {
    std::int64_t reach = 0;
    for (std::size_t d = 0; d < dims.size(); ++d) reach += std::llabs(st[d]) * (dims[d] - 1);
    fits = fits && reach <= kElementwiseIndex32Limit;
  }
  return fits;
}

ElementwisePlan plan_elementwise(const std::vector<std::int64_t>& shape,
                                 const std::vector<const std::vector<std::int64_t>*>& array_strides) {
  const std::int64_t n = numel(shape);
  bool contiguous = true;
  for (const auto* st : array_strides) contiguous = contiguous && is_contiguous(shape, *st);
  ElementwisePlan plan;
  if (contiguous) {
    plan.index32 = n <= kElementwiseIndex32Limit;
    return plan;
  }
  std::vector<Strides> strides;
  strides.reserve(array_strides.size());
  for (const auto* st : array_strides) strides.push_back(*st);
  CollapsedDims collapsed = collapse_dims(shape, strides);
  plan.layout = ElementwiseLayout::strided;
  plan.rank = static_cast<int>(collapsed.shape.size());
  plan.dims = std::move(collapsed.shape);
  plan.strides = std::move(collapsed.strides);
  plan.index32 = fits_index32(n, plan.dims, plan.strides);
  return plan;
}

// Entries are never removed and unordered_map never moves them: an entry found under the lock is
// read after it without one.
struct ElementwiseLauncher::Cache {
  struct Entry {
    Kernel kernel;  // CUDA
    ElementwiseLaunchShape launch_shape;
    HostKernel host;  // CPU
  };
  std::uint64_t id = 0;  // process-unique: the thread-local fast path below never matches a dead launcher
  std::mutex mutex;
  std::unordered_map<LaunchKey, Entry, LaunchKeyHash> kernels;
};

namespace {

std::uint64_t next_launcher_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// The kernel the calling thread launched last: a loop of the same tiny op finds its kernel with one
// comparison, no lock and no hash.
struct LastLaunch {
  std::uint64_t launcher_id = 0;
  LaunchKey key{};
  const void* entry = nullptr;
};
thread_local LastLaunch last_launch;

}  // namespace

ElementwiseLauncher::ElementwiseLauncher(ElementwiseSpec spec)
    : spec_(std::move(spec)), vec_(vector_width(spec_)), cache_(std::make_unique<Cache>()) {
  cache_->id = next_launcher_id();
}

ElementwiseLauncher::~ElementwiseLauncher() = default;

std::size_t ElementwiseLauncher::num_cached_kernels() const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  return cache_->kernels.size();
}

void ElementwiseLauncher::launch(const std::vector<std::int64_t>& shape, const std::vector<ElementwiseArg>& args,
                                 Device device, const Stream& stream) const {
  tessel::detail::InlineBuffer<ElementwiseArgView, 8> views(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) views[i] = ElementwiseArgView::of(args[i]);
  launch(shape, views.data(), args.size(), device, stream);
}

void ElementwiseLauncher::launch(const std::vector<std::int64_t>& shape, const ElementwiseArgView* args,
                                 std::size_t count, Device device, const Stream& stream) const {
  const ElementwiseSpec& spec = spec_;
  if (count != spec.operands.size()) {
    throw ValueError("elementwise kernel '" + spec.name + "': " + std::to_string(spec.operands.size()) +
                     " operands but " + std::to_string(count) + " arguments");
  }
  auto where = [&] { return "elementwise kernel '" + spec.name + "'"; };  // built only for a message
  std::int64_t n = 1;
  for (std::int64_t s : shape) {
    if (s < 0) throw ShapeError(where() + ": negative dimension in the launch shape");
    n *= s;
  }
  bool contiguous = true;
  // Inputs with every stride 0 (a 0-d array broadcast, such as the gradient of a sum) keep the
  // contiguous layout for the others: read once per thread instead of forcing the strided loop.
  std::uint64_t uniform = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const bool is_scalar = args[i].scalar != nullptr;
    if (spec.operands[i].is_scalar != is_scalar) {
      throw ValueError(where() + ": operand '" + spec.operands[i].name + "' is declared " +
                       (spec.operands[i].is_scalar ? "a scalar" : "an array") + " but given " +
                       (is_scalar ? "a scalar" : "an array"));
    }
    if (is_scalar) continue;
    if (args[i].num_strides != shape.size()) {
      throw ShapeError(where() + ": operand '" + spec.operands[i].name + "' has " +
                       std::to_string(args[i].num_strides) + " strides for a rank-" + std::to_string(shape.size()) +
                       " launch");
    }
    if (args[i].data == nullptr && n > 0) throw ValueError(where() + ": operand '" + spec.operands[i].name + "' has no data");
    const ElementwiseOperand& op = spec.operands[i];
    if (n > 1 && i < 64 && !op.is_output && !op.is_pointer) {
      bool same = true;
      for (std::size_t d = 0; d < shape.size(); ++d) same = same && (shape[d] == 1 || args[i].strides[d] == 0);
      if (same) {
        uniform |= std::uint64_t{1} << i;
        continue;
      }
    }
    contiguous = contiguous && is_contiguous_at(shape, args[i].strides);
  }
  if (!contiguous) uniform = 0;  // the strided layout reads them through their 0 strides
  const bool host = !device.is_cuda();
  if (n == 0) return;

  // The contiguous plan needs no strides; only a strided launch copies them to collapse dims.
  ElementwisePlan plan;
  plan.index32 = n <= kElementwiseIndex32Limit;
  if (!contiguous) {
    std::vector<std::vector<std::int64_t>> strides;
    std::vector<const std::vector<std::int64_t>*> array_strides;
    strides.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (args[i].scalar == nullptr) strides.emplace_back(args[i].strides, args[i].strides + args[i].num_strides);
    }
    for (const auto& st : strides) array_strides.push_back(&st);
    plan = plan_elementwise(shape, array_strides);
  }
  if (plan.rank > kMaxElementwiseRank) {
    throw ValueError(where() + ": " + std::to_string(plan.rank) + " dimensions after collapsing; at most " +
                     std::to_string(kMaxElementwiseRank) + " are supported");
  }

  // Parameter storage: every pointer in `params` points into these, which never move. Layout as
  // generate_elementwise_source emits: n; then `aligned` (contiguous) or the collapsed dims
  // (strided); then per array operand its pointer and, strided, its strides; scalars by value.
  const std::size_t rank = static_cast<std::size_t>(plan.rank);
  tessel::detail::InlineBuffer<void*, 18> params(2 + 2 * count);
  tessel::detail::InlineBuffer<std::int64_t, 16> words(contiguous ? 1 : 1 + rank * (count + 1));
  tessel::detail::InlineBuffer<const void*, 8> pointers(count);
  std::size_t num_params = 0, num_words = 0;
  int aligned = 1;
  std::int64_t work = n;

  words[num_words] = n;
  params[num_params++] = &words[num_words++];
  const ElementwiseTuning tuning = tuning_for(spec, elementwise_tuning());
  if (contiguous) {
    for (std::size_t i = 0; i < count; ++i) {
      if (spec.operands[i].is_scalar || spec.operands[i].is_pointer || (uniform >> i & 1)) continue;
      const auto bytes = static_cast<std::uintptr_t>(vec_ * itemsize(spec.operands[i].dtype));
      if (reinterpret_cast<std::uintptr_t>(args[i].data) % bytes != 0) aligned = 0;
    }
    params[num_params++] = &aligned;
    work = elementwise_threads(n, aligned != 0, vec_, tuning.unroll);
  } else {
    params[num_params++] = &words[num_words];
    for (std::int64_t d : plan.dims) words[num_words++] = d;
  }
  std::size_t array_k = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (spec.operands[i].is_scalar) {
      params[num_params++] = const_cast<unsigned char*>(args[i].scalar);
      continue;
    }
    pointers[i] = args[i].data;
    params[num_params++] = &pointers[i];
    if (!contiguous) {
      params[num_params++] = &words[num_words];
      for (std::int64_t st : plan.strides[array_k]) words[num_words++] = st;
    }
    ++array_k;
  }

  // The unroll only shapes the contiguous kernel; the strided one keeps the spec's.
  // On the host only the layout, the rank and the uniform inputs select the code.
  const LaunchKey key = host ? LaunchKey{plan.layout, plan.rank, false, 1, kHostDevice, uniform}
                             : LaunchKey{plan.layout, plan.rank, plan.index32,
                                         contiguous ? tuning.unroll : spec.unroll, device.index, uniform};
  const Cache::Entry* entry = nullptr;
  LastLaunch& last = last_launch;
  if (last.launcher_id == cache_->id && last.key == key) {
    entry = static_cast<const Cache::Entry*>(last.entry);
  } else {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->kernels.find(key);
    if (it != cache_->kernels.end()) entry = &it->second;
  }
  if (entry == nullptr) {
    ElementwiseSpec variant = spec;
    variant.layout = plan.layout;
    variant.rank = plan.rank;
    variant.index32 = plan.index32;
    variant.unroll = key.unroll;
    for (std::size_t i = 0; i < count && i < 64; ++i) variant.operands[i].is_uniform = (uniform >> i & 1) != 0;
    Cache::Entry loaded;
    if (host) {
      HostCompileRequest request;
      request.source = detail::generate_elementwise_host_source(variant);
      request.symbol = detail::elementwise_host_symbol(variant);
      // No a * b + c contracted into an FMA: results do not depend on whether the CPU has FMA
      // (-march=native), and plain arithmetic rounds as NumPy and the CPU backend's ops do.
      request.options = {detail::kHostContractFlag};
      loaded.host = get_host_kernel(request);  // compiles or loads outside the lock
    } else {
      CompileRequest request;
      request.source = generate_elementwise_source(variant);
      request.name = elementwise_kernel_name(variant);
      loaded.kernel = get_kernel(request, device);  // compiles or loads outside the lock
      loaded.launch_shape = ElementwiseLaunchShape::of(loaded.kernel, tuning);
    }
    std::lock_guard<std::mutex> lock(cache_->mutex);
    entry = &cache_->kernels.emplace(key, std::move(loaded)).first->second;  // another thread's wins a race
  }
  last = LastLaunch{cache_->id, key, entry};
  if (host) {
    // Runs on this thread (OpenMP inside), done when it returns.
    entry->host.launch(LaunchConfig{}, params.data());
    return;
  }
  // Kernel::launch makes the kernel's device current for the launch (the one device guard of
  // every generated kernel).
  LaunchConfig config = entry->launch_shape.config(entry->kernel, work, tuning);
  entry->kernel.launch(config, params.data(), stream);
}

}  // namespace tessel::jit
