#pragma once
// A one-line progress bar on stderr for long jobs (benchmarks, pipelines, simulations).
// It draws only when stderr is a terminal, or when TESSEL_PROGRESS=1 forces it; TESSEL_PROGRESS=0
// turns it off. Redraws are rate-limited, so calling update() per step costs little.
#include <chrono>
#include <cstdint>
#include <string>

namespace tessel {

class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total);
  ~ProgressBar();  // finishes the line if something was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(std::int64_t done, const std::string& note = "");
  void finish();
  bool enabled() const { return enabled_; }

 private:
  void draw(std::int64_t done, const std::string& note);

  std::string label_;
  std::int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tessel
