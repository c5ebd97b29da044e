#include "tessel/profile/range.hpp"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <vector>

#include <fmt/format.h>

#if defined(TESSEL_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

#include "profile/recorder.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/checks.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel::profile {
namespace detail {

std::atomic<unsigned> g_listeners{0};

void set_listener(unsigned bit, bool on) {
  if (on) {
    g_listeners.fetch_or(bit, std::memory_order_relaxed);
  } else {
    g_listeners.fetch_and(~bit, std::memory_order_relaxed);
  }
}

}  // namespace detail

namespace {

struct Frame {
  std::string name;
  std::string args;
  std::optional<Device> device;
  std::optional<Stream> stream;
  std::uint64_t id = 0;
  std::uint64_t generation = 0;  // of the session it records into; 0: none
  std::int64_t start_ns = 0;
  int uncaught = 0;
  std::uint64_t outer_op = 0;  // the thread's innermost op before this one (CUPTI linking)
  bool nvtx = false;
  bool correlated = false;
};

thread_local std::vector<Frame> t_frames;

std::uint32_t thread_number() {
  static std::atomic<std::uint32_t> next{1};
  thread_local const std::uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

std::atomic<std::uint64_t> g_next_op_id{1};

#if defined(TESSEL_HAVE_NVTX)
nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("tessel");
  return domain;
}
#endif

// Environment read when the library loads: an attached NVTX tool (Nsight sets the injection
// path), TESSEL_CHECK and TESSEL_PROFILE. A malformed TESSEL_CHECK is raised by the first op.
std::string g_check_env_error;  // NOLINT: set once at load
struct LoadTimeSettings {
  LoadTimeSettings() {
    if (std::getenv("NVTX_INJECTION64_PATH") != nullptr || std::getenv("NVTX_INJECTION32_PATH") != nullptr) {
      detail::set_listener(detail::kNvtxTool, true);
    }
    if (const char* items = std::getenv("TESSEL_CHECK")) {
      try {
        set_checks(parse_checks(items, "TESSEL_CHECK"));
      } catch (const std::exception& e) {
        g_check_env_error = e.what();
        detail::set_listener(detail::kChecks, true);
      }
    }
  }
};
const LoadTimeSettings g_load_time_settings;

}  // namespace

std::uint64_t detail::next_op_id() { return g_next_op_id.load(std::memory_order_relaxed); }

void ArgSink::separate() {
  if (!text_.empty()) text_ += ", ";
}

void ArgSink::add_array(const std::int64_t* shape, int ndim, std::string_view dtype, Device device) {
  separate();
  text_ += dtype;
  text_ += '[';
  for (int i = 0; i < ndim; ++i) {
    if (i) text_ += ',';
    text_ += std::to_string(shape[i]);
  }
  text_ += ']';
  if (!device_) device_ = device;
}

void ArgSink::add_text(std::string_view text) {
  separate();
  text_ += text;
}

void ArgSink::set_stream(const Stream& stream) {
  stream_ = stream;
  if (!device_) device_ = stream.device();
}

void Range::begin(const char* name, Fill fill, const void* context) {
  if (!g_check_env_error.empty()) {
    const std::string message = g_check_env_error;
    g_check_env_error.clear();
    detail::set_listener(detail::kChecks, checks() != 0);
    throw ValueError(message);
  }
  detail::start_env_session_if_pending();
  const unsigned listeners = detail::g_listeners.load(std::memory_order_relaxed);
  ArgSink sink;
  if (fill) fill(sink, context);
  Frame frame;
  frame.name = name;
  frame.args = sink.text();
  frame.device = sink.device();
  frame.stream = sink.stream();
  frame.uncaught = std::uncaught_exceptions();
#if defined(TESSEL_HAVE_NVTX)
  if (listeners & detail::kNvtxTool) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    const std::string message = frame.args.empty() ? frame.name : frame.name + "(" + frame.args + ")";
    attributes.message.ascii = message.c_str();
    nvtxDomainRangePushEx(nvtx_domain(), &attributes);
    frame.nvtx = true;
  }
#endif
  if (listeners & detail::kSession) {
    frame.generation = detail::active_generation();
    if (frame.generation != 0) {
      frame.id = g_next_op_id.fetch_add(1, std::memory_order_relaxed);
      if (detail::cupti_running()) {
        frame.outer_op = detail::cupti_enter_op(frame.id);
        frame.correlated = true;
      }
      frame.start_ns = now_ns();
    }
  }
  t_frames.push_back(std::move(frame));
  frame_ = static_cast<int>(t_frames.size()) - 1;
}

namespace {

// Closes frames [index, top): records them and restores NVTX/CUPTI state. Returns the frame at index.
Frame close_frames(int index) {
  Frame closed;
  while (static_cast<int>(t_frames.size()) > index) {
    Frame frame = std::move(t_frames.back());
    t_frames.pop_back();
    const std::int64_t end = frame.generation != 0 ? now_ns() : 0;
    if (frame.correlated) detail::cupti_leave_op(frame.outer_op);
#if defined(TESSEL_HAVE_NVTX)
    if (frame.nvtx) nvtxDomainRangePop(nvtx_domain());
#endif
    if (frame.generation != 0 && frame.generation == detail::active_generation()) {
      if (auto data = detail::active_session()) {
        OpEvent event;
        event.id = frame.id;
        event.name = frame.name;
        event.args = frame.args;
        if (frame.device) event.device = frame.device->str();
        if (frame.stream) event.stream = frame.stream->id();
        event.thread = thread_number();
        event.depth = static_cast<int>(t_frames.size());
        event.start_ns = frame.start_ns;
        event.end_ns = end;
        data->push(data->ops, std::move(event));
      }
    }
    if (static_cast<int>(t_frames.size()) == index) closed = std::move(frame);
  }
  return closed;
}

}  // namespace

void Range::end() {
  const int index = frame_;
  frame_ = -1;
  Frame frame = close_frames(index);
  // Checks run only when the op itself completed (not while an exception unwinds it).
  if ((checks() & check_sync) && std::uncaught_exceptions() == frame.uncaught) {
    try {
      detail::check_sync_after(frame.device, frame.stream);
    } catch (const CudaError& e) {
      throw CudaError(fmt::format("checked mode (sync): {}({}) failed: {}", frame.name, frame.args, e.what()), e.code(),
                      e.fatal());
    } catch (const Error& e) {
      throw Error(fmt::format("checked mode (sync): {}({}) failed: {}", frame.name, frame.args, e.what()));
    }
  }
}

bool Range::checks_nan() { return (checks() & check_nan) != 0; }

void Range::report_nonfinite(std::int64_t count, std::string_view what) {
  const Frame& frame = t_frames[static_cast<std::size_t>(frame_)];
  throw ValueError(fmt::format("checked mode (nan): {}({}) produced {} NaN/Inf value{} in its {}", frame.name,
                               frame.args, count, count == 1 ? "" : "s", what));
}

// Hands a range's frame over to a token, so the range's destructor leaves it open.
struct RangeAccess {
  static int release(Range& range) {
    const int token = range.frame_;
    range.frame_ = -1;
    return token;
  }
};

int range_begin(std::string name) {
  if (!ranges_active()) return -1;
  Range range(name.c_str());  // begin copies the name into its frame
  return RangeAccess::release(range);
}

void range_end(int token) {
  if (token < 0 || token >= static_cast<int>(t_frames.size())) return;
  close_frames(token);
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tessel::profile
