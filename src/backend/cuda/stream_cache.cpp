// The registry behind release_stream_caches (see stream_cache.hpp).
#include "backend/cuda/stream_cache.hpp"

#include <vector>

namespace tessel::backend::cuda {
namespace {

// A function's static, not a namespace-scope one: the caches register from other translation
// units' static initializers, which may run before this one's.
struct Registry {
  std::mutex mutex;
  std::vector<StreamCacheBase*> caches;
};
Registry& registry() {
  static auto* r = new Registry();  // process lifetime, as the caches
  return *r;
}

}  // namespace

StreamCacheBase::StreamCacheBase() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.caches.push_back(this);
}

void release_stream_caches() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (StreamCacheBase* cache : r.caches) cache->clear();
}

}  // namespace tessel::backend::cuda
