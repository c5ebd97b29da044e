// The backend-neutral part of tessel::dist: the process runtime (init from the launcher), the
// checks every call makes once (init, devices, dtypes, shapes, the debug-mode cross-rank check),
// contiguous layout of the arrays, groups, and completion.
#include "tessel/dist/dist.hpp"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <mutex>

#include <fmt/format.h>

#include "backend/dist.hpp"
#include "core/not_built.hpp"
#include "ops/op_stream.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::dist {

struct Communicator::Impl {
  std::unique_ptr<backend::CommBackend> backend;
  // False for init_devices' communicators, which need no init(); the others are unusable after finalize().
  bool of_runtime = true;
};

namespace {

struct Runtime {
  std::mutex mutex;
  bool initialized = false;
  bool finalized = false;
  backend::cpu::ProcessInfo info;
  Device device;
  Communicator world;
};

Runtime& runtime() {
  static Runtime* r = new Runtime;  // never destroyed: finalize() runs at exit, after statics may be gone
  return *r;
}

[[noreturn]] void throw_not_initialized(const std::string& op) {
  throw Error(fmt::format("tessel.distributed.{}: called before tessel.distributed.init()", op));
}

const Runtime& initialized_runtime(const char* op) {
  Runtime& r = runtime();
  if (!r.initialized) throw_not_initialized(op);
  return r;
}

// Calls made while a Group is open on this thread.
struct GroupState {
  int depth = 0;
  std::vector<std::shared_ptr<Work::State>> pending;  // async_op=false calls on host-completing backends
  std::vector<std::function<void()>> post;            // stream-ordered steps after the grouped calls
};
thread_local GroupState g_group;

// Error when init() or init_from_launch() has run in this process (the caller holds r.mutex or
// checks again under it).
void check_not_started(const Runtime& r) {
  if (r.initialized) {
    throw Error(fmt::format("tessel.distributed.init: already initialized (rank {} of {}); call it once per process",
                            r.info.rank, r.info.size));
  }
  if (r.finalized) {
    throw Error("tessel.distributed.init: called after finalize(); the runtime cannot be started twice in one process");
  }
}

// Makes `comm` the world of this process (r.mutex held).
void start_runtime(Runtime& r, const backend::cpu::ProcessInfo& info, Device device,
                   std::unique_ptr<backend::CommBackend> comm) {
  auto impl = std::make_shared<Communicator::Impl>();
  impl->backend = std::move(comm);
  r.info = info;
  r.device = device;
  r.world = Communicator(std::move(impl));
  r.initialized = true;
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit([] { finalize(); }); });
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string words_shape(const std::vector<std::int64_t>& words, std::size_t first) {
  Shape shape(words.begin() + static_cast<std::ptrdiff_t>(first), words.end());
  shape.resize(static_cast<std::size_t>(words[first - 1]));
  return shape_str(shape);
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    if (name == reduce_op_name(op)) return op;
  }
  throw ValueError(fmt::format("tessel.distributed: unknown reduce op '{}'; valid ops are sum, prod, min, max, avg", name));
}

bool built_with_mpi() { return backend::cpu::have_mpi(); }

// ---- detail: environment and checks ----

