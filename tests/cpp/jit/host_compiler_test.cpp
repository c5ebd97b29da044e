// The host compiler of the CPU backend (jit/host_compiler.hpp): compile and launch, the memory and
// disk caches, the disk cache's safety checks, error messages, and ElementwiseKernel on the CPU.
// Every test needs a host C++ compiler (g++ here); without one they skip, except the test of the
// missing-compiler error itself.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "jit/elementwise_host.hpp"
#include "jit_test_util.hpp"
#include "testing.hpp"
#include "tessel/array/half.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/config.hpp"
#include "tessel/jit/host_compiler.hpp"
#include "tessel/jit/user_kernels.hpp"

namespace tessel::jit {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

#define REQUIRE_HOST_COMPILER() \
  if (!host_compiler_available()) GTEST_SKIP() << "no host C++ compiler (g++)"

// What generated sources declare; the layout must be TsHostLaunch's.
const char* kLaunchStruct = R"(
#include <cstdint>
struct TsHostLaunch {
  std::uint32_t grid[3];
  std::uint32_t block[3];
  std::uint64_t shared_bytes;
  std::int32_t num_threads;
  std::int32_t error_code;
  char error[1024];
};
)";

// y = a * x + y over n, and the launch record's fields into info.
HostCompileRequest axpy_request(const std::string& symbol = "axpy") {
  HostCompileRequest r;
  r.symbol = symbol;
  r.source = std::string(kLaunchStruct) + R"(
extern "C" int )" + symbol + R"((TsHostLaunch* launch, void** params) {
  const float a = *static_cast<const float*>(params[0]);
  const float* x = *static_cast<const float* const*>(params[1]);
  float* y = *static_cast<float* const*>(params[2]);
  const long long n = *static_cast<const long long*>(params[3]);
  long long* info = *static_cast<long long* const*>(params[4]);
  for (long long i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
  info[0] = launch->grid[0]; info[1] = launch->grid[1]; info[2] = launch->block[0];
  info[3] = static_cast<long long>(launch->shared_bytes); info[4] = launch->num_threads;
  return 0;
}
)";
  return r;
}

