// GPU activity through CUPTI's Activity API, linked to ops through CUPTI's Callback API.
// libcupti is loaded with dlopen when a session starts, so the library loads (and profiles host
// ops) where CUPTI is absent.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/not_built.hpp"
#include "core/shared_library.hpp"
#include "profile/recorder.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/profile/hooks.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <sys/mman.h>

#include <unordered_set>
#endif

namespace tessel::profile::detail {

CuptiSettings parse_cupti_settings(const std::string& text, const char* what) {
  CuptiSettings s;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : item.substr(eq + 1);
    auto bad = [&](const char* valid) {
      return ValueError(fmt::format("{}: '{}' in '{}' is not valid; {}", what, item, text, valid));
    };
    if (key == "link") {
      if (value == "all") s.link = CuptiSettings::Link::all;
      else if (value == "launch") s.link = CuptiSettings::Link::launch;
      else if (value == "off") s.link = CuptiSettings::Link::off;
      else throw bad("link is all, launch or off");
    } else if (key == "activity") {
      if (value == "concurrent") s.activity = CuptiSettings::Activity::concurrent;
      else if (value == "serial") s.activity = CuptiSettings::Activity::serial;
      else if (value == "off") s.activity = CuptiSettings::Activity::off;
      else throw bad("activity is concurrent, serial or off");
    } else if (key == "buffers") {
      if (value == "mapped") s.cupti_zeroes_buffers = false;
      else if (value == "malloc") s.cupti_zeroes_buffers = true;
      else throw bad("buffers is mapped or malloc");
    } else if (key == "hw_trace" || key == "per_thread_buffers") {
      if (value != "0" && value != "1") throw bad(key == "hw_trace" ? "hw_trace is 0 or 1" : "per_thread_buffers is 0 or 1");
      if (key == "hw_trace") s.hw_trace = value == "1";
      else s.per_thread_buffers = value == "1" ? 1 : 0;
    } else {
      throw bad("the items are link=all|launch|off, activity=concurrent|serial|off, buffers=mapped|malloc, "
                "hw_trace=0|1, per_thread_buffers=0|1 (comma separated)");
    }
  }
  return s;
}

namespace {
CuptiSettings settings_from_env() {
  const char* text = std::getenv("TESSEL_PROFILE_CUPTI");
  return text ? parse_cupti_settings(text) : CuptiSettings{};
}
}  // namespace

#if defined(TESSEL_HAVE_CUDA)
namespace {

struct CuptiApi {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivitySetAttribute) set_attribute = nullptr;
  decltype(&cuptiActivityEnableHWTrace) enable_hw_trace = nullptr;  // optional (CUDA 12.8+)
  // The Callback API, which links activities to ops; all null when libcupti lacks one of them.
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
#if defined(CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN)
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;  // optional: names the subscriber in the way
#endif
  std::string error;  // why it could not be loaded
};

template <class F>
bool load_symbol(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(::tessel::detail::library_symbol(lib, name));
  return f != nullptr;
}

const CuptiApi& cupti_api() {
  static const CuptiApi api = [] {
    CuptiApi a;
    std::vector<std::string> candidates;
#if defined(TESSEL_CUPTI_LIBRARY_PATH)
    candidates.emplace_back(TESSEL_CUPTI_LIBRARY_PATH);
#endif
    for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                             "/usr/local/cuda/lib64/libcupti.so"}) {
      candidates.emplace_back(name);
    }
    const ::tessel::detail::SharedLibrary opened = ::tessel::detail::open_shared_library("TESSEL_CUPTI_LIBRARY", candidates);
    void* lib = opened.handle;
    if (!lib) {
      a.error = fmt::format("libcupti could not be loaded (tried {}; set TESSEL_CUPTI_LIBRARY to its path)",
                            opened.tried);
      return a;
    }
    const bool ok = load_symbol(lib, "cuptiActivityRegisterCallbacks", a.register_callbacks) &&
                    load_symbol(lib, "cuptiActivityEnable", a.enable) &&
                    load_symbol(lib, "cuptiActivityDisable", a.disable) &&
                    load_symbol(lib, "cuptiActivityFlushAll", a.flush_all) &&
                    load_symbol(lib, "cuptiActivityGetNextRecord", a.next_record) &&
                    load_symbol(lib, "cuptiGetTimestamp", a.timestamp) &&
                    load_symbol(lib, "cuptiGetResultString", a.result_string);
    if (!ok) a.error = "libcupti lacks an Activity API function tessel needs";
    load_symbol(lib, "cuptiActivitySetAttribute", a.set_attribute);
    load_symbol(lib, "cuptiActivityEnableHWTrace", a.enable_hw_trace);
    const bool callbacks = load_symbol(lib, "cuptiSubscribe", a.subscribe) &&
                           load_symbol(lib, "cuptiUnsubscribe", a.unsubscribe) &&
                           load_symbol(lib, "cuptiEnableCallback", a.enable_callback) &&
                           load_symbol(lib, "cuptiGetCallbackName", a.callback_name);
    if (!callbacks) a.subscribe = nullptr;
