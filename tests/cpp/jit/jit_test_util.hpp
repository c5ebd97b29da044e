#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "tessel/jit/compiler.hpp"

namespace tessel::jit::test {

// The arch compile-only tests target: NVRTC needs no GPU for it.
inline const char* kTestArch = "sm_90";

// A fresh directory removed at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = (std::filesystem::temp_directory_path() /
            ("tessel_jit_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

#define TESSEL_REQUIRE_NVRTC() \
  if (!::tessel::jit::nvrtc_available()) GTEST_SKIP() << "built without NVRTC (TESSEL_CUDA=OFF)"

}  // namespace tessel::jit::test
