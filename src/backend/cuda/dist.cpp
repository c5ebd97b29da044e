// The NCCL side of the dist layer: collectives on CUDA arrays. libnccl is opened at run time
// (dlopen), so tessel links and loads without it; nccl.h is used for its types only.
//
// Failure handling: a Work records an event after its call; waiting polls the event and
// ncclCommGetAsyncError, and aborts the communicator (ncclCommAbort) when NCCL reports an error
// or when TESSEL_DIST_TIMEOUT_S passes, so a dead or hung peer is an Error, not a hang.
#include "backend/dist.hpp"

#include <atomic>
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "core/cuda_check.hpp"
#include "core/shared_library.hpp"

namespace tessel::backend::cuda {

namespace {

struct Nccl {
  void* handle = nullptr;
  std::string error;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommCount) comm_count = nullptr;
  decltype(&ncclCommUserRank) comm_user_rank = nullptr;
  decltype(&ncclCommSplit) comm_split = nullptr;  // NCCL >= 2.18; nullptr before (split then raises)
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

// TESSEL_NCCL_LIBRARY first, then the soname the toolkit and the nvidia-nccl wheel install.
const Nccl& nccl() {
  static const Nccl loaded = [] {
    Nccl n;
    const ::tessel::detail::SharedLibrary opened = ::tessel::detail::open_shared_library("TESSEL_NCCL_LIBRARY", {"libnccl.so.2", "libnccl.so"});
    n.handle = opened.handle;
    if (n.handle == nullptr) {
      n.error = "cannot load NCCL: tried " + opened.tried + "; install NCCL (libnccl2, or pip nvidia-nccl-cu13) or set "
                "TESSEL_NCCL_LIBRARY to libnccl.so's path";
      return n;
    }
    bool ok = true;
    auto load = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::tessel::detail::library_symbol(n.handle, symbol));
      if (fn == nullptr) {
        ok = false;
        n.error += fmt::format("{}NCCL lacks {}", n.error.empty() ? "" : "; ", symbol);
      }
    };
    load(n.get_error_string, "ncclGetErrorString");
    load(n.get_unique_id, "ncclGetUniqueId");
    load(n.comm_init_rank, "ncclCommInitRank");
    load(n.comm_init_all, "ncclCommInitAll");
    load(n.comm_destroy, "ncclCommDestroy");
    load(n.comm_abort, "ncclCommAbort");
    load(n.comm_get_async_error, "ncclCommGetAsyncError");
    load(n.comm_count, "ncclCommCount");
    load(n.comm_user_rank, "ncclCommUserRank");
    load(n.all_reduce, "ncclAllReduce");
    load(n.broadcast, "ncclBroadcast");
    load(n.reduce, "ncclReduce");
    load(n.all_gather, "ncclAllGather");
    load(n.reduce_scatter, "ncclReduceScatter");
    load(n.send, "ncclSend");
    load(n.recv, "ncclRecv");
    load(n.group_start, "ncclGroupStart");
    load(n.group_end, "ncclGroupEnd");
    if (!ok) {
      dlclose(n.handle);
      n.handle = nullptr;
      return n;
    }
    n.comm_split = reinterpret_cast<decltype(&ncclCommSplit)>(::tessel::detail::library_symbol(n.handle, "ncclCommSplit"));
    return n;
  }();
  return loaded;
}

const Nccl& nccl_checked(const char* op) {
  const Nccl& n = nccl();
  if (n.handle == nullptr) throw Error(fmt::format("tessel.distributed.{}: {}", op, n.error));
  return n;
}

void check_nccl(ncclResult_t result, const std::string& what) {
  if (result != ncclSuccess && result != ncclInProgress) {
    throw Error(fmt::format("{}: NCCL failed: {}", what, nccl().get_error_string(result)));
  }
}

// The NCCL type and element count of a contiguous array for a reduction (DTypeError where NCCL
// has none), or for data movement (bytes, any dtype).
struct NcclBuffer {
  ncclDataType_t type;
  std::size_t count;
};

NcclBuffer moved(const Array& a) { return {ncclUint8, static_cast<std::size_t>(a.nbytes())}; }

