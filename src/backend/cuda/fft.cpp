// CUDA FFT through cuFFT. Plans live in a per-device bounded LRU cache keyed by a plain struct
// (length, batch, strides, dists, kind, dtype), limited by plan count and workspace bytes.
// Plans are made with cufftSetAutoAllocation(0) and get their workspace from the caching
// allocator (a Buffer), and the cache registers a free-memory callback with the allocator, so
// an allocation that fails evicts every cached plan and retries.
//
// A plan and its workspace may be used from several streams: its executions are serialized by
// a per-plan mutex, and when the stream changes, the new stream first waits for an event
// recorded on the previous one, so two streams never share the workspace at the same time.
// The hit path (key build, hash, one lock, list splice, shared_ptr copy) allocates nothing.
#include <cufft.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/cuda_libraries.hpp"
#include "backend/fft.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/caching_allocator.hpp"

namespace tessel::backend::cuda {
namespace {

const char* cufft_status_name(cufftResult status) {
  switch (status) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "unknown cuFFT status";
  }
}

// Raises OutOfMemory for CUFFT_ALLOC_FAILED, CudaError otherwise, naming the op, the call and
// file:line (as TESSEL_CUDA_CHECK does for the runtime).
void check_cufft(cufftResult status, const char* op, const char* expr, const char* file, int line) {
  if (status == CUFFT_SUCCESS) return;
  const std::string where = fmt::format("{}: {} failed with {} ({}) at {}:{}", op, expr, cufft_status_name(status),
                                        static_cast<int>(status), file, line);
  if (status == CUFFT_ALLOC_FAILED) throw OutOfMemory(where);
  throw CudaError(where, static_cast<int>(status), false);
}
#define TESSEL_CUFFT_CHECK(expr, op) check_cufft((expr), (op), #expr, __FILE__, __LINE__)

struct PlanKey {
  std::int64_t n, batch, in_stride, in_dist, out_stride, out_dist;
  FFTKind kind;
  DType dtype;
  friend bool operator==(const PlanKey& a, const PlanKey& b) {
    return a.n == b.n && a.batch == b.batch && a.in_stride == b.in_stride && a.in_dist == b.in_dist &&
           a.out_stride == b.out_stride && a.out_dist == b.out_dist && a.kind == b.kind && a.dtype == b.dtype;
  }
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    auto mix = [&h](std::uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(static_cast<std::uint64_t>(k.n));
    mix(static_cast<std::uint64_t>(k.batch));
    mix(static_cast<std::uint64_t>(k.in_stride));
    mix(static_cast<std::uint64_t>(k.in_dist));
    mix(static_cast<std::uint64_t>(k.out_stride));
    mix(static_cast<std::uint64_t>(k.out_dist));
    mix((static_cast<std::uint64_t>(k.kind) << 8) | static_cast<std::uint64_t>(k.dtype));
    return static_cast<std::size_t>(h);
  }
};

// The direction of a c2c transform is an argument of cufftExec, not part of the plan.
PlanKey key_of(const FFTProblem& p) {
  return {p.n, p.batch, p.in_stride, p.in_dist, p.out_stride, p.out_dist, p.kind, p.dtype};
}

cufftType cufft_type(const FFTProblem& p) {
  const bool single = p.dtype == DType::complex64;
  switch (p.kind) {
    case FFTKind::r2c: return single ? CUFFT_R2C : CUFFT_D2Z;
    case FFTKind::c2r: return single ? CUFFT_C2R : CUFFT_Z2D;
    case FFTKind::c2c:
    default: return single ? CUFFT_C2C : CUFFT_Z2Z;
  }
}

struct CachedPlan {
  cufftHandle handle = 0;
  bool created = false;
  cufftType type = CUFFT_C2C;
  Device device;
  std::shared_ptr<Buffer> workspace;  // from the caching allocator; null when cuFFT needs none
  std::size_t workspace_bytes = 0;
  Stream bound_stream;                 // the stream cufftSetStream was last given
  cudaEvent_t switch_event = nullptr;  // orders the workspace's use across a stream change
  std::mutex mutex;                    // one execution at a time (shared workspace and stream state)

