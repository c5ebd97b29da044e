#pragma once
// State the CUDA backend keeps per stream for the process: scratch buffers, status words, library
// handles. One StreamCache per kind of state, each entry made on first use; the entries hold device
// or page-locked memory (and handles), so release_stream_caches() drops every cache's entries at
// once (the ops test program's teardown calls it before compute-sanitizer's leak check).
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tessel::backend::cuda {

class StreamCacheBase {
 public:
  StreamCacheBase();  // registers the cache for release_stream_caches (caches live for the process)
  StreamCacheBase(const StreamCacheBase&) = delete;
  StreamCacheBase& operator=(const StreamCacheBase&) = delete;
  virtual void clear() = 0;

 protected:
  ~StreamCacheBase() = default;
};

// State per key (a stream's id, or what else identifies a stream to the caller). The reference
// get() returns stays valid until release_stream_caches(); a State that must be used by one
// caller at a time holds its own mutex.
template <class State>
class StreamCache final : public StreamCacheBase {
 public:
  // The key's State; make() (returning std::unique_ptr<State>) builds it on first use, under the
  // cache's lock.
  template <class Make>
  State& get(std::uint64_t key, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& entry = states_[key];
    if (!entry) entry = make();
    return *entry;
  }
  void clear() override {
    std::lock_guard<std::mutex> lock(mutex_);
    states_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<State>> states_;
};

// Drops the entries of every StreamCache (their buffers go back to the allocators, their handles
// are destroyed). Only when no other thread uses the CUDA backend.
void release_stream_caches();

}  // namespace tessel::backend::cuda
