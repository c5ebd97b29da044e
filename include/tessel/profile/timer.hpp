#pragma once
// Timing a region of stream work the honest way: warm-up runs first (compilation, module load,
// first touch), then each repeat is bracketed by events on the stream, and the median is kept.
// On the CPU backend the events are host timestamps, so the same code times both backends.
#include <functional>
#include <vector>

#include "tessel/core/stream.hpp"

namespace tessel::profile {

struct TimingOptions {
  int warmup = 3;
  int repeats = 25;
};

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int repeats = 0;
};

// Times body(), which queues its work on `stream`. Each repeat waits for the previous one.
Timing time_on_stream(const std::function<void()>& body, const Stream& stream, TimingOptions options = {});

// Host wall time per call of body() (which must synchronize itself if it queues device work).
Timing time_on_host(const std::function<void()>& body, TimingOptions options = {});

}  // namespace tessel::profile
