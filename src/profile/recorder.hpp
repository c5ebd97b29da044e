#pragma once
// The recording state shared by ranges, hooks, CUPTI and Session (internal).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/profile/session.hpp"

namespace tessel::profile {

struct Session::Data {
  SessionOptions options;
  std::mutex mutex;  // guards the vectors while recording
  std::vector<OpEvent> ops;
  std::vector<GpuEvent> gpu;
  std::vector<CompileEvent> compiles;
  std::vector<MemoryEvent> memory;
  std::atomic<std::uint64_t> dropped{0};
  bool recording = false;
  bool gpu_recorded = false;
  bool gpu_linked = false;  // GPU activities carry their op's id
  std::string cupti_status;
  std::uint64_t generation = 0;
  std::int64_t start_ns = 0, stop_ns = 0;

  // Appends under the mutex, or counts a drop at the cap.
  template <class V, class E>
  void push(V& vec, E&& event) {
    std::lock_guard<std::mutex> lock(mutex);
    if (vec.size() >= options.max_events) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    vec.push_back(std::forward<E>(event));
  }
};

namespace detail {

// The recording session (nullptr when none), and its generation, under recorder_mutex().
std::mutex& recorder_mutex();
std::shared_ptr<Session::Data> active_session();
std::uint64_t active_generation();  // 0 when none records
void set_listener(unsigned bit, bool on);
void start_env_session_if_pending();  // TESSEL_PROFILE's session, at the first op or allocation

// The id the next recorded op gets (src/profile/range.cpp).
std::uint64_t next_op_id();

// CUPTI (src/profile/cupti.cpp).
// How a session drives CUPTI: TESSEL_PROFILE_CUPTI, read at each session start (comma separated
// key=value items; docs/guide/configuration.rst). The defaults are the cheapest settings that
// link every kernel, copy and set to its op; the others exist to measure (bench/profile_bench).
struct CuptiSettings {
  enum class Link { all, launch, off };
  enum class Activity { concurrent, serial, off };
  Link link = Link::all;                     // link=all|launch|off: which calls note their op
  Activity activity = Activity::concurrent;  // activity=concurrent|serial|off: the kernel record kind
  bool cupti_zeroes_buffers = false;         // buffers=mapped|malloc: who provides zeroed buffers
  bool hw_trace = false;                     // hw_trace=0|1: cuptiActivityEnableHWTrace (Blackwell)
  int per_thread_buffers = -1;               // per_thread_buffers=0|1: process-wide, first session; -1: CUPTI's
};
// Raises ValueError naming `what` and the offending item.
CuptiSettings parse_cupti_settings(const std::string& text, const char* what = "TESSEL_PROFILE_CUPTI");

struct CuptiStart {
  std::string error;       // empty when GPU activity is recorded, else why not
  std::string link_error;  // empty when it is linked to ops too, else why not
  std::string note;        // a setting of TESSEL_PROFILE_CUPTI that could not be applied
};
// Reads TESSEL_PROFILE_CUPTI (ValueError when malformed, before anything starts).
CuptiStart cupti_start(Session::Data* data);
void cupti_stop();  // flushes every buffer into the data given to cupti_start; no-op when not running
bool cupti_running();
// While a session records GPU activity, an op's range makes its id the thread's innermost op
// (launches in it are linked to it) and restores the outer one (returned by enter) when it closes.
std::uint64_t cupti_enter_op(std::uint64_t op_id);
void cupti_leave_op(std::uint64_t outer);
// The runtime/driver calls whose correlation ids are noted (for tests); empty, with *error set,
// when libcupti or its Callback API cannot be loaded.
std::vector<std::string> cupti_link_callback_names(std::string* error = nullptr);

// Checked mode's sync step for an op that ran on `device`/`stream`.
void check_sync_after(const std::optional<Device>& device, const std::optional<Stream>& stream);

}  // namespace detail
}  // namespace tessel::profile
