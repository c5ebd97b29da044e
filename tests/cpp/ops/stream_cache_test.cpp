// The CUDA backend's per-stream state (backend/cuda/stream_cache.hpp): one entry per key, made once,
// and dropped for every cache by release_stream_caches(). Plain C++: runs without a GPU.
#if defined(TESSEL_HAVE_CUDA)
#include <gtest/gtest.h>

#include <memory>

#include "backend/cuda/stream_cache.hpp"

namespace tessel::testing {
namespace {

struct Counted {
  explicit Counted(int* alive) : alive(alive) { ++*alive; }
  ~Counted() { --*alive; }
  int* alive;
  int value = 0;
};

TEST(StreamCache, OneEntryPerKeyMadeOnceAndReleasedForEveryCache) {
  int alive = 0, made = 0;
  auto* first = new backend::cuda::StreamCache<Counted>();  // caches live for the process
  auto* second = new backend::cuda::StreamCache<Counted>();
  const auto make = [&] {
    ++made;
    return std::make_unique<Counted>(&alive);
  };
  Counted& a = first->get(7, make);
  a.value = 42;
  EXPECT_EQ(&first->get(7, make), &a);  // the same entry: made once
  EXPECT_EQ(first->get(7, make).value, 42);
  first->get(8, make);
  second->get(7, make);  // another cache: its own entry for the same key
  EXPECT_EQ(made, 3);
  EXPECT_EQ(alive, 3);
  backend::cuda::release_stream_caches();
  EXPECT_EQ(alive, 0);  // every cache's entries are gone
  EXPECT_EQ(first->get(7, make).value, 0);  // and made again on the next use
  EXPECT_EQ(made, 4);
  first->clear();
  EXPECT_EQ(alive, 0);
}

}  // namespace
}  // namespace tessel::testing
#endif
