#include "tessel/jit/kernel_cache.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include "core/disk_cache.hpp"
#include "jit/binary_format.hpp"
#include "jit/embedded_headers.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/version.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel::jit {
namespace {

// File layout: magic, format version, key, arch, lowered name, cubin, then a hash of everything
// before it. A truncated or corrupted file fails the check and is recompiled.
constexpr char kMagic[8] = {'T', 'S', 'L', 'C', 'U', 'B', 'I', 'N'};
constexpr std::uint32_t kFormat = 1;
constexpr double kSlowCompileMs = 1000.0;

// The disk cache's files: <directory>/<key hex>.cubin.
tessel::detail::DiskCache cubin_files(const std::string& directory) {
  return tessel::detail::DiskCache(directory, ".cubin");
}

using detail::put_string;
using detail::put_u64;
using detail::Reader;

std::string serialize(const CachedBinary& b) {
  std::string out(kMagic, sizeof kMagic);
  put_u64(out, kFormat);
  put_u64(out, b.key.hi);
  put_u64(out, b.key.lo);
  put_string(out, b.arch);
  put_string(out, b.lowered_name);
  put_string(out, b.cubin);
  detail::seal(out);
  return out;
}

// Empty pointer (and `why`) when the data is not a valid file for `key`.
std::shared_ptr<CachedBinary> deserialize(const std::string& data, const Hash128& key, std::string& why) {
  std::size_t body = 0;
  if (!detail::check_sealed(data, kMagic, body, why)) return nullptr;
  Reader r{data, sizeof kMagic};
  auto b = std::make_shared<CachedBinary>();
  if (r.u64() != kFormat) {
    why = "other format version";
    return nullptr;
  }
  b->key.hi = r.u64();
  b->key.lo = r.u64();
  b->arch = r.string();
  b->lowered_name = r.string();
  b->cubin = r.string();
  if (!r.ok || r.at != body || b->key != key || b->cubin.empty()) {
    why = "malformed contents";
    return nullptr;
  }
  return b;
}

}  // namespace

Hash128 embedded_headers_hash() {
  static const Hash128 hash = [] {
    std::size_t count = 0;
    const detail::EmbeddedHeader* headers = detail::embedded_headers(&count);
    Hasher h;
    h.u64(count);
    for (std::size_t i = 0; i < count; ++i) {
      h.field(headers[i].name);
      h.field(std::string_view(headers[i].source, headers[i].size));
    }
    return h.finish();
  }();
  return hash;
}

Hash128 cache_key(const CompileRequest& request, const std::string& arch) {
  Hasher h;
  h.field("tessel-kernel-v1");
  h.field(request.source);
  h.field(request.name);
  const std::vector<std::string> options = effective_options(request, arch);
  h.u64(options.size());
  for (const std::string& o : options) h.field(o);
  h.field(arch);
  h.field(nvrtc_version());
  h.field(tessel::version());
  const Hash128 headers = embedded_headers_hash();
  h.u64(headers.hi).u64(headers.lo);
  return h.finish();
}

KernelCache::KernelCache(std::string directory) : directory_(std::move(directory)) {}

KernelCache& KernelCache::global() {
  // Leaked on purpose: kernels may be requested from static destructors of other objects.
  static KernelCache* cache = [] {
    const std::string& base = config().cache_dir;
    return new KernelCache(base.empty() ? std::string() : base + "/kernels");
  }();
  return *cache;
}

std::string KernelCache::path_for(const Hash128& key) const { return cubin_files(directory_).path(key.hex()); }

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::shared_ptr<const CachedBinary> KernelCache::read_disk(const Hash128& key, const std::string& arch) {
  const std::optional<std::string> data = cubin_files(directory_).read(key.hex());
  if (!data) return nullptr;  // not cached yet (or no disk cache)
  std::string why;
  auto binary = deserialize(*data, key, why);
  if (binary && binary->arch != arch) {
    binary = nullptr;
    why = "arch mismatch";
  }
  if (!binary) {
    TESSEL_LOG_DEBUG("jit cache: ignoring " + path_for(key) + ": " + why + "; recompiling");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.disk_errors;
  }
  return binary;
}

void KernelCache::write_disk(const CachedBinary& binary) {
  try {
    cubin_files(directory_).write(binary.key.hex(), serialize(binary));
  } catch (const Error& error) {
    TESSEL_LOG_DEBUG(std::string("jit cache: ") + error.what() + " (continuing without the disk cache for it)");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.disk_errors;
  }
}

std::shared_ptr<const CachedBinary> KernelCache::get(const CompileRequest& request) {
  const std::int64_t start_ns = profile::session_recording() ? profile::now_ns() : 0;
  const std::string arch = resolve_arch(request);
  const Hash128 key = cache_key(request, arch);

  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> entry_lock(entry->mutex);
  if (entry->binary) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.memory_hits;
    }
    TESSEL_LOG_DEBUG("jit cache: memory hit '" + request.name + "' " + key.hex());
    profile::compile_event(request.name, "memory", start_ns, profile::now_ns());
    return entry->binary;
  }
  std::shared_ptr<const CachedBinary> from_disk;
  {
    TESSEL_RANGE("jit.disk_load", request.name.c_str());
    from_disk = read_disk(key, arch);
  }
  if (auto binary = from_disk) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.disk_hits;
    }
    TESSEL_LOG_DEBUG("jit cache: disk hit '" + request.name + "' " + key.hex());
    entry->binary = binary;
    profile::compile_event(request.name, "disk", start_ns, profile::now_ns());
    return binary;
  }
  TESSEL_LOG_DEBUG("jit cache: miss '" + request.name + "' " + key.hex() + " (" + arch + "), compiling");
  CompileRequest resolved = request;
  resolved.arch = arch;
  CompileResult compiled;
  {
    TESSEL_RANGE("jit.compile", request.name.c_str());
    compiled = compile_to_cubin(resolved);
  }
  if (compiled.milliseconds > kSlowCompileMs) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f", compiled.milliseconds / 1000.0);
    TESSEL_LOG_WARN("jit: compiling kernel '" + request.name + "' took " + seconds + " s (cached for next time)");
  }
  if (!compiled.log.empty()) TESSEL_LOG_DEBUG("jit: NVRTC log for '" + request.name + "':\n" + compiled.log);
  auto binary = std::make_shared<CachedBinary>();
  binary->key = key;
  binary->arch = compiled.arch;
  binary->lowered_name = std::move(compiled.lowered_name);
  binary->cubin = std::move(compiled.cubin);
  write_disk(*binary);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
  }
  entry->binary = binary;
  profile::compile_event(request.name, "nvrtc", start_ns, profile::now_ns());
  return binary;
}

}  // namespace tessel::jit