NcclBuffer reduced(const Array& a, dist::ReduceOp op, const char* name) {
  const auto n = static_cast<std::size_t>(a.size());
  switch (a.dtype()) {
    case DType::bool_: return {ncclUint8, n};  // with the op mapped to max / min
    case DType::int8: return {ncclInt8, n};
    case DType::uint8: return {ncclUint8, n};
    case DType::int32: return {ncclInt32, n};
    case DType::uint32: return {ncclUint32, n};
    case DType::int64: return {ncclInt64, n};
    case DType::uint64: return {ncclUint64, n};
    case DType::float16: return {ncclFloat16, n};
    case DType::bfloat16: return {ncclBfloat16, n};
    case DType::float32: return {ncclFloat32, n};
    case DType::float64: return {ncclFloat64, n};
    case DType::complex64:
    case DType::complex128:
      // Sums and averages of complex numbers are those of their real and imaginary parts.
      if (op == dist::ReduceOp::sum || op == dist::ReduceOp::avg) {
        return {a.dtype() == DType::complex64 ? ncclFloat32 : ncclFloat64, 2 * n};
      }
      break;
    default:
      break;
  }
  throw DTypeError(fmt::format("tessel.distributed.{}: NCCL cannot reduce {} with {}", name, dtype_name(a.dtype()),
                               dist::reduce_op_name(op)));
}

ncclRedOp_t nccl_op(dist::ReduceOp op, DType dtype) {
  if (dtype == DType::bool_) return (op == dist::ReduceOp::sum || op == dist::ReduceOp::max) ? ncclMax : ncclMin;
  switch (op) {
    case dist::ReduceOp::sum: return ncclSum;
    case dist::ReduceOp::prod: return ncclProd;
    case dist::ReduceOp::min: return ncclMin;
    case dist::ReduceOp::max: return ncclMax;
    case dist::ReduceOp::avg: return ncclAvg;
  }
  return ncclSum;
}

// Events of calls made inside a group: recorded after ncclGroupEnd, which is when the work is
// queued on the streams.
struct PendingEvent {
  std::shared_ptr<bool> recorded;
  cudaEvent_t event;
  cudaStream_t stream;
  Device device;
};
thread_local int g_group_depth = 0;
thread_local std::vector<PendingEvent> g_group_events;
// Groups touch NCCL only once an NCCL communicator exists: a CPU-only program must not load the
// system's libnccl.so.2, which then shadows the newer one PyTorch loads (import torch failed with
// "undefined symbol: ncclCommResume" after a grouped CPU gather).
std::atomic<bool> g_nccl_in_use{false};
thread_local bool g_group_started_nccl = false;

// How the ranks of a communicator reach each other outside NCCL's collectives.
enum class Peers : std::uint8_t {
  mpi,             // one process per rank, with an MPI communicator of the same ranks (bootstrap_)
  launched,        // one process per rank and no MPI (torchrun): only NCCL itself
  single_process,  // every rank in this process (ncclCommInitAll)
};

