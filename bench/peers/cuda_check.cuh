// What the standalone nvcc micro-benchmarks in this folder share: the status check (any nonzero
// status of the CUDA runtime, cuBLAS or cuSOLVER prints its number and place and ends the program)
// and the result line that bench/peers/cuda_drivers.py reads into the results file.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    const auto status_ = (x);                                                   \
    if (static_cast<int>(status_) != 0) {                                       \
      std::printf("error %d at %s:%d\n", static_cast<int>(status_), __FILE__, __LINE__); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

// One measured row: a line `result {...}` with its name, its parameters (JSON members, or empty)
// and the median, min and max of its times in ms.
inline void print_result(const std::string& name, const std::string& params, std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  std::printf("result {\"name\": \"%s\"%s%s, \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"rounds\": %zu}\n",
              name.c_str(), params.empty() ? "" : ", ", params.c_str(), ms[ms.size() / 2], ms.front(), ms.back(),
              ms.size());
}