  CachedPlan() = default;
  CachedPlan(const CachedPlan&) = delete;
  CachedPlan& operator=(const CachedPlan&) = delete;
  ~CachedPlan() {
    // Destructors do not throw: a failure here can only leak, so it is logged. An eviction may
    // come from any thread and device: cuFFT destroys the plan in its own device's context.
    DeviceGuard guard(device, std::nothrow);
    if (switch_event && cudaEventDestroy(switch_event) != cudaSuccess) {
      TESSEL_LOG_WARN("fft: cudaEventDestroy of a plan's stream-switch event failed");
    }
    if (created) {
      const cufftResult status = cufftDestroy(handle);
      if (status != CUFFT_SUCCESS) TESSEL_LOG_WARN(fmt::format("fft: cufftDestroy failed with {}", cufft_status_name(status)));
    }
  }
};

std::shared_ptr<CachedPlan> create_plan(const FFTProblem& p, const Stream& stream) {
  const char* op = "fft (cuda): plan";
  require_cuda_library(CudaLibrary::cufft, op);
  auto plan = std::make_shared<CachedPlan>();
  plan->device = stream.device();
  plan->type = cufft_type(p);
  TESSEL_CUFFT_CHECK(cufftCreate(&plan->handle), op);
  plan->created = true;
  TESSEL_CUFFT_CHECK(cufftSetAutoAllocation(plan->handle, 0), op);
  long long n[1] = {p.n};
  const long long in_length = p.kind == FFTKind::c2r ? p.n / 2 + 1 : p.n;
  const long long out_length = p.kind == FFTKind::r2c ? p.n / 2 + 1 : p.n;
  // Rank 1: the embed sizes are not used in the address formula, but must be non-null for the
  // strides and dists to be honored.
  long long in_embed[1] = {in_length};
  long long out_embed[1] = {out_length};
  std::size_t workspace_bytes = 0;
  TESSEL_CUFFT_CHECK(cufftMakePlanMany64(plan->handle, 1, n, in_embed, p.in_stride, p.in_dist, out_embed, p.out_stride,
                                         p.out_dist, plan->type, p.batch, &workspace_bytes),
                     op);
  if (workspace_bytes > 0) {
    plan->workspace = Buffer::allocate(stream.device(), static_cast<std::int64_t>(workspace_bytes), stream);
    plan->workspace_bytes = workspace_bytes;
    TESSEL_CUFFT_CHECK(cufftSetWorkArea(plan->handle, plan->workspace->data()), op);
  }
  TESSEL_CUFFT_CHECK(cufftSetStream(plan->handle, detail::cuda_stream(stream)), op);
  plan->bound_stream = stream;
  return plan;
}

// Points the plan at `stream`; work already queued with the plan on the old stream finishes
// before the new stream touches the workspace. Caller holds plan.mutex.
void bind_stream(CachedPlan& plan, const Stream& stream) {
  if (plan.bound_stream.id() == stream.id()) return;
  const char* op = "fft (cuda)";
  if (!plan.switch_event) TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&plan.switch_event, cudaEventDisableTiming), op);
  TESSEL_CUDA_CHECK(cudaEventRecord(plan.switch_event, detail::cuda_stream(plan.bound_stream)), op);
  TESSEL_CUDA_CHECK(cudaStreamWaitEvent(detail::cuda_stream(stream), plan.switch_event, 0), op);
  if (plan.workspace) plan.workspace->record_stream(stream);
  TESSEL_CUFFT_CHECK(cufftSetStream(plan.handle, detail::cuda_stream(stream)), op);
  plan.bound_stream = stream;
}

void exec(CachedPlan& plan, const FFTProblem& p) {
  const char* op = "fft (cuda)";
  void* in = const_cast<void*>(p.in);  // cuFFT's signatures are not const; c2r may overwrite it
  switch (plan.type) {
    case CUFFT_C2C:
      TESSEL_CUFFT_CHECK(cufftExecC2C(plan.handle, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(p.out),
                                      p.inverse ? CUFFT_INVERSE : CUFFT_FORWARD),
                         op);
      break;
    case CUFFT_Z2Z:
      TESSEL_CUFFT_CHECK(cufftExecZ2Z(plan.handle, static_cast<cufftDoubleComplex*>(in),
                                      static_cast<cufftDoubleComplex*>(p.out), p.inverse ? CUFFT_INVERSE : CUFFT_FORWARD),
                         op);
      break;
    case CUFFT_R2C:
      TESSEL_CUFFT_CHECK(cufftExecR2C(plan.handle, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(p.out)), op);
      break;
    case CUFFT_D2Z:
      TESSEL_CUFFT_CHECK(cufftExecD2Z(plan.handle, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(p.out)), op);
      break;
    case CUFFT_C2R:
      TESSEL_CUFFT_CHECK(cufftExecC2R(plan.handle, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(p.out)), op);
      break;
    case CUFFT_Z2D:
      TESSEL_CUFFT_CHECK(cufftExecZ2D(plan.handle, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(p.out)), op);
      break;
    default:
      throw Error("fft (cuda): internal error: unexpected cuFFT plan type");
  }
  TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(plan.bound_stream), op);
}

