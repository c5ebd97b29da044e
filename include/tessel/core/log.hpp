#pragma once
#include <string>

#include "tessel/core/config.hpp"

namespace tessel {

bool log_enabled(LogLevel level);
// Writes one line to stderr as "[tessel:LEVEL] message".
void log_message(LogLevel level, const std::string& message);

}  // namespace tessel

#define TESSEL_LOG_AT(level, msg_expr)                                   \
  do {                                                                   \
    if (::tessel::log_enabled(level)) ::tessel::log_message(level, (msg_expr)); \
  } while (0)
#define TESSEL_LOG_WARN(msg_expr) TESSEL_LOG_AT(::tessel::LogLevel::warn, msg_expr)
#define TESSEL_LOG_INFO(msg_expr) TESSEL_LOG_AT(::tessel::LogLevel::info, msg_expr)
#define TESSEL_LOG_DEBUG(msg_expr) TESSEL_LOG_AT(::tessel::LogLevel::debug, msg_expr)
