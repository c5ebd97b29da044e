#include "ops/checks.hpp"

#include "tessel/memory/capture.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/reduce.hpp"

namespace tessel {

std::int64_t count_nonfinite(const Array& a) {
  // The check runs ops of its own; their results are not checked again.
  thread_local bool inside = false;
  if (inside || !a.defined() || !(is_floating(a.dtype()) || is_complex(a.dtype()))) return -1;
  // Reading the count waits on the host, which a graph capture forbids: captured ops go unchecked.
  if (a.device().is_cuda() && detail::active_capture() != nullptr) return -1;
  if (a.size() == 0) return 0;
  inside = true;
  try {
    const std::int64_t bad = sum(logical_not(isfinite(a))).item<std::int64_t>();
    inside = false;
    return bad;
  } catch (...) {
    inside = false;
    throw;
  }
}

}  // namespace tessel
