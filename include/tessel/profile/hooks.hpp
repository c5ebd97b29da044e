#pragma once
// What the layers above report to a recording Session besides op ranges: allocator events and
// JIT compiles. Each call is one relaxed load and a branch when no session records.
#include <cstdint>
#include <string_view>

#include "tessel/profile/range.hpp"
#include "tessel/profile/session.hpp"

namespace tessel::profile {

inline bool session_recording() {
  return (detail::g_listeners.load(std::memory_order_relaxed) & detail::kSession) != 0;
}

// steady_clock nanoseconds, the time base of every event.
std::int64_t now_ns();

namespace detail {
void record_memory(MemoryEventKind kind, std::string_view device, std::int64_t bytes, std::int64_t allocated,
                   std::int64_t reserved, std::string_view what);
void record_compile(std::string_view name, std::string_view source, std::int64_t start_ns, std::int64_t end_ns);
}  // namespace detail

inline void memory_event(MemoryEventKind kind, std::string_view device, std::int64_t bytes, std::int64_t allocated,
                         std::int64_t reserved, std::string_view what = {}) {
  if (session_recording()) detail::record_memory(kind, device, bytes, allocated, reserved, what);
}
inline void compile_event(std::string_view name, std::string_view source, std::int64_t start_ns,
                          std::int64_t end_ns) {
  if (session_recording()) detail::record_compile(name, source, start_ns, end_ns);
}

}  // namespace tessel::profile