namespace detail {

LaunchInfo detect_launcher(const Getenv& getenv) {
  auto has = [&](const char* name) {
    const char* value = getenv(name);
    return value != nullptr && value[0] != '\0';
  };
  auto missing_of = [&](std::initializer_list<const char*> names) {
    std::string missing;
    for (const char* name : names) {
      if (!has(name)) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    return missing;
  };
  if (has("OMPI_COMM_WORLD_SIZE") || has("PMIX_RANK") || has("PMI_RANK")) {
    if (has("OMPI_COMM_WORLD_SIZE")) {
      const std::string missing = missing_of({"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"});
      if (!missing.empty()) {
        throw Error(fmt::format("tessel.distributed.init: an Open MPI launch (OMPI_COMM_WORLD_SIZE is set) lacks {}; "
                                "start the program with mpirun", missing));
      }
    }
    return {Launcher::mpi, "mpirun"};
  }
  if (has("SLURM_PROCID")) {
    const std::string missing = missing_of({"SLURM_NTASKS", "SLURM_LOCALID"});
    if (!missing.empty()) {
      throw Error(fmt::format("tessel.distributed.init: a Slurm launch (SLURM_PROCID is set) lacks {}; start the "
                              "program with srun", missing));
    }
    return {Launcher::mpi, "srun"};
  }
  if (has("RANK") || has("WORLD_SIZE") || has("LOCAL_RANK")) {
    const std::string missing = missing_of({"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"});
    if (!missing.empty()) {
      throw Error(fmt::format("tessel.distributed.init: a torchrun-style launch (RANK, WORLD_SIZE or LOCAL_RANK is "
                              "set) lacks {}; torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT",
                              missing));
    }
    return {Launcher::torchrun, "torchrun"};
  }
  return {Launcher::none, "none"};
}

void check_ranks_fit_devices(int local_rank, int local_size, int device_count, const std::string& host) {
  if (local_size > device_count) {
    throw DeviceError(fmt::format(
        "tessel.distributed.init: {} ranks on node '{}' but it has {} GPU{} (local rank {} has none); start at most "
        "one rank per GPU, or set TESSEL_FORCE_CPU=1 to run on the CPU backend",
        local_size, host, device_count, device_count == 1 ? "" : "s", local_rank));
  }
}

void check_array_device(const char* op, const Array& x, Device comm_device, const char* what) {
  if (x.device() != comm_device) {
    throw DeviceError(fmt::format("tessel.distributed.{}: the {} is on {}, the communicator's device is {}", op, what,
                                  x.device().str(), comm_device.str()));
  }
}

Device default_rank_device(int local_rank) {
  return cuda_available() ? Device::cuda(local_rank) : Device::cpu();
}

Device check_launch(int rank, int size, int local_rank, int local_size, std::optional<Device> device) {
  check_not_started(runtime());
  if (size < 1 || rank < 0 || rank >= size) {
    throw ValueError(fmt::format("tessel.distributed.init: rank {} of world size {}; expected 0 <= rank < size "
                                 "(RANK and WORLD_SIZE under torchrun)", rank, size));
  }
  if (local_size < 1 || local_size > size || local_rank < 0 || local_rank >= local_size) {
    throw ValueError(fmt::format("tessel.distributed.init: local rank {} of local size {} in a world of {}; expected "
                                 "0 <= local rank < local size <= world size (LOCAL_RANK and LOCAL_WORLD_SIZE under "
                                 "torchrun)", local_rank, local_size, size));
  }
  const Device chosen = device ? *device : default_rank_device(local_rank);
  if (chosen.is_cpu()) {
    throw Error(fmt::format(
        "tessel.distributed.init: rank {} of {} would run on the CPU{}, whose collectives run over MPI, and this "
        "process was not started by an MPI launcher (torchrun starts none); launch with mpirun or srun (mpirun -np {} "
        "python script.py), or use CUDA devices (NCCL)",
        rank, size, device ? "" : " (no CUDA device is available)", size));
  }
#if TESSEL_HAVE_CUDA
  check_ranks_fit_devices(local_rank, local_size, device_count(), host_name());
  check_device_index(chosen.index, "tessel.distributed.init");
  return chosen;
#else
  ::tessel::detail::throw_cuda_not_built(fmt::format("tessel.distributed.init: {} needs CUDA", chosen.str()));
#endif
}

double timeout_seconds() {
  const char* text = std::getenv("TESSEL_DIST_TIMEOUT_S");
  if (text == nullptr || text[0] == '\0') return 600.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0)) {
    throw ValueError(fmt::format("TESSEL_DIST_TIMEOUT_S: expected a positive number of seconds, got '{}'", text));
  }
  return value;
}

