#include "tessel/profile/session.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "profile/recorder.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel::profile {
namespace detail {
namespace {

std::shared_ptr<Session::Data> g_active;  // guarded by recorder_mutex()
std::atomic<std::uint64_t> g_generation{0};
std::uint64_t g_next_generation = 1;

}  // namespace

std::mutex& recorder_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::shared_ptr<Session::Data> active_session() {
  std::lock_guard<std::mutex> lock(recorder_mutex());
  return g_active;
}

std::uint64_t active_generation() { return g_generation.load(std::memory_order_acquire); }

void record_memory(MemoryEventKind kind, std::string_view device, std::int64_t bytes, std::int64_t allocated,
                   std::int64_t reserved, std::string_view what) {
  start_env_session_if_pending();
  auto data = active_session();
  if (!data) return;
  MemoryEvent event;
  event.kind = kind;
  event.device = device;
  event.bytes = bytes;
  event.allocated = allocated;
  event.reserved = reserved;
  event.time_ns = now_ns();
  event.detail = what;
  data->push(data->memory, std::move(event));
}

void record_compile(std::string_view name, std::string_view source, std::int64_t start_ns, std::int64_t end_ns) {
  auto data = active_session();
  if (!data) return;
  CompileEvent event;
  event.name = name;
  event.source = source;
  event.start_ns = start_ns;
  event.end_ns = end_ns;
  data->push(data->compiles, std::move(event));
}

}  // namespace detail

const char* kind_name(GpuEventKind kind) {
  switch (kind) {
    case GpuEventKind::kernel: return "kernel";
    case GpuEventKind::memcpy: return "memcpy";
    case GpuEventKind::memset: return "memset";
  }
  return "?";
}

const char* kind_name(MemoryEventKind kind) {
  switch (kind) {
    case MemoryEventKind::alloc: return "alloc";
    case MemoryEventKind::free: return "free";
    case MemoryEventKind::cache_hit: return "cache_hit";
    case MemoryEventKind::cache_miss: return "cache_miss";
    case MemoryEventKind::oom_retry: return "oom_retry";
    case MemoryEventKind::oom: return "oom";
  }
  return "?";
}

Session::Session(SessionOptions options) : data_(std::make_shared<Data>()) {
  if (options.max_events == 0) throw ValueError("profile.Session: max_events must be at least 1");
  data_->options = options;
  std::lock_guard<std::mutex> lock(detail::recorder_mutex());
  if (detail::g_active) {
    throw Error(
        "profile.Session: another profile session is already recording; sessions do not nest (stop the first "
        "one, or use profile ranges inside it)");
  }
  data_->start_ns = now_ns();
  data_->recording = true;
  if (options.gpu) {
    const detail::CuptiStart started = detail::cupti_start(data_.get());
    data_->gpu_recorded = started.error.empty();
    data_->gpu_linked = data_->gpu_recorded && started.link_error.empty();
    if (!data_->gpu_recorded) {
      data_->cupti_status = started.error;
    } else if (!data_->gpu_linked) {
      data_->cupti_status =
          "GPU activity is recorded, but kernels and copies cannot be linked to the ops that launched them "
          "(op_id 0): " +
          started.link_error;
    }
    if (!started.note.empty()) {
      data_->cupti_status += (data_->cupti_status.empty() ? "TESSEL_PROFILE_CUPTI: " : "; TESSEL_PROFILE_CUPTI: ") +
                             started.note;
    }
  } else {
    data_->cupti_status = "GPU activity recording was turned off (SessionOptions::gpu = false)";
  }
  data_->generation = detail::g_next_generation++;
  detail::g_active = data_;
  detail::g_generation.store(data_->generation, std::memory_order_release);
  detail::set_listener(detail::kSession, true);
}

Session::~Session() {
  try {
    stop();
  } catch (const std::exception& e) {
    TESSEL_LOG_WARN(fmt::format("profile.Session: stopping failed: {}", e.what()));
  }
}

void Session::stop() {
  {
    std::lock_guard<std::mutex> lock(detail::recorder_mutex());
    if (!data_->recording) return;
    data_->recording = false;
    detail::set_listener(detail::kSession, false);
    detail::g_generation.store(0, std::memory_order_release);
    detail::g_active.reset();
  }
  // Outside the recorder lock: synchronizing and flushing run CUPTI's buffer callbacks. Also when
  // nothing was recorded: TESSEL_PROFILE_CUPTI=activity=off still subscribed the link callbacks.
  if (data_->options.gpu) detail::cupti_stop();
  data_->stop_ns = now_ns();
  std::lock_guard<std::mutex> lock(data_->mutex);
  auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(data_->ops.begin(), data_->ops.end(), by_start);
  std::stable_sort(data_->gpu.begin(), data_->gpu.end(), by_start);
}

