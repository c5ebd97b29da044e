#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <string>

#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"

namespace {

std::map<std::string, std::string> fake_env;
std::optional<std::string> fake_getenv(const char* name) {
  auto it = fake_env.find(name);
  if (it == fake_env.end()) return std::nullopt;
  return it->second;
}

tessel::Config parse(std::map<std::string, std::string> env) {
  fake_env = std::move(env);
  return tessel::parse_config(&fake_getenv);
}

// The message must name the variable, the bad value and what is accepted.
void expect_malformed(const std::string& name, const std::string& value, const std::string& accepted) {
  try {
    parse({{name, value}});
    FAIL() << name << "=" << value << " was accepted";
  } catch (const tessel::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find("'" + value + "'"), std::string::npos) << what;
    EXPECT_NE(what.find(accepted), std::string::npos) << what;
  }
}

}  // namespace

TEST(Config, Defaults) {
  const auto c = parse({{"HOME", "/home/u"}});
  EXPECT_EQ(c.log_level, tessel::LogLevel::warn);
  EXPECT_FALSE(c.sync_after_ops);
  EXPECT_TRUE(c.caching_allocator);
  EXPECT_DOUBLE_EQ(c.memory_fraction, 1.0);
  EXPECT_EQ(c.max_split_size, 0u);
  EXPECT_FALSE(c.force_cpu);
  EXPECT_TRUE(c.device_guard);
  EXPECT_TRUE(c.peer_access);
  EXPECT_FALSE(c.matmul_autotune);
  EXPECT_EQ(c.linalg_streams, 4);
  EXPECT_EQ(c.num_threads, tessel::affinity_cpu_count());
  EXPECT_EQ(c.cache_dir, "/home/u/.cache/tessel");
}

TEST(Config, ParsesEveryVariable) {
  const auto c = parse({{"TESSEL_LOG", "debug"},
                        {"TESSEL_SYNC", "1"},
                        {"TESSEL_ALLOCATOR", "direct"},
                        {"TESSEL_MEMORY_FRACTION", "0.25"},
                        {"TESSEL_MAX_SPLIT_SIZE_MB", "64"},
                        {"TESSEL_FORCE_CPU", "true"},
                        {"TESSEL_DEVICE_GUARD", "0"},
                        {"TESSEL_PEER_ACCESS", "off"},
                        {"TESSEL_CACHE_DIR", "/tmp/tc"},
                        {"TESSEL_MATMUL_AUTOTUNE", "1"},
                        {"TESSEL_LINALG_STREAMS", "3"},
                        {"TESSEL_NUM_THREADS", "7"},
                        {"TESSEL_CPU_SORT32", "records"},
                        {"XDG_CACHE_HOME", "/xdg"}});
  EXPECT_EQ(c.log_level, tessel::LogLevel::debug);
  EXPECT_TRUE(c.sync_after_ops);
  EXPECT_FALSE(c.caching_allocator);
  EXPECT_DOUBLE_EQ(c.memory_fraction, 0.25);
  EXPECT_EQ(c.max_split_size, std::size_t{64} << 20);
  EXPECT_TRUE(c.force_cpu);
  EXPECT_FALSE(c.device_guard);
  EXPECT_FALSE(c.peer_access);
  EXPECT_TRUE(c.matmul_autotune);
  EXPECT_EQ(c.linalg_streams, 3);
  EXPECT_EQ(c.num_threads, 7);
  EXPECT_EQ(c.cpu_sort32, tessel::Config::Sort32::records);
  EXPECT_EQ(c.cache_dir, "/tmp/tc");
  EXPECT_TRUE(parse({{"TESSEL_DEVICE_GUARD", ""}}).device_guard);  // empty keeps the default
  EXPECT_EQ(parse({{"TESSEL_LINALG_STREAMS", ""}}).linalg_streams, 4);
  EXPECT_EQ(parse({{"TESSEL_LINALG_STREAMS", "1"}}).linalg_streams, 1);
  EXPECT_EQ(parse({{"TESSEL_LINALG_STREAMS", "64"}}).linalg_streams, tessel::kMaxLinalgStreams);
  EXPECT_EQ(parse({{"XDG_CACHE_HOME", "/xdg"}}).cache_dir, "/xdg/tessel");
  EXPECT_EQ(parse({{"TESSEL_LOG", "off"}}).log_level, tessel::LogLevel::off);
  EXPECT_EQ(parse({{"TESSEL_LOG", "info"}}).log_level, tessel::LogLevel::info);
}