bool debug_checks() {
  const char* text = std::getenv("TESSEL_DIST_DEBUG");
  return text != nullptr && text[0] != '\0' && std::string(text) != "0";
}

}  // namespace detail

// ---- the process runtime ----

void init(std::optional<Device> device) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  check_not_started(r);
  const detail::LaunchInfo launch = detail::detect_launcher([](const char* name) { return std::getenv(name); });
  if (launch.launcher == detail::Launcher::torchrun) {
    throw Error(
        "tessel.distributed.init: launched by torchrun (RANK, WORLD_SIZE, LOCAL_RANK are set); that path bootstraps "
        "through torch.distributed's store, which the C++ library cannot reach: launch with mpirun or srun instead");
  }
  backend::cpu::ProcessInfo info = backend::cpu::mpi_start();  // raises when built without MPI
  const Device chosen = device ? *device : detail::default_rank_device(info.local_rank);
  if (chosen.is_cuda()) {
    detail::check_ranks_fit_devices(info.local_rank, info.local_size, device_count(), info.host);
  }
  std::unique_ptr<backend::CommBackend> comm = backend::cpu::mpi_world(chosen);
#if TESSEL_HAVE_CUDA
  if (chosen.is_cuda()) comm = backend::cuda::nccl_from_bootstrap(std::move(comm), chosen);
#else
  if (chosen.is_cuda()) ::tessel::detail::throw_cuda_not_built("tessel.distributed.init");
#endif
  start_runtime(r, info, chosen, std::move(comm));
}

void init_from_launch(int rank, int size, int local_rank, int local_size, Device device,
                      const std::string& nccl_unique_id) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  // Checked again here (the caller may have checked before its exchange): r.mutex is held now.
  detail::check_launch(rank, size, local_rank, local_size, device);
#if TESSEL_HAVE_CUDA
  std::unique_ptr<backend::CommBackend> comm = backend::cuda::nccl_from_unique_id(nccl_unique_id, rank, size, device);
#else
  (void)nccl_unique_id;
  std::unique_ptr<backend::CommBackend> comm;  // check_launch raised: a CUDA device needs a CUDA build
#endif
  backend::cpu::ProcessInfo info;
  info.rank = rank;
  info.size = size;
  info.local_rank = local_rank;
  info.local_size = local_size;
  info.host = host_name();
  start_runtime(r, info, device, std::move(comm));
}

std::string new_nccl_unique_id() {
#if TESSEL_HAVE_CUDA
  return backend::cuda::nccl_unique_id();
#else
  ::tessel::detail::throw_cuda_not_built("tessel.distributed.new_nccl_unique_id (NCCL needs CUDA)");
#endif
}

bool is_initialized() { return runtime().initialized; }

void finalize() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.initialized) return;
  r.world = Communicator();
  r.initialized = false;
  r.finalized = true;
  backend::cpu::mpi_stop();
}

int rank() { return initialized_runtime("rank").info.rank; }
int world_size() { return initialized_runtime("world_size").info.size; }
int local_rank() { return initialized_runtime("local_rank").info.local_rank; }
int local_size() { return initialized_runtime("local_size").info.local_size; }
Device local_device() { return initialized_runtime("local_device").device; }
const Communicator& world() { return initialized_runtime("world").world; }

// ---- Work ----

bool Work::State::complete(bool block) {
  if (done) {
    if (error) std::rethrow_exception(error);
    return true;
  }
  if (!progress(block)) return false;  // a timeout raises here and leaves the call in flight
  done = true;
  try {
    for (auto& step : then) step();
  } catch (...) {
    error = std::current_exception();
    throw;
  }
  then.clear();
  keep_alive.clear();
  return true;
}