class NcclComm final : public CommBackend {
 public:
  NcclComm(ncclComm_t comm, int rank, int size, Device device, Peers peers, std::unique_ptr<CommBackend> bootstrap)
      : comm_(comm), rank_(rank), size_(size), device_(device), peers_(peers), bootstrap_(std::move(bootstrap)) {}
  ~NcclComm() override {
    if (comm_ != nullptr && !aborted_) {
      DeviceGuard guard(device_);
      nccl().comm_destroy(comm_);
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }
  bool completes_on_host() const override { return false; }
  bool native_avg() const override { return true; }

  void issue(const Collective& call, dist::Work::State& work) override {
    const Nccl& n = nccl_checked(collective_name(call.kind));
    if (aborted_) {
      throw Error(fmt::format("tessel.distributed.{}: the communicator of rank {} was aborted after an earlier "
                              "failure", collective_name(call.kind), rank_));
    }
    DeviceGuard guard(device_);
    const double timeout = dist::detail::timeout_seconds();  // a malformed setting raises before anything is queued
    const std::string what = fmt::format("tessel.distributed.{} on rank {} of {}", collective_name(call.kind), rank_, size_);
    cudaStream_t stream = detail::cuda_stream(call.stream);
    const void* in = call.in.defined() ? call.in.data() : nullptr;
    void* out = call.out.defined() ? call.out.data() : nullptr;
    switch (call.kind) {
      case CollectiveKind::all_reduce: {
        const NcclBuffer b = reduced(call.out, call.op, "all_reduce");
        check_nccl(n.all_reduce(out, out, b.count, b.type, nccl_op(call.op, call.out.dtype()), comm_, stream), what);
        break;
      }
      case CollectiveKind::broadcast: {
        const NcclBuffer b = moved(call.out);
        check_nccl(n.broadcast(out, out, b.count, b.type, call.peer, comm_, stream), what);
        break;
      }
      case CollectiveKind::reduce: {
        const NcclBuffer b = reduced(call.in, call.op, "reduce");
        check_nccl(n.reduce(in, out, b.count, b.type, nccl_op(call.op, call.in.dtype()), call.peer, comm_, stream), what);
        break;
      }
      case CollectiveKind::all_gather: {
        const NcclBuffer b = moved(call.in);
        check_nccl(n.all_gather(in, out, b.count, b.type, comm_, stream), what);
        break;
      }
      case CollectiveKind::reduce_scatter: {
        const NcclBuffer b = reduced(call.out, call.op, "reduce_scatter");
        check_nccl(n.reduce_scatter(in, out, b.count, b.type, nccl_op(call.op, call.out.dtype()), comm_, stream), what);
        break;
      }
      case CollectiveKind::all_to_all: {
        // One send and one receive per peer, grouped: NCCL's documented all-to-all.
        const std::size_t chunk = static_cast<std::size_t>(call.in.nbytes()) / static_cast<std::size_t>(size_);
        check_nccl(n.group_start(), what);
        for (int peer = 0; peer < size_; ++peer) {
          check_nccl(n.send(static_cast<const char*>(in) + chunk * static_cast<std::size_t>(peer), chunk, ncclUint8, peer,
                            comm_, stream), what);
          check_nccl(n.recv(static_cast<char*>(out) + chunk * static_cast<std::size_t>(peer), chunk, ncclUint8, peer,
                            comm_, stream), what);
        }
        check_nccl(n.group_end(), what);
        break;
      }
      case CollectiveKind::send: {
        const NcclBuffer b = moved(call.in);
        check_nccl(n.send(in, b.count, b.type, call.peer, comm_, stream), what);
        break;
      }
      case CollectiveKind::recv: {
        const NcclBuffer b = moved(call.out);
        check_nccl(n.recv(out, b.count, b.type, call.peer, comm_, stream), what);
        break;
      }
      case CollectiveKind::barrier: {
        // NCCL has no barrier: an all-reduce of one word, which every rank must reach.
        if (!barrier_word_.defined()) barrier_word_ = zeros({1}, DType::int32, device_, call.stream);
        work.keep_alive.push_back(barrier_word_);
        check_nccl(n.all_reduce(barrier_word_.data(), barrier_word_.data(), 1, ncclInt32, ncclSum, comm_, stream), what);
        break;
      }
    }
    cudaEvent_t event = nullptr;
    TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what.c_str());
    auto recorded = std::make_shared<bool>(false);
    if (g_group_depth > 0) {
      g_group_events.push_back({recorded, event, stream, device_});
    } else {
      TESSEL_CUDA_CHECK(cudaEventRecord(event, stream), what.c_str());
      *recorded = true;
    }
    auto holder = std::shared_ptr<CUevent_st>(event, [device = device_](cudaEvent_t e) {
      DeviceGuard restore(device);
      cudaEventDestroy(e);
    });
    // The Work refers to this communicator: wait on it before the communicator goes.
    work.progress = [this, holder, recorded, what, timeout](bool block) {
      if (!*recorded) {
        if (block) throw Error(what + ": wait() inside the group that issued the call; it is issued when the group ends");
        return false;
      }
      return poll(holder.get(), what, block, timeout);
    };
  }

  std::unique_ptr<CommBackend> split(int color, int key) override {
    switch (peers_) {
      case Peers::single_process:
        throw Error("tessel.distributed.split: a single-process communicator (ncclCommInitAll) cannot be split");
      case Peers::mpi: {
        std::unique_ptr<CommBackend> child = bootstrap_->split(color, key);
        if (!child) return nullptr;
        return nccl_from_bootstrap(std::move(child), device_);
      }
      case Peers::launched:
        break;
    }
    // No MPI to exchange a new unique id: NCCL splits its own communicator (same ordering rule:
    // by key, then by rank here).
    const Nccl& n = nccl_checked("split");
    if (n.comm_split == nullptr) {
      throw Error("tessel.distributed.split: the loaded NCCL lacks ncclCommSplit (NCCL 2.18 or newer), which "
                  "splitting a communicator started by torchrun needs; install a newer NCCL or launch with mpirun");
    }
    DeviceGuard guard(device_);
    const std::string what = fmt::format("tessel.distributed.split (ncclCommSplit, rank {} of {}, color {}, key {})",
                                         rank_, size_, color, key);
    ncclComm_t child = nullptr;
    check_nccl(n.comm_split(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr), what);
    if (child == nullptr) return nullptr;
    int rank = 0;
    int size = 0;
    check_nccl(n.comm_user_rank(child, &rank), what);
    check_nccl(n.comm_count(child, &size), what);
    return std::make_unique<NcclComm>(child, rank, size, device_, Peers::launched, nullptr);
  }