void run_axpy(const HostKernel& k) {
  float a = 2.0f;
  std::vector<float> x{1, 2, 3, 4}, y{10, 20, 30, 40};
  float* xp = x.data();
  float* yp = y.data();
  long long n = 4;
  long long info[5] = {-1, -1, -1, -1, -1};
  long long* infop = info;
  void* params[] = {&a, &xp, &yp, &n, &infop};
  LaunchConfig config;
  config.grid = Dim3(3, 2);
  config.block = Dim3(64);
  config.shared_mem = 512;
  k.launch(config, params);
  EXPECT_EQ(y, (std::vector<float>{12, 24, 36, 48}));
  EXPECT_EQ(info[0], 3);
  EXPECT_EQ(info[1], 2);
  EXPECT_EQ(info[2], 64);
  EXPECT_EQ(info[3], 512);
  EXPECT_EQ(info[4], tessel::num_threads());  // 0 asks for the process's CPU thread setting
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

// Sets an environment variable for a scope, then restores it.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) old = v;
    ::setenv(n, value, 1);
  }
  ~ScopedEnv() {
    if (old) {
      ::setenv(name.c_str(), old->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};

TEST(HostCompiler, FindsTheCompiler) {
  REQUIRE_HOST_COMPILER();
  const HostCompilerInfo info = find_host_compiler();
  EXPECT_FALSE(info.path.empty());
  EXPECT_FALSE(info.version.empty());
  EXPECT_EQ(host_compiler(), info.path + ": " + info.version);
  const std::vector<std::string> flags = host_compile_flags({"", "k", {"-DX=1"}});
  const std::vector<std::string> want{"-std=c++17", "-O3",     "-march=native",         "-fPIC",
                                      "-shared",    "-fopenmp", "-fno-strict-aliasing", "-DX=1"};
  EXPECT_EQ(flags, want);
}

TEST(HostCompiler, CompilesAndLaunchesATinyKernel) {
  REQUIRE_HOST_COMPILER();
  TempDir dir;
  HostKernelCache cache(dir.path + "/host");
  const HostKernel k = cache.get(axpy_request());
  ASSERT_TRUE(k.defined());
  EXPECT_EQ(k.symbol(), "axpy");
  EXPECT_NE(k.entry(), nullptr);
  run_axpy(k);
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 0u);
  EXPECT_EQ(s.disk_hits, 0u);
  // The folder was made private, and holds the one entry.
  struct stat st;
  ASSERT_EQ(::stat((dir.path + "/host").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(cache.disk_enabled());
  const std::string entry = cache.path_for(host_cache_key(axpy_request(), find_host_compiler()));
  EXPECT_TRUE(fs::exists(entry)) << entry;
  EXPECT_EQ(files_in(dir.path + "/host").size(), 1u);
}

TEST(HostCompiler, SecondGetIsAMemoryHit) {
  REQUIRE_HOST_COMPILER();
  HostKernelCache cache("");  // memory only
  const HostKernel a = cache.get(axpy_request());
  const HostKernel b = cache.get(axpy_request());
  EXPECT_EQ(a.entry(), b.entry());
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().memory_hits, 1u);
  EXPECT_FALSE(cache.disk_enabled());
  // Another symbol (or other options) is another key.
  const HostKernel c = cache.get(axpy_request("axpy2"));
  EXPECT_NE(c.entry(), a.entry());
  HostCompileRequest o2 = axpy_request();
  o2.options = {"-O2"};
  (void)cache.get(o2);
  EXPECT_EQ(cache.stats().misses, 3u);
  run_axpy(c);
}

TEST(HostCompiler, ConcurrentRequestsCompileOnce) {
  REQUIRE_HOST_COMPILER();
  TempDir dir;
  HostKernelCache cache(dir.path + "/host");
  std::vector<std::thread> threads;
  std::vector<HostEntry> entries(4, nullptr);
  for (std::size_t t = 0; t < entries.size(); ++t) {
    threads.emplace_back([&, t] { entries[t] = cache.get(axpy_request("axpy_threads")).entry(); });
  }
  for (auto& th : threads) th.join();
  for (HostEntry e : entries) EXPECT_EQ(e, entries[0]);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().memory_hits, 3u);
}

TEST(HostCompiler, FreshCacheLoadsFromDisk) {
  REQUIRE_HOST_COMPILER();
  TempDir dir;
  {
    HostKernelCache first(dir.path + "/host");
    (void)first.get(axpy_request());
    EXPECT_EQ(first.stats().misses, 1u);
  }
  HostKernelCache second(dir.path + "/host");
  const HostKernel k = second.get(axpy_request());
  EXPECT_EQ(second.stats().disk_hits, 1u);
  EXPECT_EQ(second.stats().misses, 0u);
  EXPECT_EQ(second.stats().disk_errors, 0u);
  run_axpy(k);
}

TEST(HostCompiler, CorruptEntryIsCompiledAgain) {
  REQUIRE_HOST_COMPILER();
  TempDir dir;
  std::string path;
  {
    HostKernelCache first(dir.path + "/host");
    (void)first.get(axpy_request());
    path = first.path_for(host_cache_key(axpy_request(), find_host_compiler()));
  }
  for (const char* damage : {"flip", "truncate"}) {
    SCOPED_TRACE(damage);
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    ASSERT_GT(bytes.size(), 200u);
    if (std::string(damage) == "flip") {
      bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
    } else {
      bytes.resize(bytes.size() - 100);
    }
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    HostKernelCache again(dir.path + "/host");
    const HostKernel k = again.get(axpy_request());
    EXPECT_EQ(again.stats().disk_errors, 1u);
    EXPECT_EQ(again.stats().misses, 1u);
    EXPECT_EQ(again.stats().disk_hits, 0u);
    run_axpy(k);
    // The recompiled entry replaced the corrupt one.
    HostKernelCache third(dir.path + "/host");
    (void)third.get(axpy_request());
    EXPECT_EQ(third.stats().disk_hits, 1u);
  }
}

TEST(HostCompiler, UnsafeFolderDisablesTheDiskCache) {
  REQUIRE_HOST_COMPILER();
  TempDir dir;
  const std::string folder = dir.path + "/shared";
  fs::create_directories(folder);
  ASSERT_EQ(::chmod(folder.c_str(), 0775), 0);
  HostKernelCache cache(folder);
  ::testing::internal::CaptureStderr();
  const HostKernel k = cache.get(axpy_request());
  (void)cache.get(axpy_request("axpy_other"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.disk_enabled());
  run_axpy(k);
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_TRUE(files_in(folder).empty());  // nothing read from or written to it
  // One warning, naming the folder and the permissions.
  EXPECT_NE(log.find("not using the host kernel cache " + folder), std::string::npos) << log;
  EXPECT_NE(log.find("775"), std::string::npos) << log;
  EXPECT_EQ(log.find("not using", log.find("not using") + 1), std::string::npos) << log;

  // A folder of another user (only root can make one here).
  if (::geteuid() == 0) {
    const std::string other = dir.path + "/other";
    fs::create_directories(other);
    ASSERT_EQ(::chmod(other.c_str(), 0700), 0);
    ASSERT_EQ(::chown(other.c_str(), 12345, 12345), 0);
    HostKernelCache foreign(other);
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(foreign.disk_enabled());
    const std::string why = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(why.find("owned by uid 12345"), std::string::npos) << why;
  }
  // A symbolic link in place of the folder is not followed.
  const std::string real = dir.path + "/real";
  fs::create_directories(real);
  ASSERT_EQ(::chmod(real.c_str(), 0700), 0);
  fs::create_directory_symlink(real, dir.path + "/link");
  HostKernelCache linked(dir.path + "/link");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(linked.disk_enabled());
  (void)::testing::internal::GetCapturedStderr();
}

TEST(HostCompiler, CompileErrorQuotesTheLine) {
  REQUIRE_HOST_COMPILER();
  HostKernelCache cache("");
  HostCompileRequest r;
  r.symbol = "broken";
  r.source = "extern \"C\" int broken(void*, void**) {\n  int ok = 1;\n  return ok + not_declared_anywhere;\n}\n";
  try {
    (void)cache.get(r);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("failed to compile host kernel 'broken'"), std::string::npos) << what;
    EXPECT_NE(what.find("broken.cpp:3:"), std::string::npos) << what;  // named without the temporary folder
    EXPECT_EQ(what.find("tessel-cxx-"), std::string::npos) << what;
    EXPECT_NE(what.find(">     3 |   return ok + not_declared_anywhere;"), std::string::npos) << what;
    EXPECT_NE(e.log().find("not_declared_anywhere"), std::string::npos);
  }
  EXPECT_EQ(cache.stats().misses, 0u);
  // A symbol that is not exported, and one that is not an identifier.
  r.source = "extern \"C\" int other(void*, void**) { return 0; }\n";
  testing::expect_error<Error>([&] { (void)cache.get(r); }, {"has no symbol 'broken'", "extern \"C\""});
  r.symbol = "not an identifier";
  testing::expect_error<ValueError>([&] { (void)cache.get(r); }, {"is not a C identifier"});
}

TEST(HostCompiler, MissingCompilerIsAClearError) {
  {
    ScopedEnv cxx("TESSEL_CXX", "/nonexistent/g++");
    EXPECT_FALSE(host_compiler_available());
    EXPECT_EQ(host_compiler(), "");
    HostKernelCache cache("");
    testing::expect_error<Error>([&] { (void)cache.get(axpy_request()); },
                                 {"TESSEL_CXX=/nonexistent/g++ is not an executable file", "g++", "make deps"});
  }
  {
    ScopedEnv cxx("TESSEL_CXX", "no-such-compiler-tessel");
    testing::expect_error<Error>([&] { (void)find_host_compiler(); },
                                 {"TESSEL_CXX=no-such-compiler-tessel is not an executable file on PATH"});
  }
  {
    ScopedEnv cxx("TESSEL_CXX", "");
    ScopedEnv path("PATH", "/nonexistent-bin");
    testing::expect_error<Error>([&] { (void)find_host_compiler(); },
                                 {"TESSEL_CXX is not set and neither g++ nor c++ is on PATH", "Debian package g++"});
  }
  if (host_compiler_available()) {
    // TESSEL_CXX as a name on PATH.
    ScopedEnv cxx("TESSEL_CXX", "g++");
    EXPECT_TRUE(host_compiler_available());
  }
}

TEST(HostCompiler, ErrorCodesRaise) {
  REQUIRE_HOST_COMPILER();
  HostKernelCache cache("");
  HostCompileRequest r;
  r.symbol = "fails";
  r.source = std::string(kLaunchStruct) + R"(
#include <cstdio>
extern "C" int fails(TsHostLaunch* launch, void** params) {
  const int code = *static_cast<const int*>(params[0]);
  launch->error_code = code;
  if (code == 1) std::snprintf(launch->error, sizeof launch->error, "index 7 is out of bounds for axis 0 with size 5");
  if (code == 2) std::snprintf(launch->error, sizeof launch->error, "something else went wrong");
  if (code == 3) return 1;  // a nonzero return, no message
  return code != 0;
}
)";
  const HostKernel k = cache.get(r);
  int code = 0;
  void* params[] = {&code};
  k.launch(LaunchConfig{}, params);
  code = 1;
  testing::expect_error<IndexError>([&] { k.launch(LaunchConfig{}, params); },
                                    {"index 7 is out of bounds for axis 0 with size 5"});
  code = 2;
  try {
    k.launch(LaunchConfig{}, params);
    FAIL() << "expected Error";
  } catch (const IndexError&) {
    FAIL() << "code 2 is not an IndexError";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "something else went wrong");
  }
  code = 3;
  testing::expect_error<Error>([&] { k.launch(LaunchConfig{}, params); }, {"host kernel 'fails' failed"});
  // The record form: the caller's num_threads reaches the kernel, the report comes back.
  TsHostLaunch record{};
  record.num_threads = 3;
  code = 0;
  k.launch(record, params);
  EXPECT_EQ(record.error_code, 0);
}

