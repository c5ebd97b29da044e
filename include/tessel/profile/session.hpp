#pragma once
// profile::Session: a built-in profiler. While a session records it keeps
//   - host ops (every TESSEL_RANGE): name, shapes/dtypes, device, stream, thread, host start/end;
//   - GPU kernels, memcpys and memsets with device timestamps, through CUPTI's Activity API,
//     each linked to the innermost op that launched it: a CUPTI callback on the launch, copy and
//     set calls notes which op each call's correlation id belongs to;
//   - JIT compiles: wall time and where the kernel came from (memory cache, disk cache, NVRTC);
//   - allocator events: alloc, free, cache hit/miss, OOM ladder steps, with allocated/reserved.
// Sessions do not nest: starting one while another records raises tessel::Error.
// Memory is bounded: each kind of event keeps at most SessionOptions::max_events records; later
// ones are counted in dropped() and not kept.
// Without CUPTI (no GPU, libcupti not found, or another profiler such as Nsight holds it) the
// session records host ops, compiles and memory only, warns once and says why in cupti_status().
// When CUPTI's Callback API is held by another subscriber, GPU activity is still recorded but not
// linked to ops (op_id 0): gpu_linked() is false and cupti_status() says why.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::profile {

struct SessionOptions {
  // Per kind (ops, GPU activities, compiles, memory); an event takes about 150-250 bytes.
  std::size_t max_events = std::size_t(1) << 18;
  // CUPTI activity records, when available. false: host ops, compiles and memory only, which
  // costs less host time per op (bench/profile_bench's host_only row). TESSEL_PROFILE_CUPTI
  // chooses how CUPTI is driven (docs/guide/configuration.rst).
  bool gpu = true;
};

// Host times are nanoseconds of std::chrono::steady_clock; GPU timestamps are converted to it.
struct OpEvent {
  std::uint64_t id = 0;   // the op's correlation id (GpuEvent::op_id)
  std::string name;
  std::string args;       // "f32[1024], f32[1024]"
  std::string device;     // "cuda:0", "cpu", "" when the op named none
  std::uint64_t stream = 0;  // tessel Stream::id(); 0 when the op named none
  std::uint32_t thread = 0;  // small per-process thread number
  int depth = 0;             // nesting level on its thread
  std::int64_t start_ns = 0, end_ns = 0;
};

enum class GpuEventKind { kernel, memcpy, memset };
struct GpuEvent {
  GpuEventKind kind = GpuEventKind::kernel;
  std::string name;          // kernel name, or "memcpy HtoD" / "memset"
  int device = 0;
  std::uint32_t stream = 0;  // CUPTI stream id
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t correlation = 0;  // CUPTI correlation id
  std::uint64_t op_id = 0;        // OpEvent::id of the launching op; 0 when launched outside one
  std::uint64_t bytes = 0;        // memcpy/memset
};

struct CompileEvent {
  std::string name;     // kernel name
  std::string source;   // "memory", "disk" or "nvrtc"
  std::int64_t start_ns = 0, end_ns = 0;
  bool cache_hit() const { return source != "nvrtc"; }
};

enum class MemoryEventKind { alloc, free, cache_hit, cache_miss, oom_retry, oom };
struct MemoryEvent {
  MemoryEventKind kind = MemoryEventKind::alloc;
  std::string device;       // "cuda:0", "cpu", "pinned"
  std::int64_t bytes = 0;   // of this event
  std::int64_t allocated = 0, reserved = 0;  // of that pool after the event
  std::int64_t time_ns = 0;
  std::string detail;       // OOM ladder step
};

const char* kind_name(GpuEventKind kind);
const char* kind_name(MemoryEventKind kind);

class Session {
 public:
  // Starts recording; raises tessel::Error when another session records.
  explicit Session(SessionOptions options = {});
  ~Session();  // stops recording
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Stops recording (flushes CUPTI after synchronizing the devices). Idempotent.
  void stop();
  bool recording() const;

  const std::vector<OpEvent>& ops() const;
  const std::vector<GpuEvent>& gpu() const;
  const std::vector<CompileEvent>& compiles() const;
  const std::vector<MemoryEvent>& memory() const;
  std::uint64_t dropped() const;       // events not kept because of max_events
  bool gpu_recorded() const;           // CUPTI recorded this session
  bool gpu_linked() const;             // and linked its GPU activities to their ops
  // Empty when GPU activity was recorded and linked; otherwise why not.
  const std::string& cupti_status() const;

  // Chrome trace / Perfetto JSON: host ops on one track per thread, GPU work on one per stream,
  // compiles on a `jit` track, allocated/reserved memory as counter tracks. Stops first.
  // Raises tessel::Error naming the path when it cannot be written.
  void export_chrome_trace(const std::string& path);
  // A text table of ops. sort_by: gpu_time, cpu_time, count, name; group_by: op (name) or
  // op_args (name and shapes). `limit` rows at most (0: all).
  std::string table(const std::string& sort_by = "gpu_time", const std::string& group_by = "op",
                    std::size_t limit = 0);

  struct Data;

 private:
  std::shared_ptr<Data> data_;
};

// The session started by TESSEL_PROFILE=<prefix> when the library loads (`tessel profile -- ...`),
// stopped at exit, writing <prefix>.json and <prefix>.txt. finish_env_session() stops and writes it
// earlier (Python calls it from its atexit); false when there is none.
bool finish_env_session();

}  // namespace tessel::profile
