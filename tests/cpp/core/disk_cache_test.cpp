// detail::DiskCache: keyed file names, reads, atomic writes, folder creation, failures.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/disk_cache.hpp"
#include "temp_dir.hpp"
#include "tessel/core/error.hpp"

namespace {

using tessel::detail::DiskCache;
using tessel::testing::TempDir;

std::vector<std::string> file_names(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  return names;
}

TEST(DiskCache, KeyedFileNames) {
  const DiskCache cache("/some/folder", ".json");
  EXPECT_TRUE(cache.enabled());
  EXPECT_EQ(cache.path("0123abcd"), "/some/folder/0123abcd.json");
  for (const char* bad : {"", ".", "..", "a/b", "/abs"}) {
    try {
      cache.path(bad);
      FAIL() << "key \"" << bad << "\" was accepted";
    } catch (const tessel::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("not a plain file name"), std::string::npos) << e.what();
    }
  }
}

TEST(DiskCache, WriteThenReadCreatesTheFolder) {
  TempDir dir;
  const std::string folder = dir.path + "/nested/twice";
  const DiskCache cache(folder, ".bin");
  EXPECT_FALSE(cache.read("k1").has_value());  // nothing cached, no folder yet
  const std::string binary("\x00\x01\xff payload\n", 12);
  cache.write("k1", binary);
  EXPECT_TRUE(std::filesystem::exists(folder + "/k1.bin"));
  EXPECT_EQ(cache.read("k1").value(), binary);
  EXPECT_FALSE(cache.read("k2").has_value());
}

TEST(DiskCache, OverwriteReplacesAndLeavesNoTemporaryFiles) {
  TempDir dir;
  const DiskCache cache(dir.path, ".txt");
  cache.write("key", std::string(100000, 'a'));
  cache.write("key", "short");
  EXPECT_EQ(cache.read("key").value(), "short");
  EXPECT_EQ(file_names(dir.path), std::vector<std::string>{"key.txt"});
}

TEST(DiskCache, ConcurrentWritersLeaveOneWholeFile) {
  TempDir dir;
  const DiskCache cache(dir.path, ".txt");
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&cache, t] {
      const std::string contents(50000, static_cast<char>('a' + t));
      for (int i = 0; i < 20; ++i) cache.write("shared", contents);
    });
  }
  for (auto& w : writers) w.join();
  const std::string got = cache.read("shared").value();
  ASSERT_EQ(got.size(), 50000u);
  EXPECT_EQ(got, std::string(got.size(), got[0]));  // one writer's whole file, never a mix
  EXPECT_EQ(file_names(dir.path), std::vector<std::string>{"shared.txt"});
}

TEST(DiskCache, DisabledCacheReadsNothingAndWritesNothing) {
  const DiskCache cache("", ".txt");
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(cache.path("key"), "");
  cache.write("key", "ignored");
  EXPECT_FALSE(cache.read("key").has_value());
}

TEST(DiskCache, UnwritableFolderIsAnErrorNamingTheFile) {
  const DiskCache cache("/proc/tessel-not-writable/cache", ".txt");
  try {
    cache.write("key", "data");
    FAIL() << "the write succeeded";
  } catch (const tessel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/tessel-not-writable/cache"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(cache.read("key").has_value());
}

TEST(DiskCache, FailedRenameRemovesTheTemporaryFile) {
  TempDir dir;
  const DiskCache cache(dir.path, "");
  std::filesystem::create_directories(dir.path + "/key/inside");  // a non-empty folder where the file goes
  try {
    cache.write("key", "data");
    FAIL() << "the write succeeded";
  } catch (const tessel::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path + "/key"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_names(dir.path), std::vector<std::string>{"key"});
}

}  // namespace
