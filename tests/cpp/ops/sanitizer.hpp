#pragma once
// scripts/gpu-check.sh sets TESSEL_UNDER_SANITIZER=1 for its compute-sanitizer runs, where every
// module load and launch is many times slower. Exhaustive tests then cover a rotating subset
// (still every op across the dtype cases) so that the memcheck of tessel_ops_tests stays short.
#include <cstdlib>
#include <string>

namespace tessel::testing {

inline bool under_sanitizer() {
  const char* env = std::getenv("TESSEL_UNDER_SANITIZER");
  return env && *env && std::string(env) != "0";
}

// True when case `item` of a sweep runs: always, or under the sanitizer one in `stride`, rotated
// by `rotation` (e.g. the dtype) so that different cases cover different items.
inline bool sanitizer_sample(int item, int rotation, int stride = 6) {
  return !under_sanitizer() || (item + rotation) % stride == 0;
}

}  // namespace tessel::testing