// The prelude's float16/bfloat16 conversions round as tessel::float16/bfloat16 do (bit for bit).
TEST(HostCompiler, PreludeHalfConversionsMatchTheHostTypes) {
  REQUIRE_HOST_COMPILER();
  HostKernelCache cache("");
  HostCompileRequest r;
  r.symbol = "conversions";
  r.source = detail::host_prelude() + R"(
extern "C" int conversions(TsHostLaunch*, void** params) {
  const float* in = *static_cast<const float* const*>(params[0]);
  const double* in64 = *static_cast<const double* const*>(params[1]);
  unsigned short* out = *static_cast<unsigned short* const*>(params[2]);
  float* back = *static_cast<float* const*>(params[3]);
  const long long n = *static_cast<const long long*>(params[4]);
  for (long long i = 0; i < n; ++i) {
    out[4 * i] = __half(in[i]).__x;
    out[4 * i + 1] = __nv_bfloat16(in[i]).__x;
    out[4 * i + 2] = tessel::cast<__half>(in64[i]).__x;
    out[4 * i + 3] = tessel::cast<__nv_bfloat16>(in64[i]).__x;
  }
  for (int b = 0; b < 65536; ++b) {
    back[2 * b] = __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
    back[2 * b + 1] = __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(b)));
  }
  return 0;
}
)";
  const HostKernel k = cache.get(r);
  std::vector<float> in;
  std::vector<double> in64;
  // Every half and bfloat16 value, the midpoints between neighbours, and random bit patterns.
  for (int b = 0; b < 65536; ++b) {
    const float h = static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(b)));
    const float h2 = static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(b + 1)));
    in.push_back(h);
    in.push_back(static_cast<float>((static_cast<double>(h) + h2) / 2));
    in.push_back(static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(b))));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    in.push_back(f);
  }
  for (float f : in) in64.push_back(static_cast<double>(f) * (1 + 1e-9));
  std::vector<unsigned short> out(4 * in.size());
  std::vector<float> back(2 * 65536);
  const float* inp = in.data();
  const double* in64p = in64.data();
  unsigned short* outp = out.data();
  float* backp = back.data();
  long long n = static_cast<long long>(in.size());
  void* params[] = {&inp, &in64p, &outp, &backp, &n};
  k.launch(LaunchConfig{}, params);
  auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  int mismatches = 0;
  for (std::size_t i = 0; i < in.size() && mismatches < 10; ++i) {
    const std::uint16_t h = float16(in[i]).bits, b = bfloat16(in[i]).bits;
    const std::uint16_t h64 = float16(in64[i]).bits, b64 = bfloat16(in64[i]).bits;
    if (out[4 * i] != h || out[4 * i + 1] != b || out[4 * i + 2] != h64 || out[4 * i + 3] != b64) {
      ++mismatches;
      ADD_FAILURE() << "input " << in[i] << ": half " << out[4 * i] << " vs " << h << ", bfloat16 " << out[4 * i + 1]
                    << " vs " << b << ", from double " << out[4 * i + 2] << " vs " << h64 << ", " << out[4 * i + 3]
                    << " vs " << b64;
    }
  }
  for (int b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    ASSERT_TRUE(same_bits(back[2 * static_cast<std::size_t>(b)], static_cast<float>(float16::from_bits(bits)))) << b;
    ASSERT_TRUE(same_bits(back[2 * static_cast<std::size_t>(b) + 1], static_cast<float>(bfloat16::from_bits(bits)))) << b;
  }
}

