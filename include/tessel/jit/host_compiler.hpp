#pragma once
// Host C++ compilation for the CPU backend: a C++ source becomes a shared object built by the host
// compiler (TESSEL_CXX, else g++ or c++ on PATH), loaded into the process, and its entry
//
//   extern "C" int <symbol>(TsHostLaunch* launch, void** params);
//
// is called per launch. Libraries are cached like CUBINs: in memory per key, and on disk under
// config().cache_dir + "/host_kernels". Because the CPU path loads native code from that folder,
// the disk cache is used only when the folder is owned by the effective user and has no group or
// other permissions (it is created 0700); each entry carries a checksum that is verified before
// the bytes are loaded, from an anonymous memory file (memfd), so the file cannot be swapped
// between the check and the load. Loaded libraries are never unloaded.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessel/jit/hash.hpp"
#include "tessel/jit/kernel.hpp"
#include "tessel/jit/kernel_cache.hpp"

namespace tessel::jit {

// The launch record a host kernel receives. Must match the struct of the same name in
// python/tessel/kernel/runtime.h (and in the generated ElementwiseKernel prelude), byte for byte.
struct TsHostLaunch {
  std::uint32_t grid[3];
  std::uint32_t block[3];
  std::uint64_t shared_bytes;  // dynamic shared memory per block
  std::int32_t num_threads;    // OpenMP threads (0: tessel::num_threads(), filled in by launch)
  std::int32_t error_code;     // out: 0 ok, 1 IndexError (debug bounds check), 2 other error
  char error[1024];            // out: NUL-terminated message
};
static_assert(sizeof(TsHostLaunch) == 1064 && offsetof(TsHostLaunch, shared_bytes) == 24 &&
                  offsetof(TsHostLaunch, num_threads) == 32 && offsetof(TsHostLaunch, error_code) == 36 &&
                  offsetof(TsHostLaunch, error) == 40,
              "TsHostLaunch is shared with generated C code: its layout is fixed");

// params[i] points at the i-th parameter's bytes. Returns 0, or nonzero with launch->error_code set.
using HostEntry = int (*)(TsHostLaunch* launch, void** params);

struct HostCompileRequest {
  std::string source;
  // The extern "C" entry to load; a C identifier. It also names the source file in messages.
  std::string symbol;
  // Extra compiler flags, after tessel's (so "-O2" or "-std=c++20" override them); "-lm" and
  // other link flags work too.
  std::vector<std::string> options;
};

struct HostLibrary;  // a loaded shared object (internal)

// A loaded host kernel: cheap to copy; the library stays loaded for the process.
class HostKernel {
 public:
  HostKernel() = default;
  bool defined() const { return entry_ != nullptr; }
  HostEntry entry() const { return entry_; }
  const std::string& symbol() const;

  // Fills a TsHostLaunch from `config` (grid, block, shared_mem; num_threads 0), calls the entry
  // on the calling thread and returns when it does. A nonzero error_code raises IndexError (code
  // 1) or Error (any other) with the kernel's message; a nonzero return without a code, Error.
  void launch(const LaunchConfig& config, void** params) const;
  // The same with a launch record the caller filled (num_threads included); error_code and error
  // are reset before the call and hold the kernel's report after it.
  void launch(TsHostLaunch& launch, void** params) const;

 private:
  friend class HostKernelCache;
  std::shared_ptr<const HostLibrary> library_;
  HostEntry entry_ = nullptr;
};

// The compiler the host path runs: TESSEL_CXX (a path, or a name looked up on PATH), else g++, else
// c++ on PATH. Resolved on each call (the environment may change); the version is asked once per
// path. Error when there is none, naming TESSEL_CXX and the Debian package g++.
struct HostCompilerInfo {
  std::string path;     // as found: "/usr/bin/g++"
  std::string version;  // the first line of `<path> --version`
};
HostCompilerInfo find_host_compiler();
bool host_compiler_available();
// "<path>: <version line>", or "" when there is no host compiler.
std::string host_compiler();

// The flags a compile gets: -std=c++17 -O3 -march=native -fPIC -shared -fopenmp
// -fno-strict-aliasing, then request.options.
std::vector<std::string> host_compile_flags(const HostCompileRequest& request);
// The lines of /proc/cpuinfo that say what -march=native targets ("model name" and "flags", or
// their AArch64 equivalents): part of every key.
const std::string& host_cpu_model();
// The hash of everything that changes what a compile produces: the source, the symbol, the
// flags, the compiler's path and version line, the CPU model and tessel's version.
Hash128 host_cache_key(const HostCompileRequest& request, const HostCompilerInfo& compiler);

struct HostCompileResult {
  std::string library;  // the shared object's bytes
  std::string log;      // the compiler's output (warnings), may be empty
  double milliseconds = 0;
};
// Compiles in a private temporary folder (removed after), running the compiler without a shell.
// CompileError (the compiler's output and the offending source lines) for bad source; ValueError
// for a symbol that is not a C identifier; Error when there is no compiler.
HostCompileResult compile_host_library(const HostCompileRequest& request);

class HostKernelCache {
 public:
  // `directory` holds the entries; "" keeps the cache in memory only.
  explicit HostKernelCache(std::string directory);
  ~HostKernelCache();
  HostKernelCache(const HostKernelCache&) = delete;
  HostKernelCache& operator=(const HostKernelCache&) = delete;

  // The process-wide cache under config().cache_dir + "/host_kernels".
  static HostKernelCache& global();

  // The kernel for a request: from memory, else from disk (checksum verified), else compiled (and
  // written to disk). Concurrent requests for one key compile once.
  HostKernel get(const HostCompileRequest& request);

  // Drops the in-memory entries (the libraries stay loaded, the disk cache stays).
  void clear_memory();
  CacheStats stats() const;  // misses: compiles
  const std::string& directory() const { return directory_; }
  // Whether entries are read and written: the folder exists (or was created) with safe
  // permissions. The first call checks, and logs one warning when it is unsafe.
  bool disk_enabled();
  std::string path_for(const Hash128& key) const;  // "" when memory-only

 private:
  struct Entry {
    std::mutex mutex;  // held while the library is loaded or compiled
    std::shared_ptr<const HostLibrary> library;
  };
  int open_directory();  // the folder's descriptor, -1 when disabled; checked once
  std::shared_ptr<const HostLibrary> read_disk(const Hash128& key, const std::string& symbol);
  void write_disk(const Hash128& key, const std::string& symbol, const std::string& library);

  std::string directory_;
  mutable std::mutex mutex_;
  std::unordered_map<Hash128, std::shared_ptr<Entry>, Hash128Hasher> entries_;
  CacheStats stats_;
  std::mutex directory_mutex_;
  bool directory_checked_ = false;
  int directory_fd_ = -1;
};

// HostKernelCache::global().get(request).
HostKernel get_host_kernel(const HostCompileRequest& request);

}  // namespace tessel::jit