  std::vector<std::vector<std::int64_t>> all_gather_words(const std::vector<std::int64_t>& words) override {
    switch (peers_) {
      case Peers::single_process: return {words};  // one caller drives every rank: nothing to compare
      case Peers::mpi: return bootstrap_->all_gather_words(words);
      case Peers::launched: return all_gather_words_over_nccl(words);
    }
    return {words};
  }
  void broadcast_bytes(void* data, std::size_t bytes, int root) override {
    // Only a bootstrap communicator is asked for this (nccl_from_bootstrap), and NCCL ones are not.
    if (peers_ != Peers::mpi) throw Error("tessel.distributed: this NCCL communicator has no host bootstrap");
    bootstrap_->broadcast_bytes(data, bytes, root);
  }
  void group_start() override { nccl_group_start(); }
  void group_end() override { nccl_group_end(); }

 private:
  // True when the event has passed; raises (after aborting the communicator) on an asynchronous
  // NCCL error or when the timeout passes.
  bool poll(cudaEvent_t event, const std::string& what, bool block, double timeout) {
    DeviceGuard guard(device_);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t status = cudaEventQuery(event);
      if (status == cudaSuccess) return true;
      if (status != cudaErrorNotReady) TESSEL_CUDA_CHECK(status, what.c_str());
      ncclResult_t async = ncclSuccess;
      nccl().comm_get_async_error(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        abort();
        throw Error(fmt::format("{}: NCCL reported {}; the communicator is aborted (a peer rank has failed)", what,
                                nccl().get_error_string(async)));
      }
      if (!block) return false;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout) {
        abort();
        throw Error(fmt::format("{}: not completed after {:.3g} s (TESSEL_DIST_TIMEOUT_S); the communicator is "
                                "aborted (a peer rank has exited, hangs, or did not make the same call)",
                                what, waited));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void abort() {
    if (!aborted_) {
      nccl().comm_abort(comm_);
      aborted_ = true;
    }
  }

  // The debug check's exchange when there is no MPI: an NCCL all-gather of the words on this
  // device, waited for like any call (so a dead peer raises within the timeout).
  std::vector<std::vector<std::int64_t>> all_gather_words_over_nccl(const std::vector<std::int64_t>& words) {
    const std::string what = fmt::format("tessel.distributed (TESSEL_DIST_DEBUG check) on rank {} of {}", rank_, size_);
    if (g_group_depth > 0) {
      // The grouped gather would be issued only when the group ends, after the call it checks.
      throw Error(what + ": the cross-rank check cannot run inside a group on a communicator started by torchrun "
                  "(it has no MPI); make the call outside the group, unset TESSEL_DIST_DEBUG, or launch with mpirun");
    }
    const Nccl& n = nccl_checked("all_gather");
    const double timeout = dist::detail::timeout_seconds();
    DeviceGuard guard(device_);
    const Stream stream = current_stream(device_);
    const auto count = static_cast<std::int64_t>(words.size());
    const Array mine = from_vector(words, {count}, device_, stream);
    const Array all = empty({size_ * count}, DType::int64, device_, stream);
    check_nccl(n.all_gather(mine.data(), all.data(), words.size(), ncclInt64, comm_, detail::cuda_stream(stream)), what);
    cudaEvent_t event = nullptr;
    TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what.c_str());
    auto holder = std::shared_ptr<CUevent_st>(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
    TESSEL_CUDA_CHECK(cudaEventRecord(event, detail::cuda_stream(stream)), what.c_str());
    poll(event, what, true, timeout);
    all.storage()->record_pending_write(stream);
    const std::vector<std::int64_t> flat = all.to_vector<std::int64_t>();
    std::vector<std::vector<std::int64_t>> result;
    for (int r = 0; r < size_; ++r) {
      result.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(count) * r,
                          flat.begin() + static_cast<std::ptrdiff_t>(count) * (r + 1));
    }
    return result;
  }