Work::State::~State() {
  if (done || !progress) return;
  // The arrays, and what `progress` holds (requests, a recv's descriptor buffer), stay alive.
  struct Orphan {
    std::vector<Array> arrays;
    std::function<bool(bool)> progress;
  };
  static std::mutex mutex;
  static auto* orphans = new std::vector<Orphan>;  // never freed, on purpose
  std::lock_guard<std::mutex> lock(mutex);
  orphans->push_back({std::move(keep_alive), std::move(progress)});
}

void Work::wait() {
  if (state_) state_->complete(true);
}

bool Work::is_completed() { return !state_ || state_->complete(false); }

// ---- Group ----

Group::Group() {
  if (g_group.depth++ == 0) {
#if TESSEL_HAVE_CUDA
    backend::cuda::nccl_group_start();
#endif
  }
}

void Group::end() {
  if (!open_) return;
  open_ = false;
  if (--g_group.depth > 0) return;
  std::exception_ptr first;
#if TESSEL_HAVE_CUDA
  try {
    backend::cuda::nccl_group_end();
  } catch (...) {
    first = std::current_exception();
  }
#endif
  std::vector<std::function<void()>> post = std::move(g_group.post);
  std::vector<std::shared_ptr<Work::State>> pending = std::move(g_group.pending);
  g_group.post.clear();
  g_group.pending.clear();
  if (!first) {
    for (auto& step : post) step();
  }
  for (auto& state : pending) {
    try {
      state->complete(true);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

Group::~Group() noexcept(false) {
  if (std::uncaught_exceptions() > 0) {
    try {
      end();
    } catch (...) {  // already unwinding: the first error is the one that propagates
    }
    return;
  }
  end();
}

// ---- Communicator ----

namespace {

using backend::CollectiveKind;

const backend::CommBackend& backend_of(const Communicator& comm, const char* op) {
  if (!comm.defined()) {
    if (!is_initialized()) throw_not_initialized(op);
    throw Error(fmt::format("tessel.distributed.{}: the communicator is undefined (this rank passed a negative "
                            "color to split, or it was default-constructed)", op));
  }
  if (comm.impl()->of_runtime && !is_initialized()) {
    throw Error(fmt::format("tessel.distributed.{}: the communicator was used after tessel.distributed.finalize()", op));
  }
  return *comm.impl()->backend;
}

bool is_reduction(CollectiveKind kind) {
  return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce || kind == CollectiveKind::reduce_scatter;
}

void check_reduce_dtype(const char* op, ReduceOp rop, DType dtype) {
  const DTypeKind kind = dtype_info(dtype).kind;
  if (rop == ReduceOp::avg && kind != DTypeKind::floating && kind != DTypeKind::complex) {
    throw DTypeError(fmt::format("tessel.distributed.{}: op avg needs a floating or complex dtype, got {}", op,
                                 dtype_name(dtype)));
  }
  if ((rop == ReduceOp::min || rop == ReduceOp::max) && kind == DTypeKind::complex) {
    throw DTypeError(fmt::format("tessel.distributed.{}: op {} is not defined for {}", op, reduce_op_name(rop),
                                 dtype_name(dtype)));
  }
}

// TESSEL_DIST_DEBUG: every rank's (call, op, dtype, root, shape) against rank 0's.
void debug_check(backend::CommBackend& comm, const char* op, CollectiveKind kind, ReduceOp rop, const Array& x, int root) {
  constexpr std::size_t kMaxDims = 16;
  std::vector<std::int64_t> words(5 + kMaxDims, 0);
  words[0] = static_cast<std::int64_t>(kind);
  words[1] = is_reduction(kind) ? static_cast<std::int64_t>(rop) : -1;
  words[2] = x.defined() ? static_cast<std::int64_t>(x.dtype()) : -1;
  words[3] = root;
  words[4] = x.defined() ? std::min<std::int64_t>(x.ndim(), kMaxDims) : 0;
  for (std::int64_t i = 0; i < words[4]; ++i) words[static_cast<std::size_t>(5 + i)] = x.shape()[static_cast<std::size_t>(i)];
  const auto all = comm.all_gather_words(words);
  const auto& first = all[0];
  for (std::size_t r = 1; r < all.size(); ++r) {
    const auto& w = all[r];
    const std::string where = fmt::format("tessel.distributed.{} (TESSEL_DIST_DEBUG)", op);
    if (w[0] != first[0]) {
      throw Error(fmt::format("{}: rank {} called {}, rank 0 called {}", where, r,
                              backend::collective_name(static_cast<CollectiveKind>(w[0])),
                              backend::collective_name(static_cast<CollectiveKind>(first[0]))));
    }
    if (w[1] != first[1]) {
      throw ValueError(fmt::format("{}: rank {} reduces with {}, rank 0 with {}", where, r,
                                   reduce_op_name(static_cast<ReduceOp>(w[1])), reduce_op_name(static_cast<ReduceOp>(first[1]))));
    }
    if (w[2] != first[2]) {
      throw DTypeError(fmt::format("{}: rank {} passed {}, rank 0 passed {}", where, r,
                                   dtype_name(static_cast<DType>(w[2])), dtype_name(static_cast<DType>(first[2]))));
    }
    if (w[3] != first[3]) {
      throw ValueError(fmt::format("{}: rank {} passed root {}, rank 0 passed root {}", where, r, w[3], first[3]));
    }
    if (!std::equal(w.begin() + 4, w.end(), first.begin() + 4)) {
      throw ShapeError(fmt::format("{}: rank {} passed shape {}, rank 0 passed shape {}", where, r, words_shape(w, 5),
                                   words_shape(first, 5)));
    }
  }
}

struct CallArgs {
  const char* op;
  CollectiveKind kind;
  ReduceOp rop = ReduceOp::sum;
  Array in;        // undefined for barrier
  Array out;       // undefined for send and barrier; the same array as in for in-place calls
  bool in_place = false;
  int peer = 0;
  bool async_op = false;
  OptionalStream stream;
};

Work submit(const Communicator& comm, CallArgs a) {
  backend::CommBackend& be = *comm.impl()->backend;
  const Device device = be.device();
  const char* op = a.op;
  if (a.in.defined()) detail::check_array_device(op, a.in, device, a.in_place ? "array" : "input");
  if (a.out.defined() && !a.in_place) detail::check_array_device(op, a.out, device, "output");
  if (a.in.defined() && a.out.defined() && a.in.dtype() != a.out.dtype()) {
    throw DTypeError(fmt::format("tessel.distributed.{}: the input is {} and the output {}; they must match", op,
                                 dtype_name(a.in.dtype()), dtype_name(a.out.dtype())));
  }
  if (is_reduction(a.kind)) check_reduce_dtype(op, a.rop, a.in.dtype());
  if (a.out.defined()) check_writable(a.out, (std::string("tessel.distributed.") + op).c_str());
  if (detail::debug_checks() && a.kind != CollectiveKind::send && a.kind != CollectiveKind::recv) {
    debug_check(be, op, a.kind, a.rop, a.in.defined() ? a.in : a.out, a.peer);
  }

  auto state = std::make_shared<Work::State>();
  state->op = op;
  backend::Collective call;
  call.kind = a.kind;
  call.op = a.rop;
  call.peer = a.peer;
  const char* timeout_setting = std::getenv("TESSEL_DIST_TIMEOUT_S");
  call.blocking = !a.async_op && g_group.depth == 0 && (timeout_setting == nullptr || timeout_setting[0] == '\0');
  call.stream = a.in.defined() || a.out.defined() ? tessel::detail::op_stream(device, a.stream, op) : Stream::cpu();
  if (device.is_cuda() && a.kind == CollectiveKind::barrier) call.stream = tessel::detail::op_stream(device, a.stream, op);
  // Ordering: the call reads and writes after the arrays' pending writes.
  for (const Array* x : {&a.in, &a.out}) {
    if (!x->defined()) continue;
    if (device.is_cpu()) {
      x->storage()->wait_on_host();
    } else {
      x->storage()->wait_on_stream(call.stream);
    }
  }
  std::vector<std::function<void()>> post;
  if (a.in.defined()) call.in = a.in.is_contiguous() ? a.in : a.in.contiguous(call.stream);
  if (a.in_place) {
    call.out = call.in;
  } else if (a.out.defined()) {
    call.out = a.out.is_contiguous() ? a.out : empty(a.out.shape(), a.out.dtype(), device, call.stream);
  }
  const bool writes_out = a.out.defined() && !(a.kind == CollectiveKind::reduce && be.rank() != a.peer);
  if (a.rop == ReduceOp::avg && is_reduction(a.kind) && !be.native_avg() && writes_out && call.out.size() > 0) {
    const Array out = call.out;
    const auto n = static_cast<std::int64_t>(be.size());
    const Stream s = call.stream;
    post.emplace_back([out, n, s] { divide(out, Scalar(n), out, s); });
  }
  if (writes_out && call.out.storage() != a.out.storage()) {
    const Array dst = a.out;
    const Array src = call.out;
    const Stream s = call.stream;
    post.emplace_back([dst, src, s] { copyto(dst, src, s); });
  }
  state->keep_alive = {call.in, call.out};
  comm.impl()->backend->issue(call, *state);
  if (be.completes_on_host()) {
    state->then = std::move(post);
    if (!a.async_op) {
      if (g_group.depth > 0) {
        g_group.pending.push_back(state);
      } else {
        state->complete(true);
      }
    }
  } else {
    if (g_group.depth > 0) {
      for (auto& step : post) g_group.post.push_back(std::move(step));
    } else {
      for (auto& step : post) step();
    }
    if (a.out.defined()) a.out.storage()->record_pending_write(call.stream);
  }
  return Work(state);
}

void check_peer(const char* op, int peer, int size, const char* what) {
  if (peer < 0 || peer >= size) {
    throw ValueError(fmt::format("tessel.distributed.{}: {} {} is outside the communicator's ranks 0..{}", op, what,
                                 peer, size - 1));
  }
}

}  // namespace

int Communicator::rank() const { return backend_of(*this, "Communicator.rank").rank(); }
int Communicator::size() const { return backend_of(*this, "Communicator.size").size(); }
Device Communicator::device() const { return backend_of(*this, "Communicator.device").device(); }

Communicator Communicator::split(int color, int key) const {
  backend_of(*this, "split");
  std::unique_ptr<backend::CommBackend> child = impl_->backend->split(color, key);
  if (!child) return Communicator();
  auto impl = std::make_shared<Impl>();
  impl->backend = std::move(child);
  return Communicator(std::move(impl));
}

std::vector<Communicator> init_devices(const std::vector<Device>& devices) {
#if TESSEL_HAVE_CUDA
  std::vector<Communicator> result;
  for (auto& backend : backend::cuda::nccl_single_process(devices)) {
    auto impl = std::make_shared<Communicator::Impl>();
    impl->backend = std::move(backend);
    impl->of_runtime = false;
    result.emplace_back(std::move(impl));
  }
  return result;
#else
  std::string names;
  for (const Device& d : devices) names += (names.empty() ? "" : ", ") + d.str();
  ::tessel::detail::throw_cuda_not_built(fmt::format(
      "tessel.distributed.init_devices([{}]): single-process communicators are NCCL's, one per GPU", names));
#endif
}

Work Communicator::all_reduce(const Array& x, ReduceOp op, bool async_op, const OptionalStream& stream) const {
  backend_of(*this, "all_reduce");
  return submit(*this, {"all_reduce", CollectiveKind::all_reduce, op, x, x, true, 0, async_op, stream});
}

Work Communicator::broadcast(const Array& x, int root, bool async_op, const OptionalStream& stream) const {
  check_peer("broadcast", root, backend_of(*this, "broadcast").size(), "root");
  return submit(*this, {"broadcast", CollectiveKind::broadcast, ReduceOp::sum, x, x, true, root, async_op, stream});
}

Work Communicator::reduce(const Array& x, int root, ReduceOp op, bool async_op, const OptionalStream& stream) const {
  check_peer("reduce", root, backend_of(*this, "reduce").size(), "root");
  return submit(*this, {"reduce", CollectiveKind::reduce, op, x, x, true, root, async_op, stream});
}

namespace {
Shape with_leading(std::int64_t n, const Shape& shape) {
  Shape result{n};
  result.insert(result.end(), shape.begin(), shape.end());
  return result;
}
}  // namespace

Work Communicator::all_gather(const Array& out, const Array& in, bool async_op, const OptionalStream& stream) const {
  const int n = backend_of(*this, "all_gather").size();
  if (out.defined() && in.defined() && out.shape() != with_leading(n, in.shape())) {
    throw ShapeError(fmt::format("tessel.distributed.all_gather: the output has shape {}, expected {} (the {} ranks' "
                                 "inputs of shape {})", shape_str(out.shape()), shape_str(with_leading(n, in.shape())),
                                 n, shape_str(in.shape())));
  }
  return submit(*this, {"all_gather", CollectiveKind::all_gather, ReduceOp::sum, in, out, false, 0, async_op, stream});
}

Work Communicator::reduce_scatter(const Array& out, const Array& in, ReduceOp op, bool async_op,
                                  const OptionalStream& stream) const {
  const int n = backend_of(*this, "reduce_scatter").size();
  if (out.defined() && in.defined() && in.shape() != with_leading(n, out.shape())) {
    throw ShapeError(fmt::format("tessel.distributed.reduce_scatter: the input has shape {}, expected {} (one block "
                                 "of the output's shape {} per rank)", shape_str(in.shape()),
                                 shape_str(with_leading(n, out.shape())), shape_str(out.shape())));
  }
  return submit(*this, {"reduce_scatter", CollectiveKind::reduce_scatter, op, in, out, false, 0, async_op, stream});
}

Work Communicator::all_to_all(const Array& out, const Array& in, bool async_op, const OptionalStream& stream) const {
  const int n = backend_of(*this, "all_to_all").size();
  if (out.defined() && in.defined() && (in.shape() != out.shape() || in.ndim() == 0 || in.shape()[0] != n)) {
    throw ShapeError(fmt::format("tessel.distributed.all_to_all: input {} and output {} must both have shape ({}, ...), "
                                 "one block per rank", shape_str(in.shape()), shape_str(out.shape()), n));
  }
  return submit(*this, {"all_to_all", CollectiveKind::all_to_all, ReduceOp::sum, in, out, false, 0, async_op, stream});
}

Work Communicator::send(const Array& x, int peer, bool async_op, const OptionalStream& stream) const {
  check_peer("send", peer, backend_of(*this, "send").size(), "peer");
  return submit(*this, {"send", CollectiveKind::send, ReduceOp::sum, x, Array(), false, peer, async_op, stream});
}

Work Communicator::recv(const Array& x, int peer, bool async_op, const OptionalStream& stream) const {
  check_peer("recv", peer, backend_of(*this, "recv").size(), "peer");
  return submit(*this, {"recv", CollectiveKind::recv, ReduceOp::sum, Array(), x, false, peer, async_op, stream});
}

Work Communicator::barrier(bool async_op) const {
  backend_of(*this, "barrier");
  return submit(*this, {"barrier", CollectiveKind::barrier, ReduceOp::sum, Array(), Array(), false, 0, async_op,
                        std::nullopt});
}

}  // namespace tessel::dist

namespace tessel::backend {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
    case CollectiveKind::barrier: return "barrier";
  }
  return "?";
}

}  // namespace tessel::backend
