#pragma once
// A DeviceRuntime without a GPU: malloc hands out never-reused fake addresses up to a capacity,
// and events complete only when the test says so. State lives in a shared FakeState so the test
// can inspect it while (and after) the allocator owns the runtime.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "tessel/core/error.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/device_runtime.hpp"

namespace tessel::testing {

struct FakeEvent {
  std::uint64_t stream = 0;
  bool done = true;
};

struct FakeState {
  std::size_t capacity = 0;
  std::size_t used = 0;
  std::uintptr_t next = std::uintptr_t(1) << 40;
  std::map<std::uintptr_t, std::size_t> live;  // raw allocations
  std::vector<std::pair<std::uintptr_t, std::size_t>> freed;  // raw frees, drained by tests
  std::set<FakeEvent*> events;
  std::vector<FakeEvent*> recorded;  // events recorded since the test last looked
  int malloc_calls = 0;
  int failed_mallocs = 0;
  int free_calls = 0;
  int bad_frees = 0;
  int records = 0;
  int syncs = 0;
  bool fail_record = false;

  // The stream finished its queued work: every event recorded on it completes.
  void complete_stream(std::uint64_t id) {
    for (FakeEvent* e : events) {
      if (e->stream == id) e->done = true;
    }
  }
  void complete_all() {
    for (FakeEvent* e : events) e->done = true;
  }
  int incomplete() const {
    int n = 0;
    for (FakeEvent* e : events) n += e->done ? 0 : 1;
    return n;
  }
};

class FakeRuntime final : public DeviceRuntime {
 public:
  explicit FakeRuntime(std::shared_ptr<FakeState> state) : s_(std::move(state)) {}
  ~FakeRuntime() override {
    for (FakeEvent* e : s_->events) delete e;
    s_->events.clear();
  }

  void* malloc(std::size_t bytes) override {
    s_->malloc_calls++;
    if (bytes > s_->capacity - s_->used) {
      s_->failed_mallocs++;
      return nullptr;
    }
    const std::uintptr_t addr = s_->next;
    s_->next += (bytes + 4095) / 4096 * 4096 + 4096;  // a gap: segments never touch
    s_->live[addr] = bytes;
    s_->used += bytes;
    return reinterpret_cast<void*>(addr);
  }
  void free(void* ptr) override {
    auto it = s_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == s_->live.end()) {
      s_->bad_frees++;
      return;
    }
    s_->used -= it->second;
    s_->freed.emplace_back(it->first, it->second);
    s_->live.erase(it);
    s_->free_calls++;
  }
  void mem_info(std::size_t* free_bytes, std::size_t* total_bytes) override {
    *free_bytes = s_->capacity - s_->used;
    *total_bytes = s_->capacity;
  }
  void* event_create() override {
    auto* e = new FakeEvent();
    s_->events.insert(e);
    return e;
  }
  void event_destroy(void* event) override {
    auto* e = static_cast<FakeEvent*>(event);
    s_->events.erase(e);
    delete e;
  }
  void event_record(void* event, StreamRef stream) override {
    if (s_->fail_record) throw CudaError("fake: cudaEventRecord failed", 400, false);
    auto* e = static_cast<FakeEvent*>(event);
    e->stream = stream.id;
    e->done = false;
    s_->records++;
    s_->recorded.push_back(e);
  }
  bool event_query(void* event) override { return static_cast<FakeEvent*>(event)->done; }
  void event_synchronize(void* event) override {
    static_cast<FakeEvent*>(event)->done = true;
    s_->syncs++;
  }

 private:
  std::shared_ptr<FakeState> s_;
};

struct FakeAllocator {
  std::shared_ptr<FakeState> state;
  std::unique_ptr<CachingAllocator> alloc;
};

inline FakeAllocator make_fake(std::size_t capacity, CachingAllocatorOptions options = {}) {
  FakeAllocator f;
  f.state = std::make_shared<FakeState>();
  f.state->capacity = capacity;
  if (options.name == "device") options.name = "fake:0";
  f.alloc = std::make_unique<CachingAllocator>(std::make_unique<FakeRuntime>(f.state), options);
  return f;
}

}  // namespace tessel::testing