TEST(Config, MalformedValuesAreClearErrors) {
  expect_malformed("TESSEL_LOG", "loud", "off, warn, info or debug");
  expect_malformed("TESSEL_SYNC", "2", "0 or 1");
  expect_malformed("TESSEL_FORCE_CPU", "maybe", "0 or 1");
  expect_malformed("TESSEL_DEVICE_GUARD", "sometimes", "0 or 1");
  expect_malformed("TESSEL_PEER_ACCESS", "2", "0 or 1");
  expect_malformed("TESSEL_MATMUL_AUTOTUNE", "always", "0 or 1");
  expect_malformed("TESSEL_ALLOCATOR", "cudaMalloc", "caching or direct");
  expect_malformed("TESSEL_CPU_SORT32", "radix", "timed, keys or records");
  expect_malformed("TESSEL_MEMORY_FRACTION", "0", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "1.5", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "half", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "0.5x", "(0, 1]");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "-4", "MiB");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "1.5", "MiB");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "1", "MiB");
  for (const char* bad : {"0", "-2", "2.5", "65", "four", "3x", "nan", "inf"})
    expect_malformed("TESSEL_LINALG_STREAMS", bad, "a whole number from 1 to 64");
  for (const char* bad : {"0", "-1", "1.5", "4097", "two", "2 ", "nan"})
    expect_malformed("TESSEL_NUM_THREADS", bad, "a whole number from 1 to 4096");
}

// TESSEL_NUM_THREADS: an empty value keeps the default, the affinity mask's CPU count.
TEST(Config, NumThreads) {
  EXPECT_EQ(parse({{"TESSEL_NUM_THREADS", ""}}).num_threads, tessel::affinity_cpu_count());
  EXPECT_EQ(parse({{"TESSEL_NUM_THREADS", "1"}}).num_threads, 1);
  EXPECT_EQ(parse({{"TESSEL_NUM_THREADS", "4096"}}).num_threads, tessel::kMaxNumThreads);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(tessel::affinity_cpu_count(), CPU_COUNT(&set));
  EXPECT_GE(tessel::affinity_cpu_count(), 1);
}

// The run-time setting: every later num_threads() reads it; a rejected value changes nothing.
TEST(Config, SetNumThreads) {
  const int before = tessel::num_threads();
  tessel::set_num_threads(3);
  EXPECT_EQ(tessel::num_threads(), 3);
  for (int bad : {0, -1, tessel::kMaxNumThreads + 1}) {
    try {
      tessel::set_num_threads(bad);
      ADD_FAILURE() << "set_num_threads(" << bad << ") was accepted";
    } catch (const tessel::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("from 1 to 4096, got " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(tessel::num_threads(), 3);
  tessel::set_num_threads(before);
  EXPECT_EQ(tessel::num_threads(), before);
}

// The run-time override keeps the variable's range and restores cleanly.
TEST(Config, SetLinalgStreams) {
  const int before = tessel::config().linalg_streams;
  tessel::set_linalg_streams(4);
  EXPECT_EQ(tessel::config().linalg_streams, 4);
  for (int bad : {0, -1, tessel::kMaxLinalgStreams + 1}) {
    try {
      tessel::set_linalg_streams(bad);
      ADD_FAILURE() << "set_linalg_streams(" << bad << ") was accepted";
    } catch (const tessel::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("from 1 to 64, got " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(tessel::config().linalg_streams, 4);  // a rejected value changes nothing
  tessel::set_linalg_streams(before);
}
