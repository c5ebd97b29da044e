// tessel's CPU workers (threads.hpp, run_pieces): num_threads() - 1 threads that help the calling
// thread through the pieces of one loop. What an OpenMP region does, except that the caller never
// waits for a helper that has not started: the pieces are taken from one counter, so when another
// process holds a core and a helper wakes late, the caller (and the helpers that did start) take
// its share, and the call returns as soon as every piece is done. An OpenMP region instead ends in
// a barrier that every team thread must reach: with one core busy elsewhere, a 2-thread a + b in an
// OpenMP region took about twice as long as one thread, as the second thread waited its turn on the
// busy core before it could check in.
#include "backend/cpu/threads.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::backend::cpu {
namespace {

thread_local bool t_in_pieces = false;  // this thread runs pieces (the caller's or a worker's)

struct Job {
  std::int64_t pieces = 0;
  void (*fn)(void*, std::int64_t) = nullptr;
  void* ctx = nullptr;
  std::atomic<std::int64_t> next{0};
  int helpers_wanted = 0;
  int helpers_joined = 0;   // under Pool::mutex
  int helpers_running = 0;  // under Pool::mutex
  std::exception_ptr failure;  // the first exception of a piece, under Pool::mutex
};

// Runs the job's pieces until none is left; records the first exception.
void take_pieces(Job& job, std::mutex& mutex) {
  for (std::int64_t p = job.next.fetch_add(1, std::memory_order_relaxed); p < job.pieces;
       p = job.next.fetch_add(1, std::memory_order_relaxed)) {
    try {
      job.fn(job.ctx, p);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!job.failure) job.failure = std::current_exception();
      job.next.store(job.pieces, std::memory_order_relaxed);  // the rest is skipped
    }
  }
}

class Pool {
 public:
  // The calling thread with up to threads - 1 workers; false when another call holds the pool (the
  // caller then runs the pieces alone).
  bool run(Job& job, int threads) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (current_ != nullptr) return false;
      grow(threads - 1);
      job.helpers_wanted = threads - 1;
      current_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    take_pieces(job, mutex_);
    std::unique_lock<std::mutex> lock(mutex_);
    current_ = nullptr;  // closed: a worker waking from now on finds nothing to join
    done_.wait(lock, [&] { return job.helpers_running == 0; });
    return true;
  }

 private:
  void grow(int workers) {  // mutex_ held
    while (static_cast<int>(workers_.size()) < workers) {
      workers_.emplace_back([this] { work(); });
      workers_.back().detach();  // blocked in wait() at process exit, which ends them
    }
  }

  void work() {
    t_in_pieces = true;
    std::uint64_t seen = generation_.load(std::memory_order_acquire);
    while (true) {
      // A short spin first: a loop of ops back to back finds the worker awake.
      for (int spin = 0; spin < 4000 && generation_.load(std::memory_order_acquire) == seen; ++spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        seen = generation_.load(std::memory_order_relaxed);
        if (current_ == nullptr || current_->helpers_joined >= current_->helpers_wanted) continue;
        job = current_;
        ++job->helpers_joined;
        ++job->helpers_running;
      }
      take_pieces(*job, mutex_);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--job->helpers_running == 0) done_.notify_all();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<std::uint64_t> generation_{0};
  Job* current_ = nullptr;
  std::vector<std::thread> workers_;
};

Pool& pool() {
  static auto* p = new Pool();  // leaked: its detached workers outlive static destruction
  return *p;
}

}  // namespace

bool in_parallel_pieces() { return t_in_pieces; }

void run_pieces(std::int64_t pieces, int threads, void (*fn)(void*, std::int64_t), void* ctx) {
  if (pieces <= 0) return;
  const bool outer = !t_in_pieces;
  t_in_pieces = true;
  Job job;
  job.pieces = pieces;
  job.fn = fn;
  job.ctx = ctx;
  if (threads <= 1 || pieces == 1 || !outer || !pool().run(job, threads)) {
    std::mutex alone;
    take_pieces(job, alone);
  }
  t_in_pieces = !outer;
  if (job.failure) std::rethrow_exception(job.failure);
}

}  // namespace tessel::backend::cpu
