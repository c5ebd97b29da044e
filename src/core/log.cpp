#include "tessel/core/log.hpp"

#include <cstdio>
#include <mutex>

namespace tessel {

bool log_enabled(LogLevel level) {
  return level != LogLevel::off && static_cast<int>(level) <= static_cast<int>(config().log_level);
}

void log_message(LogLevel level, const std::string& message) {
  static std::mutex mutex;
  static const char* names[] = {"off", "warn", "info", "debug"};
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[tessel:%s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace tessel
