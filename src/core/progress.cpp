#include "tessel/core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessel {
namespace {

bool wanted(ProgressMode mode, bool terminal) {
  if (mode != ProgressMode::automatic) return mode == ProgressMode::on;
  if (const char* forced = std::getenv("TESSEL_PROGRESS")) return std::strcmp(forced, "0") != 0;
  return terminal;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, std::int64_t total, ProgressMode mode)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)), enabled_(false),
      terminal_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()), last_draw_(start_) {
  enabled_ = wanted(mode, terminal_);
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::int64_t done, const std::string& note) {
  if (!enabled_) return;
  const bool last = done >= total_;
  if (terminal_) {
    // A tenth of a second between redraws keeps the cost per call to a clock read.
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
  } else {
    const int tenth = static_cast<int>(10 * std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0));
    if (tenth == last_tenth_ && !last) return;
    last_tenth_ = tenth;
  }
  draw(done, note);
}

void ProgressBar::draw(std::int64_t done, const std::string& note) {
  constexpr int width = 30;
  const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  std::fprintf(stderr, "%s%s [%s%s] %3d%% %6.1fs eta %5.1fs %s%s", terminal_ ? "\r" : "", label_.c_str(),
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<int>(fraction * 100),
               elapsed, eta, note.c_str(), terminal_ ? "\x1b[K" : "\n");
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_ && terminal_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace tessel
