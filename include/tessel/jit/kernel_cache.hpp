#pragma once
// Compiled-kernel caches: in memory, in front of a disk cache of CUBIN files
// (<cache_dir>/kernels/<key>.cubin). The key hashes the source, the kernel name, the effective
// options, the arch, the NVRTC version, the tessel version and the embedded device headers, so a
// change in any of them compiles afresh. Thread-safe: concurrent requests for one key compile once.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tessel/jit/compiler.hpp"
#include "tessel/jit/hash.hpp"

namespace tessel::jit {

// One compiled kernel binary, shared by all users of its key.
struct CachedBinary {
  Hash128 key;
  std::string arch;
  std::string lowered_name;
  std::string cubin;
};

struct CacheStats {
  std::uint64_t memory_hits = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t misses = 0;  // compiles
  std::uint64_t disk_errors = 0;  // unreadable/corrupt files (recompiled) and failed writes
};

// The hash of everything that changes what the compile produces; `arch` is resolved.
Hash128 cache_key(const CompileRequest& request, const std::string& arch);
// The hash of the embedded device headers (part of every key).
Hash128 embedded_headers_hash();

class KernelCache {
 public:
  // `directory` holds the cubin files; "" keeps the cache in memory only.
  explicit KernelCache(std::string directory);
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process-wide cache under config().cache_dir + "/kernels".
  static KernelCache& global();

  // The binary for a request: from memory, else from disk, else compiled (and written to disk).
  // Raises CompileError for bad source.
  std::shared_ptr<const CachedBinary> get(const CompileRequest& request);

  // Drops the in-memory entries (the disk cache stays); for tests and benchmarks.
  void clear_memory();
  CacheStats stats() const;
  const std::string& directory() const { return directory_; }
  std::string path_for(const Hash128& key) const;  // "" when memory-only

 private:
  struct Entry {
    std::mutex mutex;  // held while the binary is loaded or compiled
    std::shared_ptr<const CachedBinary> binary;
  };
  std::shared_ptr<const CachedBinary> read_disk(const Hash128& key, const std::string& arch);
  void write_disk(const CachedBinary& binary);

  std::string directory_;
  mutable std::mutex mutex_;
  std::unordered_map<Hash128, std::shared_ptr<Entry>, Hash128Hasher> entries_;
  CacheStats stats_;
};

}  // namespace tessel::jit
