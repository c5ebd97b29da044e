// Compilation and caches: NVRTC runs without a GPU, so these run on CPU-only CI machines too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "jit_test_util.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/compiler.hpp"
#include "tessel/jit/kernel_cache.hpp"

namespace tessel::jit {
namespace {

using test::kTestArch;
using test::TempDir;

const char* kAxpy = R"(
#include "tessel_device.cuh"
extern "C" __global__ void axpy(float a, const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}
)";

CompileRequest axpy_request() {
  CompileRequest r;
  r.source = kAxpy;
  r.name = "axpy";
  r.arch = kTestArch;
  return r;
}

// The ELF magic: NVRTC gave a cubin, not PTX text.
bool is_elf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(JitCompile, CompilesToCubinWithoutAGpu) {
  TESSEL_REQUIRE_NVRTC();
  const CompileResult r = compile_to_cubin(axpy_request());
  EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_EQ(r.lowered_name, "axpy");
  EXPECT_EQ(r.arch, "sm_90");
  EXPECT_FALSE(nvrtc_version().empty());
}

TEST(JitCompile, ArchSpecificAndNameExpressions) {
  TESSEL_REQUIRE_NVRTC();
  CompileRequest r;
  r.source = "template <class T> __global__ void scale(T* x, T a) { x[threadIdx.x] *= a; }\n";
  r.name = "scale<float>";
  r.options = {"-arch=sm_90a"};
  const CompileResult out = compile_to_cubin(r);
  EXPECT_TRUE(is_elf(out.cubin));
  EXPECT_EQ(out.arch, "sm_90a");
  EXPECT_NE(out.lowered_name, "scale<float>");  // mangled
  EXPECT_NE(out.lowered_name.find("scale"), std::string::npos);
}

TEST(JitCompile, HalfAndBfloat16HeadersAreEmbedded) {
  TESSEL_REQUIRE_NVRTC();
  CompileRequest r;
  r.source = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "tessel_device.cuh"
extern "C" __global__ void h(__half* a, __nv_bfloat16* b, tessel::complex64* c) {
  a[0] = __hadd(a[0], a[1]);
  b[0] = tessel::cast<__nv_bfloat16>(tessel::widen(b[1]) * 2.0f);
  c[0] = c[0] * c[1] / c[2];
}
)";
  r.name = "h";
  r.arch = kTestArch;
  EXPECT_TRUE(is_elf(compile_to_cubin(r).cubin));
}

TEST(JitCompile, PtxArchIsRejected) {
  CompileRequest r = axpy_request();
  r.arch = "compute_90";
  EXPECT_THROW(resolve_arch(r), ValueError);
}

TEST(JitCompile, ErrorNamesKernelLogAndOffendingLine) {
  TESSEL_REQUIRE_NVRTC();
  CompileRequest r;
  r.name = "broken_kernel";
  r.arch = kTestArch;
  r.source =
      "// line 1\n"
      "extern \"C\" __global__ void broken_kernel(float* x) {\n"
      "  float y = 1.0f;\n"
      "  x[0] = y + undefined_name;\n"
      "}\n";
  try {
    compile_to_cubin(r);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("broken_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undefined_name"), std::string::npos) << msg;  // from the log
    EXPECT_NE(msg.find(">     4 |   x[0] = y + undefined_name;"), std::string::npos) << msg;
    EXPECT_NE(msg.find("      3 |   float y = 1.0f;"), std::string::npos) << msg;  // context
    EXPECT_NE(e.log().find("undefined_name"), std::string::npos);
  }
}