bool Session::recording() const { return data_->recording; }
const std::vector<OpEvent>& Session::ops() const { return data_->ops; }
const std::vector<GpuEvent>& Session::gpu() const { return data_->gpu; }
const std::vector<CompileEvent>& Session::compiles() const { return data_->compiles; }
const std::vector<MemoryEvent>& Session::memory() const { return data_->memory; }
std::uint64_t Session::dropped() const { return data_->dropped.load(); }
bool Session::gpu_recorded() const { return data_->gpu_recorded; }
bool Session::gpu_linked() const { return data_->gpu_linked; }
const std::string& Session::cupti_status() const { return data_->cupti_status; }

namespace {

void json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Microseconds relative to the session start, as Chrome trace timestamps.
std::string micros(std::int64_t ns, std::int64_t origin) { return fmt::format("{:.3f}", double(ns - origin) * 1e-3); }

class TraceFile {
 public:
  explicit TraceFile(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "w");
    if (!file_) {
      throw Error(fmt::format("profile.export_chrome_trace: cannot write '{}': {}", path, std::strerror(errno)));
    }
  }
  ~TraceFile() {
    if (file_) std::fclose(file_);
  }
  void write(const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) fail();
  }
  void close() {
    const bool bad = std::fclose(file_) != 0;
    file_ = nullptr;
    if (bad) fail();
  }

 private:
  [[noreturn]] void fail() {
    throw Error(fmt::format("profile.export_chrome_trace: writing '{}' failed: {}", path_, std::strerror(errno)));
  }
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace

void Session::export_chrome_trace(const std::string& path) {
  TraceFile file(path);  // fails before stopping when the path cannot be written
  stop();
  const Data& d = *data_;
  const std::int64_t origin = d.start_ns;
  constexpr int kHostPid = 1, kGpuPidBase = 100, kMemoryPid = 2;
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&]() {
    if (!first) out += ",\n";
    first = false;
  };
  auto metadata = [&](const char* what, int pid, long long tid, std::string_view name) {
    begin_event();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", what, pid, tid);
    json_string(out, name);
    out += "}}";
  };
  metadata("process_name", kHostPid, 0, "tessel host");
  std::set<std::uint32_t> threads;
  for (const OpEvent& e : d.ops) threads.insert(e.thread);
  for (std::uint32_t t : threads) metadata("thread_name", kHostPid, t, fmt::format("thread {}", t));
  metadata("thread_name", kHostPid, 0, "jit");
  for (const OpEvent& e : d.ops) {
    begin_event();
    out += "{\"ph\":\"X\",\"cat\":\"op\",\"name\":";
    json_string(out, e.name);
    out += fmt::format(",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"op_id\":{},\"args\":", kHostPid,
                       e.thread, micros(e.start_ns, origin), micros(e.end_ns, e.start_ns), e.id);
    json_string(out, e.args);
    out += ",\"device\":";
    json_string(out, e.device);
    out += fmt::format(",\"stream\":{}}}}}", e.stream);
  }
  for (const CompileEvent& e : d.compiles) {
    begin_event();
    out += "{\"ph\":\"X\",\"cat\":\"jit\",\"name\":";
    json_string(out, "compile " + e.name);
    out += fmt::format(",\"pid\":{},\"tid\":0,\"ts\":{},\"dur\":{},\"args\":{{\"source\":\"{}\",\"cache_hit\":{}}}}}",
                       kHostPid, micros(e.start_ns, origin), micros(e.end_ns, e.start_ns), e.source,
                       e.cache_hit() ? "true" : "false");
  }
  std::set<std::pair<int, std::uint32_t>> streams;
  for (const GpuEvent& e : d.gpu) streams.insert({e.device, e.stream});
  std::set<int> devices;
  for (const auto& [device, stream] : streams) {
    if (devices.insert(device).second) {
      metadata("process_name", kGpuPidBase + device, 0, fmt::format("GPU {}", device));
    }
    metadata("thread_name", kGpuPidBase + device, stream, fmt::format("stream {}", stream));
  }
  std::unordered_map<std::uint64_t, const OpEvent*> op_by_id;
  for (const OpEvent& e : d.ops) op_by_id[e.id] = &e;
  for (const GpuEvent& e : d.gpu) {
    begin_event();
    out += fmt::format("{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":", kind_name(e.kind));
    json_string(out, e.name);
    out += fmt::format(",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"correlation\":{},\"op_id\":{}",
                       kGpuPidBase + e.device, e.stream, micros(e.start_ns, origin), micros(e.end_ns, e.start_ns),
                       e.correlation, e.op_id);
    if (auto it = op_by_id.find(e.op_id); it != op_by_id.end()) {
      out += ",\"op\":";
      json_string(out, it->second->name);
    }
    if (e.bytes) out += fmt::format(",\"bytes\":{}", e.bytes);
    out += "}}";
    // A flow arrow from the launching op to its GPU work.
    if (auto it = op_by_id.find(e.op_id); it != op_by_id.end()) {
      begin_event();
      out += fmt::format(
          "{{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{}}},\n"
          "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{}}}",
          e.correlation, kHostPid, it->second->thread, micros(it->second->start_ns, origin), e.correlation,
          kGpuPidBase + e.device, e.stream, micros(e.start_ns, origin));
    }
  }
  if (!d.memory.empty()) metadata("process_name", kMemoryPid, 0, "tessel memory");
  for (const MemoryEvent& e : d.memory) {
    begin_event();
    out += "{\"ph\":\"C\",\"name\":";
    json_string(out, "memory " + e.device);
    out += fmt::format(",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"allocated\":{},\"reserved\":{}}}}}", kMemoryPid,
                       micros(e.time_ns, origin), e.allocated, e.reserved);
    if (e.kind == MemoryEventKind::oom_retry || e.kind == MemoryEventKind::oom) {
      begin_event();
      out += fmt::format("{{\"ph\":\"i\",\"s\":\"p\",\"name\":\"{}\",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"detail\":",
                         kind_name(e.kind), kMemoryPid, micros(e.time_ns, origin));
      json_string(out, e.detail);
      out += "}}";
    }
    if (out.size() > (1u << 20)) {
      file.write(out);
      out.clear();
    }
  }
  out += fmt::format("\n],\"otherData\":{{\"dropped_events\":{},\"gpu_recorded\":{},\"gpu_linked\":{},"
                     "\"cupti_status\":",
                     dropped(), d.gpu_recorded ? "true" : "false", d.gpu_linked ? "true" : "false");
  json_string(out, d.cupti_status);
  out += "}}\n";
  file.write(out);
  file.close();
}

