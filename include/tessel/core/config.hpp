#pragma once
// Settings read once from the environment. A malformed TESSEL_* value raises ValueError
// naming the variable, the value and what it accepts.
#include <cstddef>
#include <optional>
#include <string>

namespace tessel {

enum class LogLevel { off = 0, warn = 1, info = 2, debug = 3 };

struct Config {
  LogLevel log_level = LogLevel::warn;   // TESSEL_LOG=off|warn|info|debug
  bool sync_after_ops = false;           // TESSEL_SYNC=0|1: synchronize after every op
  bool caching_allocator = true;         // TESSEL_ALLOCATOR=caching|direct (direct: for compute-sanitizer)
  double memory_fraction = 1.0;          // TESSEL_MEMORY_FRACTION in (0, 1]
  std::size_t max_split_size = 0;        // TESSEL_MAX_SPLIT_SIZE_MB; 0 = no limit
  bool force_cpu = false;                // TESSEL_FORCE_CPU=0|1: hide GPUs, run on the CPU backend
  bool device_guard = true;              // TESSEL_DEVICE_GUARD=0|1: 0 turns DeviceGuard off (only to measure its cost)
  bool peer_access = true;               // TESSEL_PEER_ACCESS=0|1: 0 never enables peer access (copies between GPUs
                                         // are then staged through host memory by the driver)
  std::string cache_dir;                 // TESSEL_CACHE_DIR, default $XDG_CACHE_HOME/tessel or ~/.cache/tessel
  // TESSEL_CPU_SORT32=timed|keys|records: how the CPU sorts 32-bit keys asked for without positions:
  // the keys alone or (key, position) records; timed (default) measures both once per process.
  enum class Sort32 { timed, keys, records } cpu_sort32 = Sort32::timed;
  bool matmul_autotune = false;          // TESSEL_MATMUL_AUTOTUNE=0|1: matmul autotunes each layout on first use
  int linalg_streams = 4;                // TESSEL_LINALG_STREAMS=1..64: CUDA streams a batched cuSOLVER call is split
                                         // over (the caller's and side streams); the CPU backend ignores it.
                                         // Default 4: the fastest of 1-4 for a batched eigh on the H200
                                         // (python_linalg, bench/results/nvidia-h200-2026-12-01.json)
  int num_threads = 1;                   // TESSEL_NUM_THREADS=1..kMaxNumThreads: threads of every CPU op (OpenMP
                                         // loops and the BLAS); default: the CPUs of the process's affinity
                                         // mask (affinity_cpu_count()), read once at start-up
};

// The accepted range of Config::linalg_streams.
constexpr int kMaxLinalgStreams = 64;
// The accepted range of Config::num_threads.
constexpr int kMaxNumThreads = 4096;

// The process-wide configuration, parsed on first use.
const Config& config();

// Parses a configuration from a lookup function; used by config() and by tests.
Config parse_config(std::optional<std::string> (*getenv_fn)(const char*));

// Overrides for tests and for the Python front end; not thread-safe against running ops.
void set_log_level(LogLevel level);
void set_sync_after_ops(bool on);
void set_matmul_autotune(bool on);
// ValueError outside 1..kMaxLinalgStreams.
void set_linalg_streams(int streams);

// ---- CPU threads ----
// The number of CPUs in this process's affinity mask (sched_getaffinity: what taskset, cgroups'
// cpusets and MPI launchers' bindings leave it), at least 1.
int affinity_cpu_count();
// The threads every CPU op may use: TESSEL_NUM_THREADS, else affinity_cpu_count() at start-up,
// until set_num_threads changes it. Cheap (one relaxed atomic load): CPU code calls it per op.
// The backends' rule (docs/guide/configuration.rst, "CPU threads"): an OpenMP region forks at most
// num_threads() threads, and none inside another region (nested regions run on the calling
// thread); the BLAS runs num_threads() threads when called outside a region and one inside.
int num_threads();
// Sets num_threads() for the whole process (every thread, every later op). ValueError outside
// 1..kMaxNumThreads. Not meant to race with running ops (an op already running keeps its count).
void set_num_threads(int threads);

}  // namespace tessel
