#include "tessel/core/config.hpp"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "tessel/core/error.hpp"

namespace tessel {
namespace {

std::optional<std::string> read_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

[[noreturn]] void malformed(const char* name, const std::string& value, const char* accepted) {
  throw ValueError(fmt::format("environment: {}='{}' is malformed; expected {}", name, value, accepted));
}

bool parse_bool(const char* name, const std::string& value) {
  if (value == "1" || value == "true" || value == "on" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "off" || value == "no" || value.empty()) return false;
  malformed(name, value, "0 or 1");
}

double parse_number(const char* name, const std::string& value, const char* accepted) {
  try {
    std::size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used != value.size()) malformed(name, value, accepted);
    return parsed;
  } catch (const std::logic_error&) {
    malformed(name, value, accepted);
  }
}

Config& mutable_config() {
  static Config instance = parse_config(&read_env);
  return instance;
}

// num_threads(): 0 until first read from the configuration.
std::atomic<int> current_threads{0};

}  // namespace

Config parse_config(std::optional<std::string> (*getenv_fn)(const char*)) {
  Config c;
  if (auto v = getenv_fn("TESSEL_LOG")) {
    if (*v == "off") c.log_level = LogLevel::off;
    else if (*v == "warn" || v->empty()) c.log_level = LogLevel::warn;
    else if (*v == "info") c.log_level = LogLevel::info;
    else if (*v == "debug") c.log_level = LogLevel::debug;
    else malformed("TESSEL_LOG", *v, "off, warn, info or debug");
  }
  if (auto v = getenv_fn("TESSEL_SYNC")) c.sync_after_ops = parse_bool("TESSEL_SYNC", *v);
  if (auto v = getenv_fn("TESSEL_FORCE_CPU")) c.force_cpu = parse_bool("TESSEL_FORCE_CPU", *v);
  // Both default to on: an empty value keeps the default.
  if (auto v = getenv_fn("TESSEL_DEVICE_GUARD"); v && !v->empty()) c.device_guard = parse_bool("TESSEL_DEVICE_GUARD", *v);
  if (auto v = getenv_fn("TESSEL_PEER_ACCESS"); v && !v->empty()) c.peer_access = parse_bool("TESSEL_PEER_ACCESS", *v);
  if (auto v = getenv_fn("TESSEL_ALLOCATOR")) {
    if (*v == "caching" || v->empty()) c.caching_allocator = true;
    else if (*v == "direct") c.caching_allocator = false;
    else malformed("TESSEL_ALLOCATOR", *v, "caching or direct");
  }
  if (auto v = getenv_fn("TESSEL_CPU_SORT32")) {
    if (*v == "timed" || v->empty()) c.cpu_sort32 = Config::Sort32::timed;
    else if (*v == "keys") c.cpu_sort32 = Config::Sort32::keys;
    else if (*v == "records") c.cpu_sort32 = Config::Sort32::records;
    else malformed("TESSEL_CPU_SORT32", *v, "timed, keys or records");
  }
  if (auto v = getenv_fn("TESSEL_MEMORY_FRACTION")) {
    const char* accepted = "a number in (0, 1]";
    const double f = parse_number("TESSEL_MEMORY_FRACTION", *v, accepted);
    if (!(f > 0.0 && f <= 1.0)) malformed("TESSEL_MEMORY_FRACTION", *v, accepted);
    c.memory_fraction = f;
  }
  if (auto v = getenv_fn("TESSEL_MAX_SPLIT_SIZE_MB")) {
    const char* accepted = "a whole number of MiB >= 2, or 0 for no limit";
    const double mb = parse_number("TESSEL_MAX_SPLIT_SIZE_MB", *v, accepted);
    if (mb < 0 || mb != static_cast<double>(static_cast<long long>(mb)) || (mb > 0 && mb < 2) || mb > 1e9)
      malformed("TESSEL_MAX_SPLIT_SIZE_MB", *v, accepted);
    c.max_split_size = static_cast<std::size_t>(mb) << 20;
  }
  if (auto v = getenv_fn("TESSEL_MATMUL_AUTOTUNE")) c.matmul_autotune = parse_bool("TESSEL_MATMUL_AUTOTUNE", *v);
  if (auto v = getenv_fn("TESSEL_LINALG_STREAMS"); v && !v->empty()) {
    const char* accepted = "a whole number from 1 to 64";
    const double k = parse_number("TESSEL_LINALG_STREAMS", *v, accepted);
    if (!(k >= 1 && k <= kMaxLinalgStreams) || k != static_cast<double>(static_cast<int>(k)))
      malformed("TESSEL_LINALG_STREAMS", *v, accepted);
    c.linalg_streams = static_cast<int>(k);
  }
  c.num_threads = affinity_cpu_count();
  if (auto v = getenv_fn("TESSEL_NUM_THREADS"); v && !v->empty()) {
    const std::string accepted = fmt::format("a whole number from 1 to {}", kMaxNumThreads);
    const double k = parse_number("TESSEL_NUM_THREADS", *v, accepted.c_str());
    if (!(k >= 1 && k <= kMaxNumThreads) || k != static_cast<double>(static_cast<int>(k)))
      malformed("TESSEL_NUM_THREADS", *v, accepted.c_str());
    c.num_threads = static_cast<int>(k);
  }
  if (auto v = getenv_fn("TESSEL_CACHE_DIR"); v && !v->empty()) {
    c.cache_dir = *v;
  } else if (auto xdg = getenv_fn("XDG_CACHE_HOME"); xdg && !xdg->empty()) {
    c.cache_dir = *xdg + "/tessel";
  } else if (auto home = getenv_fn("HOME"); home && !home->empty()) {
    c.cache_dir = *home + "/.cache/tessel";
  } else {
    c.cache_dir = "/tmp/tessel-cache";
  }
  return c;
}

const Config& config() { return mutable_config(); }
void set_log_level(LogLevel level) { mutable_config().log_level = level; }
void set_sync_after_ops(bool on) { mutable_config().sync_after_ops = on; }
void set_matmul_autotune(bool on) { mutable_config().matmul_autotune = on; }
void set_linalg_streams(int streams) {
  if (streams < 1 || streams > kMaxLinalgStreams) {
    throw ValueError(fmt::format("set_linalg_streams: streams must be a whole number from 1 to {}, got {}",
                                 kMaxLinalgStreams, streams));
  }
  mutable_config().linalg_streams = streams;
}

int affinity_cpu_count() {
  // A set large enough for any machine's CPU numbers (the fixed cpu_set_t stops at 1024).
  constexpr int kMaxCpus = 1 << 15;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  int count = 0;
  if (set != nullptr) {
    const std::size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) count = CPU_COUNT_S(bytes, set);
    CPU_FREE(set);
  }
  if (count <= 0) count = static_cast<int>(std::thread::hardware_concurrency());
  return count > 0 ? count : 1;
}

int num_threads() {
  int n = current_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = config().num_threads;
    int expected = 0;
    current_threads.compare_exchange_strong(expected, n, std::memory_order_relaxed);
    n = current_threads.load(std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int threads) {
  if (threads < 1 || threads > kMaxNumThreads) {
    throw ValueError(fmt::format("set_num_threads: threads must be a whole number from 1 to {}, got {}",
                                 kMaxNumThreads, threads));
  }
  current_threads.store(threads, std::memory_order_relaxed);
}

}  // namespace tessel
