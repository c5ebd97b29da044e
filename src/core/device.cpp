#include "tessel/core/device.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "build_info.hpp"
#include "core/cuda_check.hpp"
#include "core/not_built.hpp"
#if defined(TESSEL_HAVE_CUDA)
#include <cuda.h>
#endif
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"

namespace tessel {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  const std::string prefix = "cuda:";
  if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0 &&
      text.size() - prefix.size() <= 6) {
    const std::string digits = text.substr(prefix.size());
    bool all_digits = true;
    for (char c : digits) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
    if (all_digits) return cuda(std::stoi(digits));
  }
  throw DeviceError(fmt::format("Device: '{}' is not a device; expected 'cpu', 'cuda' or 'cuda:N'", text));
}

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

namespace {

struct Runtime {
  bool available = false;
  std::string reason;
  int driver = 0;
  int runtime = 0;
  std::vector<DeviceProperties> devices;
};

#if defined(TESSEL_HAVE_CUDA)
// Dense per-SM, per-clock rates by compute capability; 0 where not known.
int fp32_lanes_per_sm(int major, int minor) {
  if (major == 6 && minor == 0) return 64;
  if (major == 7 || (major == 8 && minor == 0)) return 64;
  return 128;
}
int fp64_lanes_per_sm(int major, int minor) {
  if ((major == 6 && minor == 0) || (major == 7 && minor == 0) || (major == 8 && minor == 0)) return 32;
  if (major == 9 || major == 10) return 64;
  return 2;
}
int bf16_tensor_flops_per_clock_per_sm(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;
  if (major == 8) return 512;
  if (major == 9) return 4096;
  if (major == 10) return 8192;
  return 0;
}

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  TESSEL_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device), "device_properties");
  return value;
}

DeviceProperties query_properties(int index) {
  cudaDeviceProp prop{};
  TESSEL_CUDA_CHECK(cudaGetDeviceProperties(&prop, index), "device_properties");
  DeviceProperties p;
  p.index = index;
  p.name = prop.name;
  p.cc_major = prop.major;
  p.cc_minor = prop.minor;
  p.multiprocessors = prop.multiProcessorCount;
  p.total_memory = prop.totalGlobalMem;
  p.l2_cache = static_cast<std::size_t>(prop.l2CacheSize);
  p.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  p.max_threads_per_multiprocessor = prop.maxThreadsPerMultiProcessor;
  p.warp_size = prop.warpSize;
  p.clock_khz = attribute(cudaDevAttrClockRate, index);
  p.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, index);
  p.memory_bus_width_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, index);
  const double sm_hz = p.clock_khz * 1e3;
  p.peak_bandwidth_bytes_per_s = 2.0 * p.memory_clock_khz * 1e3 * p.memory_bus_width_bits / 8.0;
  p.peak_fp32_flops = double(p.multiprocessors) * fp32_lanes_per_sm(p.cc_major, p.cc_minor) * 2.0 * sm_hz;
  p.peak_fp64_flops = double(p.multiprocessors) * fp64_lanes_per_sm(p.cc_major, p.cc_minor) * 2.0 * sm_hz;
  p.peak_bf16_tensor_flops =
      double(p.multiprocessors) * bf16_tensor_flops_per_clock_per_sm(p.cc_major, p.cc_minor) * sm_hz;
  return p;
}
#endif

#if defined(TESSEL_HAVE_CUDA)
std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// The oldest Linux driver branch that runs a CUDA major version (NVIDIA's CUDA release notes).
int minimum_driver_branch(int cuda_major) {
  switch (cuda_major) {
    case 13: return 580;
    case 12: return 525;
    default: return 0;
  }
}

std::string driver_reason(cudaError_t status, int driver, int runtime) {
  const int branch = minimum_driver_branch(runtime / 1000);
  const std::string needed = branch > 0 ? fmt::format("driver {} or newer", branch) : std::string("a newer driver");
  if (status == cudaErrorInsufficientDriver && driver == 0) {
    return fmt::format("no NVIDIA driver found (libcuda.so.1 could not be loaded); a GPU needs the NVIDIA driver, "
                       "{} for this tessel's CUDA {} runtime", needed, cuda_version_text(runtime));
  }
  if (status == cudaErrorInsufficientDriver) {
    return fmt::format("the NVIDIA driver is too old: it supports CUDA {}, and this tessel's CUDA {} runtime needs {} "
                       "(nvidia-smi shows the driver's version)", cuda_version_text(driver), cuda_version_text(runtime),
                       needed);
  }
  return fmt::format("no usable CUDA driver or GPU ({}: {})", cudaGetErrorName(status), cudaGetErrorString(status));
}
#endif

}  // namespace

