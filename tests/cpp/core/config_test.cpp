#include <gtest/gtest.h>

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
  EXPECT_EQ(c.cache_dir, "/tmp/tc");
  EXPECT_TRUE(parse({{"TESSEL_DEVICE_GUARD", ""}}).device_guard);  // empty keeps the default
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
  expect_malformed("TESSEL_MEMORY_FRACTION", "0", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "1.5", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "half", "(0, 1]");
  expect_malformed("TESSEL_MEMORY_FRACTION", "0.5x", "(0, 1]");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "-4", "MiB");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "1.5", "MiB");
  expect_malformed("TESSEL_MAX_SPLIT_SIZE_MB", "1", "MiB");
}