std::string Session::table(const std::string& sort_by, const std::string& group_by, std::size_t limit) {
  if (sort_by != "gpu_time" && sort_by != "cpu_time" && sort_by != "count" && sort_by != "name") {
    throw ValueError(fmt::format("profile.table: sort_by '{}' is not one of gpu_time, cpu_time, count, name", sort_by));
  }
  if (group_by != "op" && group_by != "op_args") {
    throw ValueError(fmt::format("profile.table: group_by '{}' is not one of op, op_args", group_by));
  }
  stop();
  const Data& d = *data_;
  struct Row {
    std::string key;
    std::int64_t count = 0, cpu_ns = 0, gpu_ns = 0, kernels = 0;
  };
  std::map<std::string, Row> rows;
  std::unordered_map<std::uint64_t, Row*> row_of_op;
  for (const OpEvent& e : d.ops) {
    const std::string key = group_by == "op" ? e.name : e.name + "(" + e.args + ")";
    Row& row = rows[key];
    row.key = key;
    row.count++;
    row.cpu_ns += e.end_ns - e.start_ns;
    row_of_op[e.id] = &row;
  }
  std::int64_t gpu_total = 0;
  for (const GpuEvent& e : d.gpu) {
    const std::int64_t dur = e.end_ns - e.start_ns;
    gpu_total += dur;
    Row* row = nullptr;
    if (auto it = row_of_op.find(e.op_id); it != row_of_op.end()) {
      row = it->second;
    } else {
      Row& outside = rows["(outside tessel ops)"];
      outside.key = "(outside tessel ops)";
      row = &outside;
    }
    row->gpu_ns += dur;
    row->kernels++;
  }
  std::vector<Row> sorted;
  for (auto& [key, row] : rows) sorted.push_back(row);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) {
    if (sort_by == "gpu_time") return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.cpu_ns > b.cpu_ns;
    if (sort_by == "cpu_time") return a.cpu_ns > b.cpu_ns;
    if (sort_by == "count") return a.count > b.count;
    return a.key < b.key;
  });
  if (limit && sorted.size() > limit) sorted.resize(limit);
  std::size_t width = 4;
  for (const Row& r : sorted) width = std::max(width, std::min<std::size_t>(r.key.size(), 60));
  auto us = [](std::int64_t ns) { return fmt::format("{:.1f}", double(ns) * 1e-3); };
  std::string out = fmt::format("{:<{}}  {:>8}  {:>12}  {:>10}  {:>12}  {:>10}  {:>6}  {:>7}\n", "name", width, "calls",
                                "cpu total us", "cpu avg us", "gpu total us", "gpu avg us", "gpu %", "kernels");
  for (const Row& r : sorted) {
    std::string key = r.key.size() > 60 ? r.key.substr(0, 57) + "..." : r.key;
    const double share = gpu_total > 0 ? 100.0 * double(r.gpu_ns) / double(gpu_total) : 0.0;
    out += fmt::format("{:<{}}  {:>8}  {:>12}  {:>10}  {:>12}  {:>10}  {:>6.1f}  {:>7}\n", key, width, r.count,
                       us(r.cpu_ns), us(r.count ? r.cpu_ns / r.count : 0), us(r.gpu_ns),
                       us(r.kernels ? r.gpu_ns / r.kernels : 0), share, r.kernels);
  }
  out += fmt::format("{} ops, {} GPU activities ({} us), {} compiles, {} memory events", d.ops.size(), d.gpu.size(),
                     us(gpu_total), d.compiles.size(), d.memory.size());
  if (dropped()) out += fmt::format(", {} events dropped at the cap of {} per kind", dropped(), d.options.max_events);
  if (!d.gpu_recorded) {
    out += fmt::format("; no GPU activity: {}", d.cupti_status);
  } else if (!d.gpu_linked) {
    out += fmt::format("; {}", d.cupti_status);
  }
  out += '\n';
  return out;
}