class PlanCache {
 public:
  explicit PlanCache(int device) {
    // Leaked with the cache (process lifetime), so the callback's `this` stays valid.
    device_allocator(device).add_free_memory_callback([this] { return release_all() > 0; });
  }

  std::shared_ptr<CachedPlan> find(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
    return it->second->second;
  }

  std::shared_ptr<CachedPlan> insert(const PlanKey& key, std::shared_ptr<CachedPlan> plan) {
    std::vector<std::shared_ptr<CachedPlan>> evicted;  // destroyed after the lock is released
    std::shared_ptr<CachedPlan> result;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {  // another thread planned the same layout meanwhile
        result = it->second->second;
        evicted.push_back(std::move(plan));
      } else {
        lru_.emplace_front(key, plan);
        index_.emplace(key, lru_.begin());
        workspace_bytes_ += plan->workspace_bytes;
        result = std::move(plan);
        evict_to_limits(evicted);
      }
    }
    return result;
  }

  std::size_t release_all() {
    std::vector<std::shared_ptr<CachedPlan>> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& entry : lru_) evicted.push_back(std::move(entry.second));
      evictions_ += lru_.size();
      lru_.clear();
      index_.clear();
      workspace_bytes_ = 0;
    }
    return evicted.size();
  }

  void set_limits(std::size_t max_plans, std::size_t max_workspace_bytes) {
    std::vector<std::shared_ptr<CachedPlan>> evicted;
    std::lock_guard<std::mutex> lock(mutex_);
    max_plans_ = max_plans;
    max_workspace_bytes_ = max_workspace_bytes;
    evict_to_limits(evicted);
  }

  FFTPlanCacheInfo info() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {lru_.size(), max_plans_, workspace_bytes_, max_workspace_bytes_, hits_, misses_, evictions_};
  }

 private:
  // Evicts least recently used plans until both limits hold; the newest plan stays even when it
  // alone exceeds the workspace limit (it is about to be used). Caller holds mutex_.
  void evict_to_limits(std::vector<std::shared_ptr<CachedPlan>>& evicted) {
    while (!lru_.empty() && (lru_.size() > max_plans_ || (workspace_bytes_ > max_workspace_bytes_ && lru_.size() > 1))) {
      auto& victim = lru_.back();
      workspace_bytes_ -= victim.second->workspace_bytes;
      index_.erase(victim.first);
      evicted.push_back(std::move(victim.second));
      lru_.pop_back();
      ++evictions_;
    }
  }

  std::mutex mutex_;
  std::list<std::pair<PlanKey, std::shared_ptr<CachedPlan>>> lru_;
  std::unordered_map<PlanKey, std::list<std::pair<PlanKey, std::shared_ptr<CachedPlan>>>::iterator, PlanKeyHash> index_;
  std::size_t max_plans_ = 64;
  std::size_t max_workspace_bytes_ = std::size_t(1) << 30;
  std::size_t workspace_bytes_ = 0;
  std::uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

constexpr int kMaxDevices = 64;

