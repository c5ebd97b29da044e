#include "tessel/profile/checks.hpp"

#include <atomic>

#include <fmt/format.h>

#include "profile/recorder.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::profile {
namespace {

std::atomic<unsigned> g_checks{0};

struct Item {
  const char* name;
  Check check;
};
constexpr Item kItems[] = {{"sync", check_sync}, {"nan", check_nan}, {"bounds", check_bounds}};

}  // namespace

unsigned parse_checks(const std::string& items, const char* what) {
  unsigned result = 0;
  std::size_t pos = 0;
  while (pos <= items.size()) {
    std::size_t comma = items.find(',', pos);
    if (comma == std::string::npos) comma = items.size();
    std::string item = items.substr(pos, comma - pos);
    // Spaces around an item are allowed: "sync, nan".
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    pos = comma + 1;
    if (item.empty() || item == "off" || item == "0") continue;
    bool known = false;
    for (const Item& k : kItems) {
      if (item == k.name) {
        result |= k.check;
        known = true;
      }
    }
    if (item == "all") {
      result |= check_sync | check_nan | check_bounds;
      known = true;
    }
    if (!known) {
      throw ValueError(fmt::format("{}: unknown check '{}' in '{}'; valid items are sync, nan, bounds, all (comma "
                                   "separated) or off",
                                   what, item, items));
    }
  }
  return result;
}

void set_checks(unsigned checks) {
  g_checks.store(checks & (check_sync | check_nan | check_bounds), std::memory_order_relaxed);
  detail::set_listener(detail::kChecks, checks != 0);
}

void set_checks(const std::string& items) { set_checks(parse_checks(items, "set_checks")); }

unsigned checks() { return g_checks.load(std::memory_order_relaxed); }

std::string checks_str() {
  std::string out;
  for (const Item& k : kItems) {
    if (checks() & k.check) {
      if (!out.empty()) out += ',';
      out += k.name;
    }
  }
  return out;
}

namespace detail {

// A stream being captured into a CUDA graph cannot be synchronized: a replay (Graph.replay, a
// range of its own) synchronizes instead.
void check_sync_after(const std::optional<Device>& device, const std::optional<Stream>& stream) {
  if (stream) {
    if (!stream->capturing()) stream->synchronize();
  } else if (device && device->is_cuda()) {
    const Stream s = current_stream(*device);
    if (!s.capturing()) s.synchronize();
  } else if (!device && cuda_available()) {
    // An op that named no array or stream ran on the current device.
    const Stream s = current_stream(current_device());
    if (!s.capturing()) synchronize();
  }
}

}  // namespace detail
}  // namespace tessel::profile