// ---- ElementwiseKernel on the CPU -------------------------------------------------------------

TEST(HostElementwiseKernel, ContiguousStridedBroadcastAndScalars) {
  REQUIRE_HOST_COMPILER();
  ElementwiseKernel k("float32 x, float32 y, float64 a", "float32 z", "z = x * y + (float)a", "host_mul_add");
  // Contiguous, large enough for the OpenMP loop.
  const std::size_t n = 100003;
  std::vector<float> x(n), y(n), z(n, -1.0f);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
    y[i] = static_cast<float>(i % 13) * 0.5f + 1.0f;
  }
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(n)};
  k.launch(shape,
           {ElementwiseArg::array(x.data(), {1}), ElementwiseArg::array(y.data(), {1}), ElementwiseArg::value(0.5),
            ElementwiseArg::array(z.data(), {1})},
           Device::cpu());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], x[i] * y[i] + 0.5f) << i;

  // 3 x 5 x 7 (rank 3, nothing collapses): x reversed along every axis, y broadcast along the
  // middle axis, the output transposed.
  const std::int64_t A = 3, B = 5, C = 7;
  std::vector<float> xs(static_cast<std::size_t>(A * B * C)), ys(static_cast<std::size_t>(A * C));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.5f;
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<float>(i) - 4.0f;
  std::vector<float> zs(xs.size(), -1.0f);
  float* x_last = xs.data() + xs.size() - 1;
  k.launch({A, B, C},
           {ElementwiseArg::array(x_last, {-B * C, -C, -1}), ElementwiseArg::array(ys.data(), {C, 0, 1}),
            ElementwiseArg::value(1.0), ElementwiseArg::array(zs.data(), {1, A, A * B})},
           Device::cpu());
  for (std::int64_t a = 0; a < A; ++a) {
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t c = 0; c < C; ++c) {
        const float xv = x_last[-(a * B * C + b * C + c)];
        const float yv = ys[static_cast<std::size_t>(a * C + c)];
        ASSERT_EQ(zs[static_cast<std::size_t>(a + b * A + c * A * B)], xv * yv + 1.0f) << a << "," << b << "," << c;
      }
    }
  }
  // A 0-d input broadcast to everything (the uniform contiguous path) and a scalar x.
  float one = 3.0f;
  std::fill(z.begin(), z.begin() + 1000, 0.0f);
  k.launch({1000},
           {ElementwiseArg::value(2.0f), ElementwiseArg::array(&one, {0}), ElementwiseArg::value(-1.0),
            ElementwiseArg::array(z.data(), {1})},
           Device::cpu());
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(z[i], 5.0f) << i;
  // Zero elements: nothing runs (and nothing is read).
  k.launch({0, 4}, {ElementwiseArg::array(nullptr, {4, 1}), ElementwiseArg::array(nullptr, {4, 1}),
                    ElementwiseArg::value(1.0), ElementwiseArg::array(nullptr, {4, 1})},
           Device::cpu());
}