#if defined(CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN)
    load_symbol(lib, "cuptiSubscribe_v2", a.subscribe_v2);
#endif
    return a;
  }();
  return api;
}

std::string result_text(CUptiResult r) {
  const char* text = nullptr;
  if (cupti_api().result_string && cupti_api().result_string(r, &text) == CUPTI_SUCCESS && text) return text;
  return fmt::format("CUPTI error {}", static_cast<int>(r));
}

// How activities are linked to ops. Every kernel, memcpy and memset record carries the correlation
// id of the runtime or driver call that launched it. A Callback API subscriber, enabled only for
// the launch, copy and set calls (link_callbacks: chosen by name from libcupti's own table),
// notes at each such call's entry: correlation id -> the calling thread's innermost open op
// (t_op, set by the op's range through cupti_enter_op). buffer_completed looks each record's
// correlation id up. Both the runtime call and the driver call it makes get an entry, so a record
// matches whichever id it carries.
//
// External correlation (cuptiActivityPush/PopExternalCorrelationId per op) would need the DRIVER
// and RUNTIME activity kinds as well, since CUPTI writes external-correlation records only in
// front of API records: a record for every CUDA call, which costs more host time per op than these
// callbacks (bench/profile_bench's "profile on ... added" rows, H100, CUDA 13.0's CUPTI).
// profile_bench's breakdown rows split the rest: host records only (SessionOptions::gpu = false),
// activity without links (TESSEL_PROFILE_CUPTI=link=off), links without activity (activity=off).
//
// The kinds a session enables (CuptiSettings::activity). CONCURRENT_KERNEL keeps kernels
// concurrent; KERNEL (activity=serial) serializes them on the GPU and is there to be measured.
std::vector<CUpti_ActivityKind> activity_kinds(const CuptiSettings& settings) {
  switch (settings.activity) {
    case CuptiSettings::Activity::concurrent:
      return {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    case CuptiSettings::Activity::serial:
      return {CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    case CuptiSettings::Activity::off:
      break;
  }
  return {};
}

// Activity buffers. Every session starts without one (the flush at stop hands them all back),
// and unless told that buffers come zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER),
// CUPTI zeroes each one "in the main thread", which cupti_activity.h warns may stall the critical
// path: 8 MiB, likely in the first launch of the session. buffers=mapped (the default) hands out
// fresh anonymous mappings, which the kernel zeroes a page at a time as records land, and says
// so; buffers=malloc is the aligned_alloc buffer that CUPTI zeroes (profile_bench's
// buffers_malloc row against the full row).
constexpr std::size_t kBufferBytes = 8u << 20;

std::atomic<bool> g_running{false};
std::mutex g_state_mutex;            // guards the fields below
Session::Data* g_target = nullptr;   // the session receiving records
std::int64_t g_offset_ns = 0;        // steady_clock - CUPTI timestamp
bool g_callbacks_registered = false;
CUpti_SubscriberHandle g_subscriber = nullptr;  // while a session links activities to ops
std::vector<CUpti_ActivityKind> g_kinds;        // enabled by the running session
bool g_hw_trace = false;                        // enabled by the running session
std::atomic<bool> g_map_buffers{true};          // buffers=mapped for the running session
// Its own lock: CUPTI may ask for a buffer inside any CUDA or CUPTI call, g_state_mutex held or not.
std::mutex g_buffers_mutex;
std::unordered_set<std::uint8_t*> g_mapped;     // buffers from mmap (the rest from aligned_alloc)
bool g_linking = false;                         // the running session's table is current

// Correlation id -> op, direct-mapped: slot (id mod kLinkSlots) holds id << 32 | (op - g_op_base),
// 0 when empty. The callback's write is one atomic store: no lock, no allocation. An entry is lost
// only when a call kLinkSlots correlation ids later takes its slot, so a record that comes back
// more than about a million CUDA calls after its launch is not linked (op_id 0). 8 MiB, allocated
// by the first session that links, and kept. Never cleared: every noted call writes its slot (op
// 0 outside an op), and CUPTI's correlation ids do not repeat, so an entry left by an earlier
// session matches no record of a later one.
constexpr std::uint32_t kLinkSlots = 1u << 20;
std::uint64_t* g_links = nullptr;       // kLinkSlots words, read and written with __atomic builtins
std::atomic<std::uint64_t> g_op_base{0};  // op ids of this session are above it
thread_local std::uint64_t t_op = 0;    // this thread's innermost op while a session records GPU

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* cbdata) {
  const auto* info = static_cast<const CUpti_CallbackData*>(cbdata);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  const std::uint64_t op = t_op;
  const std::uint32_t correlation = info->correlationId;
  const std::uint64_t base = g_op_base.load(std::memory_order_relaxed);
  if (correlation == 0) return;
  const std::uint64_t relative = op > base && op - base <= 0xffffffffu ? op - base : 0;
  __atomic_store_n(&g_links[correlation & (kLinkSlots - 1)], (std::uint64_t(correlation) << 32) | relative,
                   __ATOMIC_RELEASE);
}

std::uint64_t linked_op(std::uint32_t correlation) {
  if (!g_links || !g_linking || correlation == 0) return 0;
  const std::uint64_t v = __atomic_load_n(&g_links[correlation & (kLinkSlots - 1)], __ATOMIC_ACQUIRE);
  if ((v >> 32) != correlation || (v & 0xffffffffu) == 0) return 0;
  return g_op_base.load(std::memory_order_relaxed) + (v & 0xffffffffu);
}

// The runtime and driver calls that launch a kernel or graph or start a copy or set, by name from
// libcupti's own callback table (so the library's newer variants count too): cudaLaunch*,
// cudaGraphLaunch*, cudaMemcpy*, cudaMemset*, cuLaunch*, cuGraphLaunch*, cuMemcpy*, cuMemset*
// (and cu64Memcpy*/cu64Memset*), with their _ptsz/_ptds forms; not cudaLaunchHostFunc/
// cuLaunchHostFunc, which start no GPU activity.
bool links_by_name(std::string_view name) {
  if (name.find("HostFunc") != std::string_view::npos) return false;
  for (std::string_view prefix : {"cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset", "cuLaunch",
                                  "cuGraphLaunch", "cuMemcpy", "cuMemset", "cu64Memcpy", "cu64Memset"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

struct LinkCallback {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char* name;
};

const std::vector<LinkCallback>& link_callbacks() {
  static const std::vector<LinkCallback> ids = [] {
    std::vector<LinkCallback> out;
    const CuptiApi& api = cupti_api();
    if (!api.callback_name) return out;
    // Past the headers' sizes too, for a libcupti newer than the headers; unknown ids fail.
    const std::pair<CUpti_CallbackDomain, std::uint32_t> domains[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE + 512},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE + 512}};
    for (const auto& [domain, limit] : domains) {
      for (std::uint32_t cbid = 1; cbid < limit; ++cbid) {
        const char* name = nullptr;
        if (api.callback_name(domain, cbid, &name) == CUPTI_SUCCESS && name && links_by_name(name)) {
          out.push_back({domain, cbid, name});
        }
      }
    }
    return out;
  }();
  return ids;
}

// link=launch: only the driver's cuLaunchKernel* (jit::Kernel's launch path), to measure what
// the other callbacks cost; copies, sets, graph launches and runtime launches stay unlinked.
bool launch_only(const LinkCallback& id) {
  return id.domain == CUPTI_CB_DOMAIN_DRIVER_API && std::string_view(id.name).rfind("cuLaunchKernel", 0) == 0;
}

// Subscribes on_api_call to the launch/copy/set calls (g_state_mutex held). Empty on success,
// else why activities cannot be linked to ops.
std::string subscribe_links(CuptiSettings::Link link) {
  const CuptiApi& api = cupti_api();
  if (!api.subscribe) return "libcupti lacks a Callback API function tessel needs";
  std::vector<LinkCallback> ids = link_callbacks();
  if (link == CuptiSettings::Link::launch) {
    std::vector<LinkCallback> launches;
    for (const LinkCallback& id : ids) {
      if (launch_only(id)) launches.push_back(id);
    }
    ids = std::move(launches);
  }
  if (ids.empty()) return "libcupti names no launch, copy or set calls";
  if (!g_links) {
    g_links = static_cast<std::uint64_t*>(std::calloc(kLinkSlots, sizeof(std::uint64_t)));
    if (!g_links) return "no memory for the correlation table";
  }
  g_op_base.store(next_op_id() - 1, std::memory_order_relaxed);
  std::string holder;
  CUptiResult r = CUPTI_SUCCESS;
#if defined(CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN)
  if (api.subscribe_v2) {
    char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "tessel";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof(old_name);
    r = api.subscribe_v2(&g_subscriber, on_api_call, nullptr, &params);
    holder = old_name;
  } else {
    r = api.subscribe(&g_subscriber, on_api_call, nullptr);
  }
#else
  r = api.subscribe(&g_subscriber, on_api_call, nullptr);
#endif
  if (r != CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    return fmt::format("cuptiSubscribe: {}; {}", result_text(r),
                       holder.empty() ? "another CUPTI subscriber (such as Nsight Systems) may hold the Callback API"
                                      : "it is held by " + holder);
  }
  for (const LinkCallback& id : ids) {
    r = api.enable_callback(1, g_subscriber, id.domain, id.cbid);
    if (r != CUPTI_SUCCESS) {
      api.unsubscribe(g_subscriber);
      g_subscriber = nullptr;
      return fmt::format("cuptiEnableCallback({}): {}", id.name, result_text(r));
    }
  }
  return {};
}

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
  *buffer = nullptr;
  *max_records = 0;
  if (g_map_buffers.load()) {
    // Page-aligned (CUPTI needs 8 bytes) and zero: no page is touched before a record lands in it.
    void* p = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      *buffer = static_cast<uint8_t*>(p);
      std::lock_guard<std::mutex> lock(g_buffers_mutex);
      g_mapped.insert(*buffer);
    }
  } else {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  }
  *size = *buffer ? kBufferBytes : 0;
}

