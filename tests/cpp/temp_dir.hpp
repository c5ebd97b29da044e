#pragma once
// A fresh directory under the system's temporary folder, removed at scope exit (standard library
// only, so every layer's tests can use it).
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace tessel::testing {

struct TempDir {
  std::string path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = (std::filesystem::temp_directory_path() /
            ("tessel_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace tessel::testing