// a * b - c is not contracted into an FMA (which -march=native would allow where the CPU has it):
// (1 + 2^-12)^2 rounds to 1 + 2^-11 in float, so the difference is 0, where an FMA gives 2^-24.
TEST(HostElementwiseKernel, NoFmaContraction) {
  REQUIRE_HOST_COMPILER();
  ElementwiseKernel k("float32 x, float32 y, float32 w", "float32 z", "z = x * y - w", "host_no_fma");
  float x = 1.0f + std::ldexp(1.0f, -12), w = 1.0f + std::ldexp(1.0f, -11), z = -1.0f;
  k.launch({1}, {ElementwiseArg::array(&x, {1}), ElementwiseArg::array(&x, {1}), ElementwiseArg::array(&w, {1}),
                 ElementwiseArg::array(&z, {1})},
           Device::cpu());
  EXPECT_EQ(z, 0.0f);
}

TEST(HostElementwiseKernel, LongStridedRunsCrossBlocks) {
  REQUIRE_HOST_COMPILER();
  // Rows of 3 with a gap: every 4096-element block starts mid-row and carries across rows.
  ElementwiseKernel k("int64 x", "int64 z", "z = x * 2 + 1", "host_rows");
  const std::int64_t rows = 40000, cols = 3;
  std::vector<long long> x(static_cast<std::size_t>(rows * 4)), z(static_cast<std::size_t>(rows * cols), -1);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<long long>(i);
  k.launch({rows, cols}, {ElementwiseArg::array(x.data(), {4, 1}), ElementwiseArg::array(z.data(), {cols, 1})},
           Device::cpu());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(z[static_cast<std::size_t>(r * cols + c)], (r * 4 + c) * 2 + 1) << r << "," << c;
    }
  }
}

