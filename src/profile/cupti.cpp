// GPU activity through CUPTI's Activity API. libcupti is loaded with dlopen when a session
// starts, so the library loads (and profiles host ops) where CUPTI is absent.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "profile/recorder.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/log.hpp"
#include "tessel/profile/hooks.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>
#endif

namespace tessel::profile::detail {

#if defined(TESSEL_HAVE_CUDA)
namespace {

struct CuptiApi {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  std::string error;  // why it could not be loaded
};

template <class F>
bool load_symbol(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

const CuptiApi& cupti_api() {
  static const CuptiApi api = [] {
    CuptiApi a;
    std::vector<std::string> candidates;
    if (const char* path = std::getenv("TESSEL_CUPTI_LIBRARY"); path && *path) {
      candidates.push_back(path);  // an explicit choice: nothing else is tried
    } else {
#if defined(TESSEL_CUPTI_LIBRARY_PATH)
      candidates.push_back(TESSEL_CUPTI_LIBRARY_PATH);
#endif
      for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                               "/usr/local/cuda/lib64/libcupti.so"}) {
        candidates.push_back(name);
      }
    }
    void* lib = nullptr;
    for (const std::string& name : candidates) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      a.error = fmt::format("libcupti could not be loaded (tried {}; set TESSEL_CUPTI_LIBRARY to its path)",
                            fmt::join(candidates, ", "));
      return a;
    }
    const bool ok = load_symbol(lib, "cuptiActivityRegisterCallbacks", a.register_callbacks) &&
                    load_symbol(lib, "cuptiActivityEnable", a.enable) &&
                    load_symbol(lib, "cuptiActivityDisable", a.disable) &&
                    load_symbol(lib, "cuptiActivityFlushAll", a.flush_all) &&
                    load_symbol(lib, "cuptiActivityGetNextRecord", a.next_record) &&
                    load_symbol(lib, "cuptiActivityPushExternalCorrelationId", a.push_external) &&
                    load_symbol(lib, "cuptiActivityPopExternalCorrelationId", a.pop_external) &&
                    load_symbol(lib, "cuptiGetTimestamp", a.timestamp) &&
                    load_symbol(lib, "cuptiGetResultString", a.result_string);
    if (!ok) a.error = "libcupti lacks an Activity API function tessel needs";
    return a;
  }();
  return api;
}

std::string result_text(CUptiResult r) {
  const char* text = nullptr;
  if (cupti_api().result_string && cupti_api().result_string(r, &text) == CUPTI_SUCCESS && text) return text;
  return fmt::format("CUPTI error {}", static_cast<int>(r));
}

// CUPTI writes an external-correlation record (op id -> CUDA correlation id) only in front of an
// API record, so the driver and runtime API kinds are on too; their records are skipped. Without
// them the kernels came back with no op (H100, CUDA 13.0's CUPTI).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr std::size_t kBufferBytes = 8u << 20;

std::atomic<bool> g_running{false};
std::mutex g_state_mutex;            // guards the fields below
Session::Data* g_target = nullptr;   // the session receiving records
std::int64_t g_offset_ns = 0;        // steady_clock - CUPTI timestamp
std::unordered_map<std::uint32_t, std::uint64_t> g_external;  // CUPTI correlation -> op id
bool g_callbacks_registered = false;

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string result(out);
  std::free(out);
  return result;
}