void release_buffer(uint8_t* buffer) {
  bool mapped = false;
  {
    std::lock_guard<std::mutex> lock(g_buffers_mutex);
    mapped = g_mapped.erase(buffer) != 0;
  }
  if (mapped) {
    munmap(buffer, kBufferBytes);
  } else {
    std::free(buffer);
  }
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
        e.op_id = linked_op(k->correlationId);
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
        e.op_id = linked_op(m->correlationId);
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
        e.op_id = linked_op(m->correlationId);
        e.bytes = m->bytes;
        break;
      }
      default:
        continue;
    }
    g_target->push(g_target->gpu, std::move(e));
  }
  release_buffer(buffer);
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

CuptiStart cupti_start(Session::Data* data) {
  const CuptiSettings settings = settings_from_env();  // a malformed value raises before anything starts
  if (!cuda_available()) return {"no CUDA device (" + cuda_unavailable_reason() + ")", {}, {}};
  const CuptiApi& api = cupti_api();
  if (!api.error.empty()) return {api.error, {}, {}};
  std::lock_guard<std::mutex> lock(g_state_mutex);
  CuptiStart started;
  auto set_flag = [&](CUpti_ActivityAttribute attribute, std::uint8_t value) {
    std::size_t size = sizeof(value);
    return api.set_attribute ? api.set_attribute(attribute, &size, &value) : CUPTI_ERROR_NOT_SUPPORTED;
  };
  static int per_thread_applied = -1;  // per_thread_buffers as the first session set it
  if (!g_callbacks_registered) {
    // Process-wide: CUPTI reads it when the buffer callbacks are registered.
    if (settings.per_thread_buffers >= 0) {
      const CUptiResult r = set_flag(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                     static_cast<std::uint8_t>(settings.per_thread_buffers));
      if (r == CUPTI_SUCCESS) {
        per_thread_applied = settings.per_thread_buffers;
      } else {
        started.note = fmt::format("per_thread_buffers={} was not applied ({})", settings.per_thread_buffers,
                                   result_text(r));
      }
    }
    const CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
      return {fmt::format("CUPTI is unavailable (cuptiActivityRegisterCallbacks: {}); another profiler such as "
                          "Nsight Systems may be using it",
                          result_text(r)),
              {},
              {}};
    }
    g_callbacks_registered = true;
  } else if (settings.per_thread_buffers >= 0 && settings.per_thread_buffers != per_thread_applied) {
    started.note = fmt::format("per_thread_buffers={} was not applied (only the process's first session sets it)",
                               settings.per_thread_buffers);
  }
  // Zeroed buffers from us, or CUPTI zeroes them (also when the attribute cannot be set).
  const bool map_buffers = !settings.cupti_zeroes_buffers &&
                           set_flag(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 1) == CUPTI_SUCCESS;
  if (!map_buffers) set_flag(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 0);
  g_map_buffers.store(map_buffers);
  // Subscribed before the activity kinds are enabled, as CUPTI asks of its clients.
  started.link_error = settings.link == CuptiSettings::Link::off
                           ? "linking was turned off (TESSEL_PROFILE_CUPTI=link=off)"
                           : subscribe_links(settings.link);
  g_linking = started.link_error.empty();
  if (settings.hw_trace) {
    const CUptiResult r = api.enable_hw_trace ? api.enable_hw_trace(1) : CUPTI_ERROR_NOT_SUPPORTED;
    g_hw_trace = r == CUPTI_SUCCESS;
    if (!g_hw_trace) {
      const std::string why = fmt::format("hw_trace=1 was not applied (cuptiActivityEnableHWTrace: {})", result_text(r));
      started.note = started.note.empty() ? why : started.note + "; " + why;
    }
  }
  g_kinds = activity_kinds(settings);
  for (std::size_t i = 0; i < g_kinds.size(); ++i) {
    const CUptiResult r = api.enable(g_kinds[i]);
    if (r != CUPTI_SUCCESS) {
      for (std::size_t j = 0; j < i; ++j) api.disable(g_kinds[j]);
      g_kinds.clear();
      if (g_hw_trace) api.enable_hw_trace(0);
      g_hw_trace = false;
      if (g_subscriber) api.unsubscribe(g_subscriber);
      g_subscriber = nullptr;
      g_linking = false;
      return {fmt::format("CUPTI is unavailable (cuptiActivityEnable: {}); another profiler such as Nsight "
                          "Systems may be using it",
                          result_text(r)),
              {},
              {}};
    }
  }
  // activity=off still runs (links are noted, cupti_stop undoes the subscription) but records nothing.
  if (settings.activity == CuptiSettings::Activity::off) {
    started.error = "GPU activity recording was turned off (TESSEL_PROFILE_CUPTI=activity=off)";
  }
  // The clock offset, from a CUPTI timestamp bracketed by two steady_clock readings.
  const std::int64_t before = now_ns();
  std::uint64_t cupti_now = 0;
  api.timestamp(&cupti_now);
  const std::int64_t after = now_ns();
  g_offset_ns = (before + after) / 2 - static_cast<std::int64_t>(cupti_now);
  g_target = data;
  g_running.store(true);
  return started;
}

