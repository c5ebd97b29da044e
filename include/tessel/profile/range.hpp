#pragma once
// Op ranges: every public op, JIT compile, pipeline stage, graph capture/replay and OOM retry
// opens one with TESSEL_RANGE("name", args...). A range feeds whatever is listening:
//   - an NVTX tool (Nsight Systems): a range in the `tessel` domain named "op(f32[1024], ...)";
//   - a profile::Session: a host op record (name, shapes, dtypes, device, stream, start/end), and
//     the op id that CUPTI's launch callbacks note, which links the op's kernels to it;
//   - checked mode (TESSEL_CHECK): synchronize / NaN-check after the op.
// With none listening a range costs one relaxed atomic load and a branch; the shape/dtype payload
// is formatted only when something listens. Building with -DTESSEL_NVTX=OFF removes the ranges.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::profile {

namespace detail {
// What listens to ranges (a bit each); 0 when nothing does.
enum : unsigned { kNvtxTool = 1u, kSession = 2u, kChecks = 4u };
extern std::atomic<unsigned> g_listeners;
}  // namespace detail

// True when something listens to ranges (an NVTX tool, a Session or checked mode).
inline bool ranges_active() { return detail::g_listeners.load(std::memory_order_relaxed) != 0; }

// The payload of a range: the arguments' shapes, dtypes, device and stream. Array overloads of
// describe() (found by argument-dependent lookup) fill it; see tessel/array/profile_args.hpp.
class ArgSink {
 public:
  // One array argument: "f32[2,3]" ("f32[]" for 0-d).
  void add_array(const std::int64_t* shape, int ndim, std::string_view dtype, Device device);
  void add_text(std::string_view text);  // any other argument worth naming
  void set_stream(const Stream& stream);
  const std::string& text() const { return text_; }
  const std::optional<Device>& device() const { return device_; }
  const std::optional<Stream>& stream() const { return stream_; }

 private:
  void separate();
  std::string text_;
  std::optional<Device> device_;
  std::optional<Stream> stream_;
};

// Arguments with no describe() overload add nothing to the payload.
template <class T>
void describe(ArgSink&, const T&) {}
inline void describe(ArgSink& sink, const Stream& stream) { sink.set_stream(stream); }
inline void describe(ArgSink& sink, const std::optional<Stream>& stream) {
  if (stream) sink.set_stream(*stream);
}
inline void describe(ArgSink& sink, const char* text) { sink.add_text(text); }

class Range {
 public:
  explicit Range(const char* name) {
    if (ranges_active()) begin(name, nullptr, nullptr);
  }
  template <class A0, class... A>
  Range(const char* name, const A0& a0, const A&... args) {
    if (ranges_active()) {
      auto fill = [&](ArgSink& sink) {
        describe(sink, a0);
        (describe(sink, args), ...);
      };
      begin(name, [](ArgSink& sink, const void* f) { (*static_cast<const decltype(fill)*>(f))(sink); }, &fill);
    }
  }
  // Ends the range; with checked mode on it may throw (a failed synchronize names the op).
  ~Range() noexcept(false) {
    if (frame_ >= 0) end();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

  // The op's result, passed through; checked mode `nan` inspects it first (floating arrays).
  template <class T>
  T&& result(T&& value) {
    if (frame_ >= 0 && checks_nan()) check_result(value);
    return static_cast<T&&>(value);
  }

 private:
  using Fill = void (*)(ArgSink&, const void*);
  void begin(const char* name, Fill fill, const void* context);
  void end();
  static bool checks_nan();
  template <class T>
  void check_result(const T& value);
  void report_nonfinite(std::int64_t count, std::string_view what);
  int frame_ = -1;
  friend struct RangeAccess;
};

// Checked mode's NaN/Inf count of an op result; -1: not a floating array. The ops layer declares
// the Array overload (found by argument-dependent lookup), since arrays sit above this layer.
template <class T>
std::int64_t count_nonfinite(const T&) {
  return -1;
}
template <class T>
void Range::check_result(const T& value) {
  const std::int64_t n = count_nonfinite(value);
  if (n > 0) report_nonfinite(n, "output");
}

// Explicit begin/end for bindings (Python's ts.profile.range): begin returns a token (-1 when
// nothing listens); end(token) closes that range and any left open inside it.
int range_begin(std::string name);
void range_end(int token);

}  // namespace tessel::profile

#if defined(TESSEL_HAVE_RANGES)
// TESSEL_RANGE("name", args...): a range for the rest of the scope, named by the op, with the
// shapes/dtypes of `args` (arrays, streams) as its payload. The variable is `tessel_range_`.
#define TESSEL_RANGE(...) ::tessel::profile::Range tessel_range_(__VA_ARGS__)
// `return TESSEL_RESULT(expr);` passes an op's result through checked mode's NaN check;
// TESSEL_CHECK_RESULT(local); before `return local;` does the same and keeps the implicit move.
#define TESSEL_RESULT(value) tessel_range_.result(value)
#define TESSEL_CHECK_RESULT(value) ((void)tessel_range_.result(value))
#else
#define TESSEL_RANGE(...) ((void)0)
#define TESSEL_RESULT(value) (value)
#define TESSEL_CHECK_RESULT(value) ((void)(value))
#endif
