#include "tessel/profile/timer.hpp"

#include <algorithm>
#include <chrono>

#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"

namespace tessel::profile {
namespace {

Timing summarize(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  Timing t;
  t.repeats = static_cast<int>(times.size());
  t.median_ms = times[times.size() / 2];
  t.min_ms = times.front();
  t.max_ms = times.back();
  return t;
}

void check_options(const TimingOptions& options, const char* op) {
  if (options.repeats < 1 || options.warmup < 0) {
    throw ValueError(std::string(op) + ": repeats must be >= 1 and warmup >= 0");
  }
}

}  // namespace

Timing time_on_stream(const std::function<void()>& body, const Stream& stream, TimingOptions options) {
  check_options(options, "time_on_stream");
  for (int i = 0; i < options.warmup; ++i) body();
  Event start(stream.device()), stop(stream.device());
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(options.repeats));
  for (int i = 0; i < options.repeats; ++i) {
    start.record(stream);
    body();
    stop.record(stream);
    stop.synchronize();
    times.push_back(start.elapsed_ms(stop));
  }
  return summarize(std::move(times));
}

Timing time_on_host(const std::function<void()>& body, TimingOptions options) {
  check_options(options, "time_on_host");
  for (int i = 0; i < options.warmup; ++i) body();
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(options.repeats));
  for (int i = 0; i < options.repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize(std::move(times));
}

}  // namespace tessel::profile
