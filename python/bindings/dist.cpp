// Distributed layer: the native half of ts.distributed (python/tessel/distributed.py), submodule
// _dist. Calls that wait (init, the collectives, Work.wait, the end of a group) release the GIL, so
// other Python threads run while a rank waits for its peers.
#include <nanobind/stl/map.h>

#include <map>

#include "common.hpp"
#include "tessel/dist/dist.hpp"

namespace tessel::python {
namespace {

using namespace tessel::dist;

ReduceOp to_reduce_op(nb::handle h) {
  if (nb::isinstance<nb::str>(h)) return parse_reduce_op(nb::cast<std::string>(h));
  return nb::cast<ReduceOp>(h);
}

// The array argument of a collective: a tessel Array (no conversion: a collective writes in place).
const Array& array_arg(nb::handle h, const char* op, const char* name) {
  if (!is_array(h)) {
    throw nb::type_error(("tessel.distributed." + std::string(op) + ": " + name + " must be a tessel Array, got " +
                          nb::cast<std::string>(nb::str(nb::type_name(h.type()))))
                             .c_str());
  }
  return as_array(h);
}

std::optional<Stream> stream_arg(nb::handle stream, const Array& a) { return to_optional_stream(stream, a.device()); }

nb::object result(Work&& work, bool async_op) {
  if (!async_op) return nb::none();
  return nb::cast(std::move(work));
}

}  // namespace

void register_dist(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_dist", "Native half of tessel.distributed (use tessel.distributed).");

  nb::enum_<ReduceOp>(m, "ReduceOp")
      .value("sum", ReduceOp::sum)
      .value("prod", ReduceOp::prod)
      .value("min", ReduceOp::min)
      .value("max", ReduceOp::max)
      .value("avg", ReduceOp::avg);

  nb::class_<Work>(m, "Work")
      .def("wait", &Work::wait, nb::call_guard<nb::gil_scoped_release>())
      .def("is_completed", &Work::is_completed, nb::call_guard<nb::gil_scoped_release>());

  nb::class_<Communicator>(m, "Communicator")
      .def(nb::init<>())  // undefined: its calls raise naming the op (before init(): "called before init()")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("device", &Communicator::device)
      .def_prop_ro("defined", &Communicator::defined)
      .def("split", [](const Communicator& c, int color, int key) {
             nb::gil_scoped_release release;
             return c.split(color, key);
           }, "color"_a, "key"_a = 0)
      .def("all_reduce", [](const Communicator& c, nb::handle x, nb::handle op, bool async_op, nb::handle stream) {
             const Array& a = array_arg(x, "all_reduce", "x");
             const ReduceOp rop = to_reduce_op(op);
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.all_reduce(a, rop, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "x"_a, "op"_a = "sum", "async_op"_a = false, "stream"_a = nb::none())
      .def("broadcast", [](const Communicator& c, nb::handle x, int src, bool async_op, nb::handle stream) {
             const Array& a = array_arg(x, "broadcast", "x");
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.broadcast(a, src, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "x"_a, "src"_a = 0, "async_op"_a = false, "stream"_a = nb::none())
      .def("reduce", [](const Communicator& c, nb::handle x, int dst, nb::handle op, bool async_op, nb::handle stream) {
             const Array& a = array_arg(x, "reduce", "x");
             const ReduceOp rop = to_reduce_op(op);
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.reduce(a, dst, rop, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "x"_a, "dst"_a = 0, "op"_a = "sum", "async_op"_a = false, "stream"_a = nb::none())
      .def("all_gather", [](const Communicator& c, nb::handle out, nb::handle x, bool async_op, nb::handle stream) {
             const Array& o = array_arg(out, "all_gather", "out");
             const Array& a = array_arg(x, "all_gather", "x");
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.all_gather(o, a, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "out"_a, "x"_a, "async_op"_a = false, "stream"_a = nb::none())
      .def("reduce_scatter", [](const Communicator& c, nb::handle out, nb::handle x, nb::handle op, bool async_op,
                                nb::handle stream) {
             const Array& o = array_arg(out, "reduce_scatter", "out");
             const Array& a = array_arg(x, "reduce_scatter", "x");
             const ReduceOp rop = to_reduce_op(op);
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.reduce_scatter(o, a, rop, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "out"_a, "x"_a, "op"_a = "sum", "async_op"_a = false, "stream"_a = nb::none())
      .def("all_to_all", [](const Communicator& c, nb::handle out, nb::handle x, bool async_op, nb::handle stream) {
             const Array& o = array_arg(out, "all_to_all", "out");
             const Array& a = array_arg(x, "all_to_all", "x");
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.all_to_all(o, a, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "out"_a, "x"_a, "async_op"_a = false, "stream"_a = nb::none())
      .def("send", [](const Communicator& c, nb::handle x, int dst, bool async_op, nb::handle stream) {
             const Array& a = array_arg(x, "send", "x");
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.send(a, dst, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "x"_a, "dst"_a, "async_op"_a = false, "stream"_a = nb::none())
      .def("recv", [](const Communicator& c, nb::handle x, int src, bool async_op, nb::handle stream) {
             const Array& a = array_arg(x, "recv", "x");
             const auto s = stream_arg(stream, a);
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.recv(a, src, async_op, s);
             }
             return result(std::move(w), async_op);
           }, "x"_a, "src"_a, "async_op"_a = false, "stream"_a = nb::none())
      .def("barrier", [](const Communicator& c, bool async_op) {
             Work w;
             {
               nb::gil_scoped_release release;
               w = c.barrier(async_op);
             }
             return result(std::move(w), async_op);
           }, "async_op"_a = false);

  // A Group as a Python context manager: __enter__ opens it, __exit__ ends it.
  struct PyGroup {
    std::unique_ptr<Group> group;
  };
  nb::class_<PyGroup>(m, "Group")
      .def(nb::init<>())
      .def("__enter__", [](PyGroup& g) -> PyGroup& {
             g.group = std::make_unique<Group>();
             return g;
           }, nb::rv_policy::reference)
      .def("__exit__", [](PyGroup& g, nb::handle type, nb::handle, nb::handle) {
             std::unique_ptr<Group> group = std::move(g.group);
             if (!group) return false;
             if (!type.is_none()) {
               // Already raising: end the group, keep the Python exception.
               try {
                 nb::gil_scoped_release release;
                 group->end();
               } catch (...) {
               }
               return false;
             }
             nb::gil_scoped_release release;
             group->end();
             return false;
           }, nb::arg().none(), nb::arg().none(), nb::arg().none());

  m.def("built_with_mpi", &built_with_mpi);
  m.def("init", [](nb::handle device) {
        const std::optional<Device> d = to_optional_device(device);
        nb::gil_scoped_release release;
        init(d);
      }, "device"_a = nb::none());
  m.def("init_from_launch", [](int rank, int size, int local_rank, int local_size, nb::handle device,
                               nb::bytes nccl_unique_id) {
        const Device d = to_device_or_default(device);
        std::string id(nccl_unique_id.c_str(), nccl_unique_id.size());
        nb::gil_scoped_release release;
        init_from_launch(rank, size, local_rank, local_size, d, id);
      }, "rank"_a, "size"_a, "local_rank"_a, "local_size"_a, "device"_a, "nccl_unique_id"_a);
  m.def("_nccl_unique_id", []() {
        std::string id;
        {
          nb::gil_scoped_release release;
          id = new_nccl_unique_id();
        }
        return nb::bytes(id.data(), id.size());
      });
  m.def("_check_launch", [](int rank, int size, int local_rank, int local_size, nb::handle device) {
        return tessel::dist::detail::check_launch(rank, size, local_rank, local_size, to_optional_device(device));
      }, "rank"_a, "size"_a, "local_rank"_a, "local_size"_a, "device"_a = nb::none());
  m.def("_timeout_seconds", &tessel::dist::detail::timeout_seconds);
  m.def("is_initialized", &is_initialized);
  m.def("finalize", &finalize, nb::call_guard<nb::gil_scoped_release>());
  m.def("rank", &rank);
  m.def("world_size", &world_size);
  m.def("local_rank", &local_rank);
  m.def("local_size", &local_size);
  m.def("local_device", &local_device);
  m.def("world", []() { return world(); });
  m.def("init_devices", [](const std::vector<nb::handle>& devices) {
        std::vector<Device> ds;
        for (nb::handle h : devices) ds.push_back(to_device_or_default(h));
        nb::gil_scoped_release release;
        return init_devices(ds);
      }, "devices"_a);
  m.def("_detect_launcher", [](const std::map<std::string, std::string>& env) -> std::string {
        const auto info = tessel::dist::detail::detect_launcher([&](const char* name) -> const char* {
          auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        });
        return info.name;
      }, "env"_a);
  m.def("_check_ranks_fit_devices", &tessel::dist::detail::check_ranks_fit_devices, "local_rank"_a, "local_size"_a,
        "device_count"_a, "host"_a);
}

}  // namespace tessel::python