namespace detail {

bool cuda_architectures_cover(const std::string& architectures, int major, int minor) {
  const int cc = major * 10 + minor;
  std::size_t start = 0;
  while (start <= architectures.size()) {
    std::size_t end = architectures.find_first_of(";, ", start);
    if (end == std::string::npos) end = architectures.size();
    const std::string entry = architectures.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    if (entry == "native" || entry == "all" || entry == "all-major") return true;
    std::size_t digits = 0;
    while (digits < entry.size() && std::isdigit(static_cast<unsigned char>(entry[digits]))) ++digits;
    if (digits == 0) continue;
    const int arch = std::stoi(entry.substr(0, digits));
    std::string rest = entry.substr(digits);
    char variant = 0;  // 'a': this exact architecture only; 'f': its family (same major, same or higher minor)
    if (!rest.empty() && (rest[0] == 'a' || rest[0] == 'f')) {
      variant = rest[0];
      rest = rest.substr(1);
    }
    const bool sass = rest.empty() || rest == "-real";
    const bool ptx = rest.empty() || rest == "-virtual";
    const bool same_major = arch / 10 == major;
    if (variant == 'a') {
      if (arch == cc) return true;
    } else if (variant == 'f' || sass) {
      // SASS runs on the same major at the same or a higher minor; so does a family's PTX.
      if (same_major && arch % 10 <= minor) return true;
    }
    if (ptx && variant == 0 && arch <= cc) return true;  // PTX is compiled for newer GPUs by the driver
  }
  return false;
}

}  // namespace detail

namespace {

Runtime probe() {
  Runtime r;
#if !defined(TESSEL_HAVE_CUDA)
  r.reason = std::string(::tessel::detail::kCudaNotBuilt) + " (-DTESSEL_CUDA=OFF)";
#else
  cudaRuntimeGetVersion(&r.runtime);
  if (config().force_cpu) {
    r.reason = "TESSEL_FORCE_CPU=1";
  } else {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    cudaDriverGetVersion(&r.driver);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      r.reason = driver_reason(status, r.driver, r.runtime);
    } else if (count == 0) {
      r.reason = "no CUDA GPU found";
    } else {
      try {
        for (int i = 0; i < count; ++i) r.devices.push_back(query_properties(i));
        r.available = true;
        // A GPU this build has no code for (a wheel's fixed list, or an explicit CMAKE_CUDA_ARCHITECTURES):
        // the ahead-of-time kernels could not launch, so the CPU backend runs instead, and says why.
        for (const DeviceProperties& p : r.devices) {
          if (!detail::cuda_architectures_cover(TESSEL_BUILD_CUDA_ARCHITECTURES, p.cc_major, p.cc_minor)) {
            r.available = false;
            r.reason = fmt::format(
                "cuda:{} ({}) has compute capability {}.{}, and this tessel has no GPU code for it (built for "
                "CUDA architectures {}); build tessel from source, which compiles for the GPUs it sees "
                "(docs/getting-started.rst)",
                p.index, p.name, p.cc_major, p.cc_minor, TESSEL_BUILD_CUDA_ARCHITECTURES);
            r.devices.clear();
            break;
          }
        }
      } catch (const Error& e) {
        r.devices.clear();
        r.reason = std::string("CUDA GPU found but unusable: ") + e.what();
      }
    }
  }
#endif
  if (!r.available) TESSEL_LOG_WARN("CUDA unavailable: " + r.reason + "; running on the CPU backend");
  return r;
}

const Runtime& runtime() {
  static const Runtime r = probe();
  return r;
}

}  // namespace

bool cuda_available() { return runtime().available; }
std::string cuda_unavailable_reason() { return runtime().reason; }
int device_count() { return static_cast<int>(runtime().devices.size()); }
int driver_version() { return runtime().driver; }
int runtime_version() { return runtime().runtime; }

void check_device_index(int index, const char* op) {
  const int count = device_count();
  if (index < 0 || index >= count) {
    if (count == 0) {
      throw DeviceError(fmt::format("{}: cuda:{} requested but CUDA is unavailable ({})", op, index,
                                    cuda_unavailable_reason()));
    }
    throw DeviceError(fmt::format("{}: invalid device index {}; {} CUDA device{} (valid: 0..{})", op,
                                  index, count, count == 1 ? "" : "s", count - 1));
  }
}

const DeviceProperties& device_properties(int index) {
  check_device_index(index, "device_properties");
  return runtime().devices[static_cast<std::size_t>(index)];
}

#if defined(TESSEL_HAVE_CUDA)
namespace {

// cuCtxGetCurrent from the driver (tessel does not link libcuda); null when the entry point is
// missing, and the guard then asks the runtime each time.
using CtxGetCurrentFn = CUresult (*)(CUcontext*);
CtxGetCurrentFn ctx_get_current() {
  static const CtxGetCurrentFn fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const bool ok = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault, &found) ==
                        cudaSuccess &&
                    found == cudaDriverEntryPointSuccess;
    (void)cudaGetLastError();
    return ok ? reinterpret_cast<CtxGetCurrentFn>(entry) : nullptr;
  }();
  return fn;
}

