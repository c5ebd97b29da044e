#pragma once
#include <gtest/gtest.h>

#include "tessel/jit/compiler.hpp"
#include "temp_dir.hpp"

namespace tessel::jit::test {

// The arch compile-only tests target: NVRTC needs no GPU for it.
inline const char* kTestArch = "sm_90";

using tessel::testing::TempDir;

#define TESSEL_REQUIRE_NVRTC() \
  if (!::tessel::jit::nvrtc_available()) GTEST_SKIP() << "built without NVRTC (TESSEL_CUDA=OFF)"

}  // namespace tessel::jit::test
