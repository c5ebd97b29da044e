#include "tessel/core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessel {
namespace {

bool progress_wanted() {
  if (const char* forced = std::getenv("TESSEL_PROGRESS")) return std::strcmp(forced, "0") != 0;
  return isatty(STDERR_FILENO) != 0;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, std::int64_t total)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)), enabled_(progress_wanted()),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::int64_t done, const std::string& note) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // A tenth of a second between redraws keeps the cost per call to a clock read.
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, note);
}

void ProgressBar::draw(std::int64_t done, const std::string& note) {
  constexpr int width = 30;
  const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %6.1fs eta %5.1fs %s\x1b[K", label_.c_str(), filled,
               "##############################", width - filled, "", static_cast<int>(fraction * 100), elapsed, eta,
               note.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

}  // namespace tessel