void* current_context() {
  CUcontext context = nullptr;
  const CtxGetCurrentFn fn = ctx_get_current();
  if (fn == nullptr || fn(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

// The primary context of each device, learned when tessel makes the device current (null until
// then). Written once per device with the same value by any thread; leaked with the process.
std::atomic<void*>* primary_contexts() {
  static std::atomic<void*>* const table = [] {
    const auto count = static_cast<std::size_t>(std::max(device_count(), 1));
    auto* t = new std::atomic<void*>[count];
    for (std::size_t i = 0; i < count; ++i) t[i].store(nullptr);
    return t;
  }();
  return table;
}

// cudaSetDevice, remembering the device's primary context (which it made current).
void set_device_and_learn(int index, const char* op) {
  TESSEL_CUDA_CHECK(cudaSetDevice(index), op);
  primary_contexts()[index].store(current_context(), std::memory_order_relaxed);
}

}  // namespace
#endif

Device current_device() {
  if (!cuda_available()) return Device::cpu();
#if defined(TESSEL_HAVE_CUDA)
  int index = 0;
  TESSEL_CUDA_CHECK(cudaGetDevice(&index), "current_device");
  return Device::cuda(index);
#else
  return Device::cpu();
#endif
}

void set_current_device(int index) {
  check_device_index(index, "set_current_device");
#if defined(TESSEL_HAVE_CUDA)
  set_device_and_learn(index, "set_current_device");
#endif
}

Device default_device() { return current_device(); }

void synchronize(Device device) {
  if (device.is_cpu()) return;
  check_device_index(device.index, "synchronize");
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(device);
  TESSEL_CUDA_CHECK(cudaDeviceSynchronize(), "synchronize");
#endif
}

void synchronize() { synchronize(current_device()); }

bool peer_access(Device a, Device b) {
  if (!a.is_cuda() || !b.is_cuda()) throw DeviceError("peer_access: expects two CUDA devices, got " + a.str() + " and " + b.str());
  check_device_index(a.index, "peer_access");
  check_device_index(b.index, "peer_access");
  if (a == b) return true;
#if defined(TESSEL_HAVE_CUDA)
  // One entry per unordered pair: 0 not asked yet, 1 enabled, 2 not possible.
  static const int count = device_count();
  static std::atomic<std::uint8_t>* const state = [] {
    auto* t = new std::atomic<std::uint8_t>[static_cast<std::size_t>(count * count)];
    for (int i = 0; i < count * count; ++i) t[i].store(0);
    return t;
  }();
  static std::mutex mutex;
  const int low = std::min(a.index, b.index), high = std::max(a.index, b.index);
  std::atomic<std::uint8_t>& entry = state[low * count + high];
  if (const std::uint8_t known = entry.load(std::memory_order_acquire); known != 0) return known == 1;
  std::lock_guard<std::mutex> lock(mutex);
  if (const std::uint8_t known = entry.load(std::memory_order_relaxed); known != 0) return known == 1;
  bool possible = config().peer_access;
  for (const auto& [from, to] : {std::pair{low, high}, std::pair{high, low}}) {
    if (!possible) break;
    int can = 0;
    TESSEL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to), "peer_access");
    possible = can == 1;
    if (!possible) break;
    DeviceGuard guard(Device::cuda(from));
    const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
    if (status == cudaSuccess) continue;
    if (detail::is_sticky_error(status)) TESSEL_CUDA_CHECK(status, "peer_access");
    (void)cudaGetLastError();
    // Enabled before (by tessel's caller) is fine; anything else (too many peers) falls back to
    // copies the driver stages.
    possible = status == cudaErrorPeerAccessAlreadyEnabled;
    if (!possible) {
      TESSEL_LOG_WARN(fmt::format("peer_access: enabling cuda:{} -> cuda:{} failed ({}); copies between them are "
                                  "staged through host memory",
                                  from, to, cudaGetErrorString(status)));
    }
  }
  entry.store(possible ? 1 : 2, std::memory_order_release);
  TESSEL_LOG_INFO(fmt::format("{} <-> {}: {}", Device::cuda(low).str(), Device::cuda(high).str(),
                              possible ? "peer access enabled" : "no peer access; copies are staged through host memory"));
  return possible;
#else
  return false;
#endif
}

void DeviceGuard::enter(int index) {
  check_device_index(index, "DeviceGuard");
#if defined(TESSEL_HAVE_CUDA)
  // With one device, device 0 is always the current one.
  static const bool enabled = config().device_guard;
  if (device_count() == 1 || !enabled) return;
  void* const current = current_context();
  if (current != nullptr && current == primary_contexts()[index].load(std::memory_order_relaxed)) return;
  switch_to(index);
#endif
}

void DeviceGuard::switch_to(int index) {
#if defined(TESSEL_HAVE_CUDA)
  // Also when the runtime already names `index`: the thread may have no context yet, or another
  // one; cudaSetDevice binds the primary context, which the fast path then recognizes.
  int previous = 0;
  TESSEL_CUDA_CHECK(cudaGetDevice(&previous), "DeviceGuard");
  set_device_and_learn(index, "DeviceGuard");
  if (previous != index) previous_ = previous;
#else
  (void)index;
#endif
}

DeviceGuard::~DeviceGuard() {
#if defined(TESSEL_HAVE_CUDA)
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
#endif
}

}  // namespace tessel
