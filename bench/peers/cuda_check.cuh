// The status check of the standalone nvcc micro-benchmarks in this folder: any nonzero status
// (CUDA runtime, cuBLAS or cuSOLVER) prints its number and place and ends the program.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                   \
  do {                                                                          \
    const auto status_ = (x);                                                   \
    if (static_cast<int>(status_) != 0) {                                       \
      std::printf("error %d at %s:%d\n", static_cast<int>(status_), __FILE__, __LINE__); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