PlanCache& plan_cache(int device) {
  static std::array<std::atomic<PlanCache*>, kMaxDevices> caches{};  // leaked on purpose, as the allocators
  static std::mutex create_mutex;
  if (device < 0 || device >= kMaxDevices) throw DeviceError(fmt::format("fft (cuda): invalid device index {}", device));
  PlanCache* cache = caches[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
  if (cache) return *cache;
  std::lock_guard<std::mutex> lock(create_mutex);
  cache = caches[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
  if (!cache) {
    cache = new PlanCache(device);
    caches[static_cast<std::size_t>(device)].store(cache, std::memory_order_release);
  }
  return *cache;
}

}  // namespace

std::shared_ptr<void> fft_plan(const FFTProblem& problem, const Stream& stream) {
  PlanCache& cache = plan_cache(stream.device().index);
  const PlanKey key = key_of(problem);
  if (std::shared_ptr<CachedPlan> hit = cache.find(key)) return hit;
  DeviceGuard guard(stream.device());
  return cache.insert(key, create_plan(problem, stream));
}

namespace {
// A length-1 transform is the identity (real part, or imaginary part zero, for c2r / r2c):
// strided 2-D copies, so no cuFFT plan is needed for a size cuFFT may not accept.
void length_one(const FFTProblem& p, const Stream& stream) {
  const char* op = "fft (cuda)";
  auto s = detail::cuda_stream(stream);
  const std::size_t complex_size = static_cast<std::size_t>(itemsize(p.dtype));
  const std::size_t real_size = complex_size / 2;
  const std::size_t in_size = p.kind == FFTKind::r2c ? real_size : complex_size;
  const std::size_t out_size = p.kind == FFTKind::c2r ? real_size : complex_size;
  const std::size_t width = p.kind == FFTKind::c2c ? complex_size : real_size;  // the real part comes first
  if (p.kind == FFTKind::r2c) {
    TESSEL_CUDA_CHECK(cudaMemsetAsync(p.out, 0, static_cast<std::size_t>((p.batch - 1) * p.out_dist + 1) * out_size, s), op);
  }
  TESSEL_CUDA_CHECK(cudaMemcpy2DAsync(p.out, static_cast<std::size_t>(p.out_dist) * out_size, p.in,
                                      static_cast<std::size_t>(p.in_dist) * in_size, width,
                                      static_cast<std::size_t>(p.batch), cudaMemcpyDeviceToDevice, s),
                    op);
}

// NumPy's irfft ignores the imaginary parts of the DC and (even n) Nyquist terms, which a real
// signal cannot have; cuFFT does not promise to. They are zeroed in the input, which for c2r is
// always tessel's own copy (cuFFT may overwrite it anyway): one strided memset per term.
void discard_unrepresentable_imaginary_parts(const FFTProblem& p, const Stream& stream) {
  const char* op = "irfft (cuda)";
  auto s = detail::cuda_stream(stream);
  const std::size_t complex_size = static_cast<std::size_t>(itemsize(p.dtype));
  const std::size_t real_size = complex_size / 2;
  auto zero_imag = [&](std::int64_t k) {
    char* first = static_cast<char*>(const_cast<void*>(p.in)) + static_cast<std::size_t>(k * p.in_stride) * complex_size + real_size;
    TESSEL_CUDA_CHECK(cudaMemset2DAsync(first, static_cast<std::size_t>(p.in_dist) * complex_size, 0, real_size,
                                        static_cast<std::size_t>(p.batch), s),
                      op);
  };
  zero_imag(0);
  if (p.n % 2 == 0) zero_imag(p.n / 2);
}
}  // namespace

void fft(const FFTProblem& problem, const std::shared_ptr<void>& plan_arg, const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (problem.n == 1) {
    length_one(problem, stream);
    return;
  }
  const std::shared_ptr<void> holder = plan_arg ? plan_arg : fft_plan(problem, stream);
  auto& plan = *static_cast<CachedPlan*>(holder.get());
  if (plan.device != stream.device()) {
    throw DeviceError(fmt::format("fft (cuda): the plan was made on {} but the stream is on {}", plan.device.str(),
                                  stream.device().str()));
  }
  std::lock_guard<std::mutex> lock(plan.mutex);
  bind_stream(plan, stream);
  if (problem.kind == FFTKind::c2r) discard_unrepresentable_imaginary_parts(problem, stream);
  exec(plan, problem);
}

void fft_exec_raw(const std::shared_ptr<void>& plan_arg, const FFTProblem& problem, const Stream& stream) {
  DeviceGuard guard(stream.device());
  auto& plan = *static_cast<CachedPlan*>(plan_arg.get());
  std::lock_guard<std::mutex> lock(plan.mutex);
  bind_stream(plan, stream);
  exec(plan, problem);
}

FFTPlanCacheInfo fft_plan_cache_info(int device) { return plan_cache(device).info(); }

void set_fft_plan_cache_limits(int device, std::size_t max_plans, std::size_t max_workspace_bytes) {
  plan_cache(device).set_limits(max_plans, max_workspace_bytes);
}

void clear_fft_plan_cache(int device) { plan_cache(device).release_all(); }

}  // namespace tessel::backend::cuda