void cupti_stop() {
  if (!g_running.exchange(false)) return;
  const CuptiApi& api = cupti_api();
  {
    std::lock_guard<std::mutex> lock(g_state_mutex);
    if (g_subscriber) api.unsubscribe(g_subscriber);  // launches from here on are not noted
    g_subscriber = nullptr;
  }
  synchronize_devices();
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : g_kinds) api.disable(kind);
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_state_mutex);
  if (g_hw_trace) api.enable_hw_trace(0);
  g_hw_trace = false;
  g_kinds.clear();
  g_linking = false;
  g_target = nullptr;
}

bool cupti_running() { return g_running.load(std::memory_order_relaxed); }

std::uint64_t cupti_enter_op(std::uint64_t op_id) {
  const std::uint64_t outer = t_op;
  t_op = op_id;
  return outer;
}

void cupti_leave_op(std::uint64_t outer) { t_op = outer; }

std::vector<std::string> cupti_link_callback_names(std::string* error) {
  std::vector<std::string> names;
  if (!cupti_api().error.empty()) {
    if (error) *error = cupti_api().error;
    return names;
  }
  if (!cupti_api().subscribe) {
    if (error) *error = "libcupti lacks a Callback API function tessel needs";
    return names;
  }
  for (const LinkCallback& id : link_callbacks()) names.emplace_back(id.name);
  return names;
}

#else

CuptiStart cupti_start(Session::Data*) {
  (void)settings_from_env();  // malformed settings raise on every build
  return {::tessel::detail::kCudaNotBuilt, {}, {}};
}
void cupti_stop() {}
bool cupti_running() { return false; }
std::uint64_t cupti_enter_op(std::uint64_t) { return 0; }
void cupti_leave_op(std::uint64_t) {}
std::vector<std::string> cupti_link_callback_names(std::string* error) {
  if (error) *error = ::tessel::detail::kCudaNotBuilt;
  return {};
}

#endif

}  // namespace tessel::profile::detail