const char* memcpy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    default: return "memcpy";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI requires 8-byte alignment.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_state_mutex);
  CUpti_Activity* record = nullptr;
  while (g_target && cupti_api().next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    GpuEvent e;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        e.kind = GpuEventKind::kernel;
        e.name = demangle(k->name);
        e.device = static_cast<int>(k->deviceId);
        e.stream = k->streamId;
        e.start_ns = static_cast<std::int64_t>(k->start) + g_offset_ns;
        e.end_ns = static_cast<std::int64_t>(k->end) + g_offset_ns;
        e.correlation = k->correlationId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        e.kind = GpuEventKind::memcpy;
        e.name = memcpy_name(m->copyKind);
        e.device = static_cast<int>(m->deviceId);
        e.stream = m->streamId;
        e.start_ns = static_cast<std::int64_t>(m->start) + g_offset_ns;
        e.end_ns = static_cast<std::int64_t>(m->end) + g_offset_ns;
        e.correlation = m->correlationId;
        e.bytes = m->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        e.kind = GpuEventKind::memset;
        e.name = "memset";
        e.device = static_cast<int>(m->deviceId);
        e.stream = m->streamId;
        e.start_ns = static_cast<std::int64_t>(m->start) + g_offset_ns;
        e.end_ns = static_cast<std::int64_t>(m->end) + g_offset_ns;
        e.correlation = m->correlationId;
        e.bytes = m->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) g_external[x->correlationId] = x->externalId;
        continue;
      }
      default:
        continue;
    }
    g_target->push(g_target->gpu, std::move(e));
  }
  std::free(buffer);
}

void synchronize_devices() {
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    try {
      synchronize(Device::cuda(i));
    } catch (const std::exception& e) {
      TESSEL_LOG_WARN(fmt::format("profile: synchronizing cuda:{} before the CUPTI flush failed: {}", i, e.what()));
    }
  }
}

}  // namespace

std::string cupti_start(Session::Data* data) {
  if (!cuda_available()) return "no CUDA device (" + cuda_unavailable_reason() + ")";
  const CuptiApi& api = cupti_api();
  if (!api.error.empty()) return api.error;
  std::lock_guard<std::mutex> lock(g_state_mutex);
  if (!g_callbacks_registered) {
    const CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
      return fmt::format("CUPTI is unavailable (cuptiActivityRegisterCallbacks: {}); another profiler such as "
                         "Nsight Systems may be using it",
                         result_text(r));
    }
    g_callbacks_registered = true;
  }
  for (std::size_t i = 0; i < std::size(kKinds); ++i) {
    const CUptiResult r = api.enable(kKinds[i]);
    if (r != CUPTI_SUCCESS) {
      for (std::size_t j = 0; j < i; ++j) api.disable(kKinds[j]);
      return fmt::format("CUPTI is unavailable (cuptiActivityEnable: {}); another profiler such as Nsight Systems "
                         "may be using it",
                         result_text(r));
    }
  }
  // The clock offset, from a CUPTI timestamp bracketed by two steady_clock readings.
  const std::int64_t before = now_ns();
  std::uint64_t cupti_now = 0;
  api.timestamp(&cupti_now);
  const std::int64_t after = now_ns();
  g_offset_ns = (before + after) / 2 - static_cast<std::int64_t>(cupti_now);
  g_target = data;
  g_external.clear();
  g_running.store(true);
  return {};
}

void cupti_stop() {
  if (!g_running.exchange(false)) return;
  const CuptiApi& api = cupti_api();
  synchronize_devices();
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) api.disable(kind);
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_state_mutex);
  if (g_target) {
    std::lock_guard<std::mutex> data_lock(g_target->mutex);
    for (GpuEvent& e : g_target->gpu) {
      if (auto it = g_external.find(e.correlation); it != g_external.end()) e.op_id = it->second;
    }
  }
  g_target = nullptr;
  g_external.clear();
}

bool cupti_running() { return g_running.load(std::memory_order_relaxed); }

void cupti_push_correlation(std::uint64_t op_id) {
  cupti_api().push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, op_id);
}

void cupti_pop_correlation() {
  std::uint64_t last = 0;
  cupti_api().pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

#else

std::string cupti_start(Session::Data*) { return "tessel was built without CUDA"; }
void cupti_stop() {}
bool cupti_running() { return false; }
void cupti_push_correlation(std::uint64_t) {}
void cupti_pop_correlation() {}

#endif

}  // namespace tessel::profile::detail
