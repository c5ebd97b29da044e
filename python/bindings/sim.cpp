// Simulation layer: ts.sim (python/tessel/sim.py re-exports _tessel._sim): the DEM particle
// simulation sim::Particles with the C++ names (ParticlesConfig, InitOptions, ParticleState,
// init_gas / init_block / init_collision, Particles), its views as zero-copy tessel arrays and
// its diagnostics as a dict.
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <string>
#include <utility>

#include "common.hpp"
#include "tessel/dist/dist.hpp"
#include "tessel/sim/distributed.hpp"
#include "tessel/sim/particles.hpp"

namespace tessel::python {
namespace {

using namespace tessel::sim;
using Vec3 = std::array<double, 3>;

// ---- host float vectors <-> NumPy ----

nb::object numpy() { return nb::borrow(numpy_module()); }

// Any array-like (NumPy, list, tessel CPU array, scalar) as float32 values: `rows` x `cols`
// (cols 0: a vector of rows values; a scalar is broadcast to it). ShapeError names the field.
std::vector<float> to_floats(nb::handle h, const char* field, std::int64_t rows, int cols) {
  nb::object np = numpy();
  nb::object a = np.attr("asarray")(h, "dtype"_a = "float32");
  const std::int64_t ndim = nb::cast<std::int64_t>(a.attr("ndim"));
  if (ndim == 0 && cols == 0 && rows >= 0) a = np.attr("full")(rows, a, "dtype"_a = "float32");
  nb::tuple shape = nb::cast<nb::tuple>(a.attr("shape"));
  const bool ok = cols == 0 ? (shape.size() == 1 && (rows < 0 || nb::cast<std::int64_t>(shape[0]) == rows))
                            : (shape.size() == 2 && nb::cast<std::int64_t>(shape[1]) == cols &&
                               (rows < 0 || nb::cast<std::int64_t>(shape[0]) == rows));
  if (!ok) {
    const std::string want = cols == 0 ? "(" + (rows < 0 ? std::string("n") : std::to_string(rows)) + ",) or a scalar"
                                       : "(" + (rows < 0 ? std::string("n") : std::to_string(rows)) + ", " +
                                             std::to_string(cols) + ")";
    throw ShapeError("sim.ParticleState: " + std::string(field) + " must have shape " + want + ", got " +
                     nb::cast<std::string>(nb::str(shape)));
  }
  a = np.attr("ascontiguousarray")(a);
  const std::int64_t count = nb::cast<std::int64_t>(a.attr("size"));
  const auto ptr = nb::cast<std::uintptr_t>(a.attr("ctypes").attr("data"));
  const float* data = reinterpret_cast<const float*>(ptr);
  return std::vector<float>(data, data + count);
}

nb::object to_numpy(const std::vector<float>& v) {
  nb::object out = numpy().attr("empty")(static_cast<std::int64_t>(v.size()), "dtype"_a = "float32");
  auto* dst = reinterpret_cast<float*>(nb::cast<std::uintptr_t>(out.attr("ctypes").attr("data")));
  std::copy(v.begin(), v.end(), dst);
  return out;
}

nb::object columns(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c) {
  return numpy().attr("stack")(nb::make_tuple(to_numpy(a), to_numpy(b), to_numpy(c)), "axis"_a = 1);
}

void set_columns(nb::handle h, const char* field, std::vector<float>& a, std::vector<float>& b, std::vector<float>& c) {
  const std::vector<float> v = to_floats(h, field, -1, 3);
  const std::size_t n = v.size() / 3;
  a.resize(n);
  b.resize(n);
  c.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = v[3 * i];
    b[i] = v[3 * i + 1];
    c[i] = v[3 * i + 2];
  }
}

// ---- enum-like contact model: a ContactModel or its name ----

ContactModel to_model(nb::handle h) {
  if (nb::isinstance<ContactModel>(h)) return nb::cast<ContactModel>(h);
  if (nb::isinstance<nb::str>(h)) {
    const std::string name = nb::cast<std::string>(h);
    if (name == "linear") return ContactModel::linear;
    if (name == "hertz") return ContactModel::hertz;
    throw tessel::ValueError("sim.ParticlesConfig: model must be 'linear' or 'hertz', got '" + name + "'");
  }
  throw nb::type_error(("sim.ParticlesConfig: model must be a ContactModel or 'linear'/'hertz', got " +
                        std::string(nb::inst_name(h).c_str()))
                           .c_str());
}

std::string vec_str(const Vec3& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + ")";
}

nb::dict diagnostics_dict(const Diagnostics& d) {
  nb::dict out;
  out["step"] = d.step;
  out["time"] = d.time;
  out["kinetic"] = d.kinetic;
  out["potential_gravity"] = d.potential_gravity;
  out["potential_spring"] = d.potential_spring;
  out["potential"] = d.potential_gravity + d.potential_spring;
  out["total_energy"] = d.total_energy();
  out["momentum"] = nb::make_tuple(d.momentum[0], d.momentum[1], d.momentum[2]);
  out["contacts"] = d.contacts;
  out["wall_contacts"] = d.wall_contacts;
  return out;
}

std::optional<Stream> to_optional_stream(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (!nb::isinstance<Stream>(h)) {
    throw nb::type_error(("sim.Particles: stream must be a tessel.Stream or None, got " + std::string(nb::inst_name(h).c_str())).c_str());
  }
  return nb::cast<Stream>(h);
}

// Particles' warnings (a time step close to the stability limit) as Python RuntimeWarnings.
template <class Sim>
void emit_warnings(const Sim& p) {
  for (const std::string& w : p.warnings()) {
    if (PyErr_WarnEx(PyExc_RuntimeWarning, w.c_str(), 2) < 0) throw nb::python_error();  // -W error
  }
}

void register_config(nb::module_& s) {
  nb::enum_<ContactModel>(s, "ContactModel")
      .value("linear", ContactModel::linear)
      .value("hertz", ContactModel::hertz);

  nb::class_<ParticlesConfig>(s, "ParticlesConfig",
                              "Box, boundaries, gravity and contact law of a simulation (sim::ParticlesConfig). "
                              "Every field is a keyword of the constructor and a read/write attribute.")
      .def("__init__",
           [](ParticlesConfig* self, std::optional<Vec3> box_lo, std::optional<Vec3> box_hi, std::optional<bool> walls,
              std::optional<bool> periodic, std::optional<Vec3> gravity, nb::handle model,
              std::optional<double> stiffness, std::optional<double> damping_ratio, std::optional<double> friction,
              std::optional<double> tangential_damping, std::optional<double> dt, std::optional<double> cell_size) {
             ParticlesConfig c;
             if (box_lo) c.box_lo = *box_lo;
             if (box_hi) c.box_hi = *box_hi;
             if (walls) c.walls = *walls;
             if (periodic) c.periodic = *periodic;
             if (gravity) c.gravity = *gravity;
             if (!model.is_none()) c.model = to_model(model);
             if (stiffness) c.stiffness = *stiffness;
             if (damping_ratio) c.damping_ratio = *damping_ratio;
             if (friction) c.friction = *friction;
             if (tangential_damping) c.tangential_damping = *tangential_damping;
             if (dt) c.dt = *dt;
             if (cell_size) c.cell_size = *cell_size;
             new (self) ParticlesConfig(c);
           },
           nb::kw_only(), "box_lo"_a = nb::none(), "box_hi"_a = nb::none(), "walls"_a = nb::none(),
           "periodic"_a = nb::none(), "gravity"_a = nb::none(), "model"_a = nb::none(), "stiffness"_a = nb::none(),
           "damping_ratio"_a = nb::none(), "friction"_a = nb::none(), "tangential_damping"_a = nb::none(),
           "dt"_a = nb::none(), "cell_size"_a = nb::none())
      .def_rw("box_lo", &ParticlesConfig::box_lo, "3 floats (assign all three: the attribute is a copy)")
      .def_rw("box_hi", &ParticlesConfig::box_hi)
      .def_rw("walls", &ParticlesConfig::walls)
      .def_rw("periodic", &ParticlesConfig::periodic)
      .def_rw("gravity", &ParticlesConfig::gravity)
      .def_prop_rw("model", [](const ParticlesConfig& c) { return c.model; },
                   [](ParticlesConfig& c, nb::handle h) { c.model = to_model(h); })
      .def_rw("stiffness", &ParticlesConfig::stiffness)
      .def_rw("damping_ratio", &ParticlesConfig::damping_ratio)
      .def_rw("friction", &ParticlesConfig::friction)
      .def_rw("tangential_damping", &ParticlesConfig::tangential_damping)
      .def_rw("dt", &ParticlesConfig::dt)
      .def_rw("cell_size", &ParticlesConfig::cell_size)
      .def("__repr__", [](const ParticlesConfig& c) {
        return "ParticlesConfig(box_lo=" + vec_str(c.box_lo) + ", box_hi=" + vec_str(c.box_hi) +
               ", walls=" + (c.walls ? "True" : "False") + ", periodic=" + (c.periodic ? "True" : "False") +
               ", gravity=" + vec_str(c.gravity) + ", model='" + (c.model == ContactModel::linear ? "linear" : "hertz") +
               "', stiffness=" + std::to_string(c.stiffness) + ", damping_ratio=" + std::to_string(c.damping_ratio) +
               ", friction=" + std::to_string(c.friction) + ", tangential_damping=" + std::to_string(c.tangential_damping) +
               ", dt=" + std::to_string(c.dt) + ", cell_size=" + std::to_string(c.cell_size) + ")";
      });

  nb::class_<InitOptions>(s, "InitOptions", "Options of init_gas / init_block / init_collision (sim::InitOptions).")
      .def("__init__",
           [](InitOptions* self, std::optional<std::int64_t> n, std::optional<double> radius,
              std::optional<double> polydispersity, std::optional<double> density, std::optional<double> speed,
              std::optional<std::uint64_t> seed) {
             InitOptions o;
             if (n) o.n = *n;
             if (radius) o.radius = *radius;
             if (polydispersity) o.polydispersity = *polydispersity;
             if (density) o.density = *density;
             if (speed) o.speed = *speed;
             if (seed) o.seed = *seed;
             new (self) InitOptions(o);
           },
           nb::kw_only(), "n"_a = nb::none(), "radius"_a = nb::none(), "polydispersity"_a = nb::none(),
           "density"_a = nb::none(), "speed"_a = nb::none(), "seed"_a = nb::none())
      .def_rw("n", &InitOptions::n)
      .def_rw("radius", &InitOptions::radius)
      .def_rw("polydispersity", &InitOptions::polydispersity)
      .def_rw("density", &InitOptions::density)
      .def_rw("speed", &InitOptions::speed)
      .def_rw("seed", &InitOptions::seed)
      .def("__repr__", [](const InitOptions& o) {
        return "InitOptions(n=" + std::to_string(o.n) + ", radius=" + std::to_string(o.radius) +
               ", polydispersity=" + std::to_string(o.polydispersity) + ", density=" + std::to_string(o.density) +
               ", speed=" + std::to_string(o.speed) + ", seed=" + std::to_string(o.seed) + ")";
      });
}

void register_state(nb::module_& s) {
  // Host state in particle order. Attributes are NumPy copies; assigning one replaces the field.
  nb::class_<ParticleState>(s, "ParticleState",
                            "Host particle state (sim::ParticleState): ParticleState(positions (n, 3), "
                            "velocities (n, 3) = 0, radius = 0.004 (scalar or (n,)), mass = None "
                            "(density * 4/3 pi r^3), *, density = 1000). Attributes are NumPy copies.")
      .def("__init__",
           [](ParticleState* self, nb::handle positions, nb::handle velocities, nb::handle radius, nb::handle mass,
              double density) {
             ParticleState st;
             set_columns(positions, "positions", st.x, st.y, st.z);
             const std::int64_t n = st.size();
             if (velocities.is_none()) {
               st.vx.assign(static_cast<std::size_t>(n), 0.0f);
               st.vy = st.vx;
               st.vz = st.vx;
             } else {
               set_columns(velocities, "velocities", st.vx, st.vy, st.vz);
               if (st.vx.size() != st.x.size()) {
                 throw ShapeError("sim.ParticleState: velocities has " + std::to_string(st.vx.size()) +
                                  " rows but positions has " + std::to_string(n));
               }
             }
             st.radius = to_floats(radius, "radius", n, 0);
             if (mass.is_none()) {
               constexpr double pi = 3.14159265358979323846;
               st.mass.resize(st.radius.size());
               for (std::size_t i = 0; i < st.radius.size(); ++i) {
                 const double r = st.radius[i];
                 st.mass[i] = static_cast<float>(density * 4.0 / 3.0 * pi * r * r * r);
               }
             } else {
               st.mass = to_floats(mass, "mass", n, 0);
             }
             new (self) ParticleState(std::move(st));
           },
           "positions"_a, "velocities"_a = nb::none(), "radius"_a = 0.004, "mass"_a = nb::none(), nb::kw_only(),
           "density"_a = 1000.0)
      .def("__len__", &ParticleState::size)
      .def_prop_ro("size", &ParticleState::size)
      .def_prop_rw("positions", [](const ParticleState& st) { return columns(st.x, st.y, st.z); },
                   [](ParticleState& st, nb::handle h) { set_columns(h, "positions", st.x, st.y, st.z); },
                   "(n, 3) float32 NumPy copy")
      .def_prop_rw("velocities", [](const ParticleState& st) { return columns(st.vx, st.vy, st.vz); },
                   [](ParticleState& st, nb::handle h) { set_columns(h, "velocities", st.vx, st.vy, st.vz); })
#define TESSEL_STATE_FIELD(name)                                                                   \
  def_prop_rw(#name, [](const ParticleState& st) { return to_numpy(st.name); },                   \
              [](ParticleState& st, nb::handle h) { st.name = to_floats(h, #name, -1, 0); })
      .TESSEL_STATE_FIELD(x)
      .TESSEL_STATE_FIELD(y)
      .TESSEL_STATE_FIELD(z)
      .TESSEL_STATE_FIELD(vx)
      .TESSEL_STATE_FIELD(vy)
      .TESSEL_STATE_FIELD(vz)
      .TESSEL_STATE_FIELD(radius)
      .TESSEL_STATE_FIELD(mass)
#undef TESSEL_STATE_FIELD
      .def("__repr__", [](const ParticleState& st) { return "<ParticleState of " + std::to_string(st.size()) + " particles>"; });

  auto init = [](ParticleState (*fn)(const InitOptions&, const ParticlesConfig&)) {
    return [fn](const std::optional<InitOptions>& options, const std::optional<ParticlesConfig>& config) {
      const InitOptions o = options.value_or(InitOptions{});
      const ParticlesConfig c = config.value_or(ParticlesConfig{});
      nb::gil_scoped_release release;
      return fn(o, c);
    };
  };
  s.def("init_gas", init(&init_gas), "options"_a = nb::none(), "config"_a = nb::none(),
        "Uniform random positions in the box, velocities uniform in [-speed, speed].");
  s.def("init_block", init(&init_block), "options"_a = nb::none(), "config"_a = nb::none(),
        "A jittered lattice block in the upper part of the box, at rest.");
  s.def("init_collision", init(&init_collision), "options"_a = nb::none(), "config"_a = nb::none(),
        "Two lattice balls of n/2 particles flying at each other along x.");
  s.def("prepare_output_directory", &prepare_output_directory, "path"_a,
        "Creates path (and parents) and checks it is writable (ValueError naming the path otherwise).");
}

void register_particles(nb::module_& s) {
  nb::class_<Particles>(s, "Particles",
                        "A DEM simulation of soft spheres (sim::Particles): Particles(state, config=None, "
                        "device=None, stream=None). positions / velocities are zero-copy views, radii / masses / ids copies "
                        "views of the live state, kept in grid-cell order (row k is particle ids[k]).")
      .def("__init__",
           [](Particles* self, const ParticleState& state, const std::optional<ParticlesConfig>& config,
              nb::handle device, nb::handle stream) {
             const Device d = to_device_or_default(device);
             const std::optional<Stream> st = to_optional_stream(stream);
             const ParticlesConfig c = config.value_or(ParticlesConfig{});
             std::optional<Particles> p;
             {
               nb::gil_scoped_release release;  // validation, upload and the first forces
               p.emplace(state, c, d, st);
             }
             emit_warnings(*p);
             new (self) Particles(std::move(*p));
           },
           "state"_a, "config"_a = nb::none(), "device"_a = nb::none(), "stream"_a = nb::none())
      .def_static(
          "benchmark_setup",
          [](std::int64_t n, nb::handle device, std::uint64_t seed) {
            const Device d = to_device_or_default(device);
            std::optional<Particles> p;
            {
              nb::gil_scoped_release release;
              auto setup = tessel::sim::benchmark_setup(n, seed);
              p.emplace(setup.state, setup.config, d);
            }
            emit_warnings(*p);
            return std::move(*p);
          },
          "n"_a = 1'000'000, "device"_a = "cuda", nb::kw_only(), "seed"_a = 2026,
          "The issue 8 benchmark configuration (as bench/sim_bench.cpp and bench/peers/numba_sim.py): n "
          "particles of radius 0.004, uniform random in a walled box of n/1e6 unit volumes, velocities in "
          "[-0.05, 0.05], linear spring-dashpot (k 1000, zeta 0.3), gravity, dt 1e-4.")
      .def(
          "step",
          [](Particles& p, std::int64_t count) {
            nb::gil_scoped_release release;
            p.step(count);
          },
          "count"_a = 1, "Advances count velocity-Verlet steps (asynchronous on the GPU).")
      .def(
          "diagnostics",
          [](Particles& p) {
            Diagnostics d;
            {
              nb::gil_scoped_release release;
              d = p.diagnostics();
            }
            return diagnostics_dict(d);
          },
          "A dict: step, time, kinetic, potential_gravity, potential_spring, potential, total_energy, momentum "
          "(3-tuple), contacts, wall_contacts. ValueError for NaN states or particles outside a box without walls.")
      .def(
          "neighbor_list",
          [](Particles& p) {
            NeighborList list;
            {
              nb::gil_scoped_release release;
              list = p.neighbor_list();
            }
            nb::object np = numpy();
            nb::object offsets = np.attr("array")(list.offsets, "dtype"_a = "int64");
            nb::object indices = np.attr("array")(list.indices, "dtype"_a = "int32");
            return nb::make_tuple(offsets, indices);
          },
          "(offsets, indices): the neighbors of particle i are indices[offsets[i]:offsets[i+1]] (original order).")
      .def(
          "state",
          [](const Particles& p) {
            nb::gil_scoped_release release;
            return p.state();
          },
          "A host copy of the state in the original particle order.")
      .def_prop_ro("positions", &Particles::positions, "(n, 3) float32 view of the live positions (cell order)")
      .def_prop_ro("velocities", &Particles::velocities, "(n, 3) float32 view of the live velocities (cell order)")
      .def_prop_ro("radii", &Particles::radii)
      .def_prop_ro("masses", &Particles::masses)
      .def_prop_ro("ids", &Particles::ids, "int32: the original particle index of each row")
      .def("__len__", &Particles::size)
      .def_prop_ro("size", &Particles::size)
      .def_prop_ro("device", &Particles::device)
      .def_prop_ro("stream", [](const Particles& p) { return p.stream(); })
      .def_prop_ro("config", [](const Particles& p) { return p.config(); }, "a copy of the configuration")
      .def_prop_ro("steps_done", &Particles::steps_done)
      .def_prop_ro("time", &Particles::time)
      .def_prop_ro("stable_dt", &Particles::stable_dt)
      .def_prop_ro("warnings", &Particles::warnings)
      .def_prop_ro("grid_dims", &Particles::grid_dims)
      .def_prop_ro("cell_size", &Particles::cell_size)
      .def_static("required_bytes",
                  [](std::int64_t n, std::int64_t cells, nb::handle device) {
                    return Particles::required_bytes(n, cells, to_device_or_default(device));
                  },
                  "n"_a, "cells"_a, "device"_a = nb::none())
      .def("__repr__", [](const Particles& p) {
        return "<sim.Particles of " + std::to_string(p.size()) + " on " + p.device().str() + ", step " +
               std::to_string(p.steps_done()) + ">";
      });
}

// The world communicator unless one is given (ts.distributed.init() first).
dist::Communicator to_comm(nb::handle h) {
  if (h.is_none()) return dist::world();
  return nb::cast<dist::Communicator>(h);
}

void register_distributed(nb::module_& s) {
  nb::class_<DistributedParticles>(s, "DistributedParticles")
      .def(
          "__init__",
          [](DistributedParticles* self, const ParticleState& state, const ParticlesConfig& config, nb::handle comm,
             int axis, std::int64_t rebalance_every) {
            DistributedOptions options;
            options.axis = axis;
            options.rebalance_every = rebalance_every;
            const dist::Communicator c = to_comm(comm);
            {
              nb::gil_scoped_release release;
              new (self) DistributedParticles(state, config, c, options);
            }
            if (c.rank() == 0) emit_warnings(*self);
          },
          "state"_a, "config"_a, "comm"_a = nb::none(), nb::kw_only(), "axis"_a = 0, "rebalance_every"_a = 0,
          "Every rank passes the same full initial state and configuration; each keeps the particles in its slab "
          "of the box along `axis`. Collective over `comm` (default: ts.distributed.world()).")
      .def_static(
          "benchmark_setup",
          [](std::int64_t n, nb::handle comm, std::uint64_t seed, std::int64_t rebalance_every) {
            const dist::Communicator c = to_comm(comm);
            DistributedOptions options;
            options.rebalance_every = rebalance_every;
            std::optional<DistributedParticles> p;
            {
              nb::gil_scoped_release release;
              auto setup = tessel::sim::benchmark_setup(n, seed);
              p.emplace(setup.state, setup.config, c, options);
            }
            return std::move(*p);
          },
          "n"_a = 1'000'000, "comm"_a = nb::none(), nb::kw_only(), "seed"_a = 2026, "rebalance_every"_a = 0,
          "Particles.benchmark_setup's configuration, split across the ranks of comm.")
      .def(
          "step",
          [](DistributedParticles& p, std::int64_t count) {
            nb::gil_scoped_release release;
            p.step(count);
          },
          "count"_a = 1, "Advances count steps (collective).")
      .def(
          "diagnostics",
          [](DistributedParticles& p) {
            DistributedDiagnostics d;
            {
              nb::gil_scoped_release release;
              d = p.diagnostics();
            }
            nb::dict out = diagnostics_dict(d);
            out["rank_counts"] = d.rank_counts;
            out["slab_bounds"] = d.slab_bounds;
            out["imbalance"] = d.imbalance();
            return out;
          },
          "Particles.diagnostics' dict summed over the ranks, plus rank_counts (particles per rank), slab_bounds "
          "and imbalance (the largest count over the mean). Collective.")
      .def(
          "gather",
          [](DistributedParticles& p, int root) {
            nb::gil_scoped_release release;
            return p.gather(root);
          },
          "root"_a = 0,
          "The whole state in the original particle order on `root` (an empty state elsewhere). Collective.")
      .def("__len__", &DistributedParticles::local_size)
      .def_prop_ro("local_size", &DistributedParticles::local_size)
      .def_prop_ro("global_size", &DistributedParticles::global_size)
      .def_prop_ro("ghost_count", &DistributedParticles::ghost_count)
      .def_prop_ro("steps_done", &DistributedParticles::steps_done)
      .def_prop_ro("time", &DistributedParticles::time)
      .def_prop_ro("slab_bounds", &DistributedParticles::slab_bounds)
      .def_prop_ro("cutoff", &DistributedParticles::cutoff)
      .def_prop_ro("config", [](const DistributedParticles& p) { return p.config(); }, "a copy of the configuration")
      .def_prop_ro("warnings", &DistributedParticles::warnings)
      .def("__repr__", [](const DistributedParticles& p) {
        return "<sim.DistributedParticles rank " + std::to_string(p.communicator().rank()) + " of " +
               std::to_string(p.communicator().size()) + ": " + std::to_string(p.local_size()) + " of " +
               std::to_string(p.global_size()) + " particles, step " + std::to_string(p.steps_done()) + ">";
      });
}

}  // namespace

void register_sim(nb::module_& m) {
  nb::module_ s = m.def_submodule("_sim", "tessel.sim: particle simulation (DEM)");
  register_config(s);
  register_state(s);
  register_particles(s);
  register_distributed(s);
}

}  // namespace tessel::python