TEST(HostElementwiseKernel, HalfTypesCastsAndReadOutputs) {
  REQUIRE_HOST_COMPILER();
  // float16 arithmetic rounds each operation to float16 (as CUDA's half operators); the output
  // accumulates (z is read), and a conditional write leaves other elements alone.
  ElementwiseKernel k("float16 x, bfloat16 y, float32 f", "float16 z, int8 c, bool m",
                      "z += x * x; c = tessel::cast<signed char>(f); if (x > __float2half(0.0f)) m = true;", "host_half");
  const std::size_t n = 64;
  std::vector<float16> x(n), z(n);
  std::vector<bfloat16> y(n);
  std::vector<float> f(n);
  std::vector<std::int8_t> c(n, 0);
  std::vector<unsigned char> m(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = float16(static_cast<float>(i) * 0.37f - 10.0f);
    z[i] = float16(1.0f / 3.0f);
    y[i] = bfloat16(static_cast<float>(i));
    f[i] = i % 4 == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i) * 7.5f - 200.0f;
  }
  k.launch({static_cast<std::int64_t>(n)},
           {ElementwiseArg::array(x.data(), {1}), ElementwiseArg::array(y.data(), {1}),
            ElementwiseArg::array(f.data(), {1}), ElementwiseArg::array(z.data(), {1}),
            ElementwiseArg::array(c.data(), {1}), ElementwiseArg::array(m.data(), {1})},
           Device::cpu());
  for (std::size_t i = 0; i < n; ++i) {
    const float xv = static_cast<float>(x[i]);
    const float16 sq(xv * xv);
    const float16 want(static_cast<float>(float16(1.0f / 3.0f)) + static_cast<float>(sq));
    EXPECT_EQ(z[i].bits, want.bits) << i;
    const float fv = f[i];
    const int want_c = std::isnan(fv) ? 0 : fv <= -128 ? -128 : fv >= 127 ? 127 : static_cast<int>(fv);
    EXPECT_EQ(c[i], want_c) << i << " " << fv;
    EXPECT_EQ(m[i], xv > 0 ? 1 : 0) << i;
  }
  // The generated source is self-contained host C++.
  const std::string src = k.host_source();
  EXPECT_NE(src.find("extern \"C\" int host_half_c_host(TsHostLaunch* ts_launch, void** ts_params)"), std::string::npos)
      << src;
  EXPECT_EQ(src.find("#include \"tessel"), std::string::npos);
  EXPECT_EQ(src.find("#pragma once"), std::string::npos);
  EXPECT_NE(k.host_source(ElementwiseLayout::strided, 3).find("long long ts_c[3];"), std::string::npos);
}

TEST(HostElementwiseKernel, ComplexAndPreamble) {
  REQUIRE_HOST_COMPILER();
  ElementwiseKernel k("complex64 a, complex64 b", "complex64 z, float32 r",
                      "z = mul_conj(a, b); r = norm2(a)", "host_complex",
                      "__device__ tessel::complex64 mul_conj(tessel::complex64 p, tessel::complex64 q) {\n"
                      "  return p * tessel::complex64(q.re, -q.im);\n}\n"
                      "__device__ __forceinline__ float norm2(tessel::complex64 p) { return sqrtf(p.re * p.re + p.im * p.im); }\n");
  std::vector<std::complex<float>> a{{1, 2}, {3, -4}, {0, 0}}, b{{2, 1}, {-1, 1}, {5, 5}}, z(3);
  std::vector<float> r(3);
  k.launch({3},
           {ElementwiseArg::array(a.data(), {1}), ElementwiseArg::array(b.data(), {1}),
            ElementwiseArg::array(z.data(), {1}), ElementwiseArg::array(r.data(), {1})},
           Device::cpu());
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(z[i], a[i] * std::conj(b[i])) << i;
    EXPECT_FLOAT_EQ(r[i], std::abs(a[i])) << i;
  }
}

TEST(HostElementwiseKernel, BodyErrorIsACompileErrorWithTheLine) {
  REQUIRE_HOST_COMPILER();
  ElementwiseKernel k("float32 x", "float32 z", "z = x + not_declared_on_the_host", "host_bad_body");
  float v = 1.0f;
  try {
    k.launch({1}, {ElementwiseArg::array(&v, {1}), ElementwiseArg::array(&v, {1})}, Device::cpu());
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host_bad_body_c_host.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("z = x + not_declared_on_the_host"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tessel::jit
