#pragma once
// A progress bar on stderr for long jobs (benchmarks, pipelines, simulations).
//
// ProgressMode::automatic draws when stderr is a terminal; TESSEL_PROGRESS=1 forces it and
// TESSEL_PROGRESS=0 hides it. On a terminal the bar is redrawn in place at most ten times a
// second; into a file or pipe (a log) it writes one line per tenth of the job. The last update
// (done == total) always draws, so a finished bar is never missing its end.
#include <chrono>
#include <cstdint>
#include <string>

namespace tessel {

enum class ProgressMode { automatic, on, off };

class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total, ProgressMode mode = ProgressMode::automatic);
  ~ProgressBar();  // ends the line if something was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` out of the total given at construction; `note` follows the bar (rates, counts).
  void update(std::int64_t done, const std::string& note = "");
  void finish();
  bool enabled() const { return enabled_; }

 private:
  void draw(std::int64_t done, const std::string& note);

  std::string label_;
  std::int64_t total_;
  bool enabled_;
  bool terminal_;
  bool drawn_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tessel