// TESSEL_PROFILE=<prefix>: a session from the first op to exit (or finish_env_session()).
namespace {

std::mutex g_env_mutex;
std::unique_ptr<Session> g_env_session;
std::string g_env_prefix;
std::atomic<bool> g_env_pending{false};
std::atomic<bool> g_env_finished{false};

struct EnvProfile {
  EnvProfile() {
    if (const char* prefix = std::getenv("TESSEL_PROFILE"); prefix && *prefix) {
      g_env_prefix = prefix;
      g_env_pending.store(true);
      detail::set_listener(detail::kSession, true);  // the first range or allocation starts it
    }
  }
};
const EnvProfile g_env_profile;

void finish_at_exit() { finish_env_session(); }

}  // namespace

namespace detail {
void start_env_session_if_pending() {
  if (!g_env_pending.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_env_mutex);
  if (!g_env_pending.load()) return;
  g_env_pending.store(false);
  try {
    g_env_session = std::make_unique<Session>();
    if (!g_env_session->gpu_recorded() && cuda_available()) {
      TESSEL_LOG_WARN(fmt::format("TESSEL_PROFILE: recording host ops only: {}", g_env_session->cupti_status()));
    } else if (g_env_session->gpu_recorded() && !g_env_session->gpu_linked()) {
      TESSEL_LOG_WARN(fmt::format("TESSEL_PROFILE: {}", g_env_session->cupti_status()));
    }
    // Registered after the first CUDA use is under way, so it runs before the runtime tears down.
    std::atexit(finish_at_exit);
  } catch (const std::exception& e) {
    detail::set_listener(detail::kSession, false);
    TESSEL_LOG_WARN(fmt::format("TESSEL_PROFILE: cannot start a profile session: {}", e.what()));
  }
}
}  // namespace detail

bool finish_env_session() {
  std::lock_guard<std::mutex> lock(g_env_mutex);
  if (!g_env_session || g_env_finished.exchange(true)) return false;
  try {
    g_env_session->export_chrome_trace(g_env_prefix + ".json");
    const std::string table = g_env_session->table("gpu_time", "op", 0);
    std::FILE* f = std::fopen((g_env_prefix + ".txt").c_str(), "w");
    if (!f) throw Error(fmt::format("cannot write '{}.txt': {}", g_env_prefix, std::strerror(errno)));
    std::fwrite(table.data(), 1, table.size(), f);
    std::fclose(f);
    std::fprintf(stderr, "[tessel] profile written to %s.json and %s.txt\n", g_env_prefix.c_str(),
                 g_env_prefix.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[tessel] TESSEL_PROFILE: %s\n", e.what());
  }
  return true;
}

}  // namespace tessel::profile