  ncclComm_t comm_;
  int rank_;
  int size_;
  Device device_;
  Peers peers_;
  std::unique_ptr<CommBackend> bootstrap_;  // Peers::mpi only
  Array barrier_word_;
  bool aborted_ = false;
};

}  // namespace

bool nccl_available(std::string* why) {
  const Nccl& n = nccl();
  if (why != nullptr) *why = n.error;
  return n.handle != nullptr;
}

namespace {

// The one path that makes a communicator of one rank per process, from rank 0's unique id (which
// the caller has passed to every rank: over MPI, or through torch.distributed's store).
std::unique_ptr<CommBackend> nccl_init_rank(const ncclUniqueId& id, int rank, int size, Device device, Peers peers,
                                            std::unique_ptr<CommBackend> bootstrap) {
  const Nccl& n = nccl_checked("init");
  g_nccl_in_use = true;
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  check_nccl(n.comm_init_rank(&comm, size, id, rank),
             fmt::format("tessel.distributed.init (ncclCommInitRank, rank {} of {} on {})", rank, size, device.str()));
  return std::make_unique<NcclComm>(comm, rank, size, device, peers, std::move(bootstrap));
}

}  // namespace

std::string nccl_unique_id() {
  const Nccl& n = nccl_checked("init");
  ncclUniqueId id{};
  check_nccl(n.get_unique_id(&id), "tessel.distributed.init (ncclGetUniqueId)");
  return std::string(id.internal, sizeof(id.internal));
}

std::unique_ptr<CommBackend> nccl_from_bootstrap(std::unique_ptr<CommBackend> bootstrap, Device device) {
  nccl_checked("init");  // before any rank waits in the broadcast for an id rank 0 cannot make
  ncclUniqueId id{};
  if (bootstrap->rank() == 0) {
    const std::string bytes = nccl_unique_id();
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  bootstrap->broadcast_bytes(&id, sizeof(id), 0);
  const int rank = bootstrap->rank();
  const int size = bootstrap->size();
  return nccl_init_rank(id, rank, size, device, Peers::mpi, std::move(bootstrap));
}

std::unique_ptr<CommBackend> nccl_from_unique_id(const std::string& unique_id, int rank, int size, Device device) {
  ncclUniqueId id{};
  if (unique_id.size() != sizeof(id.internal)) {
    throw ValueError(fmt::format("tessel.distributed.init: the NCCL unique id has {} bytes, expected {} (the bytes "
                                 "of new_nccl_unique_id() on rank 0)", unique_id.size(), sizeof(id.internal)));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  return nccl_init_rank(id, rank, size, device, Peers::launched, nullptr);
}

std::vector<std::unique_ptr<CommBackend>> nccl_single_process(const std::vector<Device>& devices) {
  if (devices.empty()) throw ValueError("tessel.distributed.init_devices: no devices given");
  std::vector<int> indices;
  for (Device d : devices) {
    if (!d.is_cuda()) throw DeviceError(fmt::format("tessel.distributed.init_devices: {} is not a CUDA device", d.str()));
    check_device_index(d.index, "tessel.distributed.init_devices");
    indices.push_back(d.index);
  }
  const Nccl& n = nccl_checked("init_devices");
  g_nccl_in_use = true;
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  check_nccl(n.comm_init_all(comms.data(), static_cast<int>(comms.size()), indices.data()),
             "tessel.distributed.init_devices (ncclCommInitAll)");
  std::vector<std::unique_ptr<CommBackend>> result;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    result.push_back(std::make_unique<NcclComm>(comms[i], static_cast<int>(i), static_cast<int>(comms.size()),
                                                devices[i], Peers::single_process, nullptr));
  }
  return result;
}

void nccl_group_start() {
  if (g_group_depth++ > 0) return;
  g_group_started_nccl = g_nccl_in_use.load() && nccl().handle != nullptr;
  if (g_group_started_nccl) check_nccl(nccl().group_start(), "tessel.distributed.group");
}

void nccl_group_end() {
  if (--g_group_depth > 0) return;
  const bool started = g_group_started_nccl;
  g_group_started_nccl = false;
  if (started) check_nccl(nccl().group_end(), "tessel.distributed.group");
  std::vector<PendingEvent> events = std::move(g_group_events);
  g_group_events.clear();
  for (const PendingEvent& e : events) {
    DeviceGuard guard(e.device);
    TESSEL_CUDA_CHECK(cudaEventRecord(e.event, e.stream), "tessel.distributed.group");
    *e.recorded = true;
  }
}

}  // namespace tessel::backend::cuda