TEST(JitCompile, FormatCompileErrorMergesNearbyLines) {
  const std::string src = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
  const std::string log = "k.cu(2): error: x\nk.cu(3): error: y\nk.cu(9): error: z\nheader.cuh(1): error: w";
  const std::string msg = format_compile_error("k", "sm_90", log, src, 1);
  EXPECT_NE(msg.find(">     2 | b"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">     3 | c"), std::string::npos) << msg;
  EXPECT_NE(msg.find("      4 | d"), std::string::npos) << msg;
  EXPECT_NE(msg.find("  ...\n"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">     9 | i"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("      6 | f"), std::string::npos) << msg;
}

TEST(JitCacheKey, EveryInputChangesTheKey) {
  TESSEL_REQUIRE_NVRTC();
  const CompileRequest base = axpy_request();
  const Hash128 k0 = cache_key(base, "sm_90");
  EXPECT_EQ(k0, cache_key(base, "sm_90"));
  CompileRequest r = base;
  r.source += " ";
  EXPECT_NE(cache_key(r, "sm_90"), k0);
  r = base;
  r.options = {"-DX=1"};
  EXPECT_NE(cache_key(r, "sm_90"), k0);
  r = base;
  r.name = "axpy2";
  EXPECT_NE(cache_key(r, "sm_90"), k0);
  EXPECT_NE(cache_key(base, "sm_80"), k0);
  EXPECT_NE(cache_key(base, "sm_90a"), k0);
}

TEST(JitCacheKey, HeadersAreHashed) {
  // The key folds in embedded_headers_hash(); a header edit changes that hash (it covers names and
  // contents), so it changes every key.
  const Hash128 h = embedded_headers_hash();
  EXPECT_NE(h, Hash128{});
  Hasher other;
  other.field("tessel_device.cuh").field("changed");
  EXPECT_NE(other.finish(), h);
}

TEST(JitCache, MemoryThenDiskThenCompile) {
  TESSEL_REQUIRE_NVRTC();
  TempDir dir;
  KernelCache cache(dir.path);
  const CompileRequest req = axpy_request();
  const auto first = cache.get(req);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_TRUE(std::filesystem::exists(cache.path_for(first->key)));
  const auto second = cache.get(req);
  EXPECT_EQ(second.get(), first.get());
  EXPECT_EQ(cache.stats().memory_hits, 1u);

  cache.clear_memory();
  const auto third = cache.get(req);
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(third->cubin, first->cubin);
  EXPECT_EQ(third->lowered_name, "axpy");

  // A second cache (another process) over the same directory loads from disk.
  KernelCache other(dir.path);
  EXPECT_EQ(other.get(req)->cubin, first->cubin);
  EXPECT_EQ(other.stats().disk_hits, 1u);
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".cubin");
  }
  EXPECT_EQ(files, 1);
}

TEST(JitCache, CorruptOrTruncatedFilesAreRecompiled) {
  TESSEL_REQUIRE_NVRTC();
  TempDir dir;
  const CompileRequest req = axpy_request();
  std::string good;
  std::string path;
  {
    KernelCache cache(dir.path);
    const auto b = cache.get(req);
    path = cache.path_for(b->key);
    good = b->cubin;
  }
  const auto file_size = std::filesystem::file_size(path);
  for (int mode = 0; mode < 3; ++mode) {
    if (mode == 0) {
      std::filesystem::resize_file(path, file_size / 2);  // truncated
    } else if (mode == 1) {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(file_size / 2));
      f.put('\x5a');  // one flipped byte in the middle
    } else {
      std::ofstream(path, std::ios::trunc) << "garbage";
    }
    KernelCache cache(dir.path);
    const auto b = cache.get(req);
    EXPECT_EQ(b->cubin, good) << "mode " << mode;
    EXPECT_EQ(cache.stats().misses, 1u) << "mode " << mode;
    EXPECT_EQ(cache.stats().disk_errors, 1u) << "mode " << mode;
    // Overwritten with a good file.
    KernelCache again(dir.path);
    again.get(req);
    EXPECT_EQ(again.stats().disk_hits, 1u) << "mode " << mode;
  }
}

TEST(JitCache, UnwritableDirectoryStillCompiles) {
  TESSEL_REQUIRE_NVRTC();
  KernelCache cache("/proc/tessel-not-writable/kernels");
  EXPECT_TRUE(is_elf(cache.get(axpy_request())->cubin));
  EXPECT_GE(cache.stats().disk_errors, 1u);
}

TEST(JitCache, MemoryOnlyCache) {
  TESSEL_REQUIRE_NVRTC();
  KernelCache cache("");
  cache.get(axpy_request());
  cache.get(axpy_request());
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().memory_hits, 1u);
}

TEST(JitCache, CompileErrorIsNotCached) {
  TESSEL_REQUIRE_NVRTC();
  KernelCache cache("");
  CompileRequest r = axpy_request();
  r.source = "extern \"C\" __global__ void axpy() { nope; }";
  EXPECT_THROW(cache.get(r), CompileError);
  EXPECT_THROW(cache.get(r), CompileError);
}

TEST(JitCache, ConcurrentRequestsCompileOnce) {
  TESSEL_REQUIRE_NVRTC();
  TempDir dir;
  KernelCache cache(dir.path);
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const CachedBinary>> got(6);
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = cache.get(axpy_request()); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.stats().misses, 1u);
  for (const auto& g : got) EXPECT_EQ(g.get(), got[0].get());
}

}  // namespace
}  // namespace tessel::jit
