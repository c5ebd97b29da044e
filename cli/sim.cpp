// `tessel sim particles`: runs sim::Particles and writes PNG renders, a CSV of diagnostics and a
// summary. Under mpirun/srun with more than one rank it runs sim::DistributedParticles instead
// (every rank builds the same initial state; rank 0 renders, writes and prints). Rendering is a software splat renderer on the host (positions copied back per frame):
// an orthographic side view (x right, z up, looking along +y), spheres shaded by their normal and
// by depth, colored by speed.
#include <png.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/dist/dist.hpp"
#include "tessel/sim/distributed.hpp"
#include "tessel/sim/particles.hpp"

namespace tessel::cli {
namespace {

struct SimOptions {
  std::int64_t n = 1000000;
  std::int64_t steps = 2000;
  std::int64_t frames = 20;
  std::int64_t csv_every = 10;
  std::string out;
  std::string init = "gas";
  std::string device;
  std::string model = "linear";
  double dt = 1e-4;
  bool periodic = false;
  bool no_walls = false;
  double friction = 0.0;
  double radius = 0.004;
  double polydispersity = 0.0;
  double stiffness = 1000.0;
  double damping = 0.3;
  double gravity = -9.81;
  double speed = 0.05;
  double box = 1.0;
  std::uint64_t seed = 1;
  int image_width = 800;
  bool gravity_given = false;
  std::int64_t rebalance_every = 0;
};

// ---- rendering ----

struct Rgb {
  float r, g, b;
};

// A perceptually ordered ramp, dark blue (slow) to red (fast), linear between control points.
Rgb colormap(float t) {
  static const Rgb stops[] = {{0.08f, 0.10f, 0.45f}, {0.12f, 0.42f, 0.86f}, {0.15f, 0.78f, 0.86f}, {0.47f, 0.86f, 0.35f},
                              {0.98f, 0.82f, 0.20f}, {0.96f, 0.47f, 0.16f}, {0.78f, 0.12f, 0.12f}};
  constexpr int last = static_cast<int>(sizeof stops / sizeof stops[0]) - 1;
  t = std::clamp(t, 0.0f, 1.0f) * static_cast<float>(last);
  const int i = std::min(static_cast<int>(t), last - 1);
  const float f = t - static_cast<float>(i);
  return {stops[i].r + f * (stops[i + 1].r - stops[i].r), stops[i].g + f * (stops[i + 1].g - stops[i].g),
          stops[i].b + f * (stops[i + 1].b - stops[i].b)};
}

void write_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgb) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw ValueError(fmt::format("sim particles: cannot write {}", path));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (png == nullptr || info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    std::fclose(file);
    throw ValueError(fmt::format("sim particles: libpng failed to write {}", path));
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, const_cast<png_bytep>(rgb.data() + static_cast<std::size_t>(y) * width * 3));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
}

// Splats every particle as a shaded sphere into a depth-buffered image.
void render(const sim::ParticlesConfig& c, const sim::ParticleState& s, int width, const std::string& path) {
  const std::vector<float>& radius = s.radius;
  const std::size_t n = radius.size();
  std::vector<float> pos(3 * n), vel(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    pos[3 * i] = s.x[i];
    pos[3 * i + 1] = s.y[i];
    pos[3 * i + 2] = s.z[i];
    vel[3 * i] = s.vx[i];
    vel[3 * i + 1] = s.vy[i];
    vel[3 * i + 2] = s.vz[i];
  }
  const double lx = c.box_hi[0] - c.box_lo[0], ly = c.box_hi[1] - c.box_lo[1], lz = c.box_hi[2] - c.box_lo[2];
  const int height = std::max(1, static_cast<int>(std::lround(width * lz / lx)));
  const double scale = width / lx;  // pixels per unit length
  std::vector<float> speed(n);
  for (std::size_t i = 0; i < n; ++i) {
    speed[i] = std::sqrt(vel[3 * i] * vel[3 * i] + vel[3 * i + 1] * vel[3 * i + 1] + vel[3 * i + 2] * vel[3 * i + 2]);
  }
  // Colors span the 1st .. 99th percentile speed of this frame (the middle when all are equal).
  std::vector<float> sorted = speed;
  auto percentile = [&](double f) {
    const std::size_t q = std::min(n - 1, static_cast<std::size_t>(f * static_cast<double>(n)));
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(q), sorted.end());
    return sorted[q];
  };
  const float bottom = percentile(0.01), top = percentile(0.99);
  const float spread = top - bottom;
  const bool uniform = !(spread > 1e-6f * std::max(top, 1e-30f));
  std::vector<float> depth(static_cast<std::size_t>(width) * height, std::numeric_limits<float>::infinity());
  std::vector<unsigned char> rgb(static_cast<std::size_t>(width) * height * 3);
  for (std::size_t k = 0; k < rgb.size(); k += 3) {
    rgb[k] = 18;
    rgb[k + 1] = 18;
    rgb[k + 2] = 22;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double px = (pos[3 * i] - c.box_lo[0]) * scale;
    const double pz = (c.box_hi[2] - pos[3 * i + 2]) * scale;  // image rows grow downwards
    const double py = (pos[3 * i + 1] - c.box_lo[1]) / ly;      // depth in [0, 1], 0 nearest
    const double rad = std::max(0.75, radius[i] * scale);
    const Rgb color = colormap(uniform ? 0.5f : (speed[i] - bottom) / spread);
    const float depth_shade = static_cast<float>(1.0 - 0.45 * std::clamp(py, 0.0, 1.0));
    const int x0 = std::max(0, static_cast<int>(std::floor(px - rad))), x1 = std::min(width - 1, static_cast<int>(std::ceil(px + rad)));
    const int y0 = std::max(0, static_cast<int>(std::floor(pz - rad))), y1 = std::min(height - 1, static_cast<int>(std::ceil(pz + rad)));
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) {
        const double u = (x + 0.5 - px) / rad, v = (y + 0.5 - pz) / rad;
        const double d2 = u * u + v * v;
        if (d2 > 1.0) continue;
        const double nz = std::sqrt(1.0 - d2);  // towards the camera
        const float z = static_cast<float>(py - radius[i] / ly * nz);
        float& zb = depth[static_cast<std::size_t>(y) * width + x];
        if (z >= zb) continue;
        zb = z;
        // Light from the upper left, in front.
        const double lambert = std::max(0.0, -0.45 * u - 0.55 * v + 0.70 * nz);
        const float shade = static_cast<float>(0.35 + 0.85 * lambert) * depth_shade;
        unsigned char* out = &rgb[(static_cast<std::size_t>(y) * width + x) * 3];
        out[0] = static_cast<unsigned char>(std::clamp(255.0f * color.r * shade, 0.0f, 255.0f));
        out[1] = static_cast<unsigned char>(std::clamp(255.0f * color.g * shade, 0.0f, 255.0f));
        out[2] = static_cast<unsigned char>(std::clamp(255.0f * color.b * shade, 0.0f, 255.0f));
      }
    }
  }
  write_png(path, width, height, rgb);
}

// ---- the run ----

void run(SimOptions o) {
  if (o.n <= 0) throw ValueError(fmt::format("sim particles: --n must be positive, got {}", o.n));
  if (o.steps < 0 || o.frames < 0 || o.csv_every <= 0) {
    throw ValueError("sim particles: --steps and --frames must be >= 0 and --csv-every > 0");
  }
  if (o.image_width < 16 || o.image_width > 16384) throw ValueError("sim particles: --image-width must be in [16, 16384]");
  if (!(o.box > 0)) throw ValueError(fmt::format("sim particles: --box must be positive, got {}", o.box));
  sim::prepare_output_directory(o.out);  // before any work

  const Device device = o.device.empty() ? default_device() : Device::parse(o.device);
  sim::ParticlesConfig config;
  config.box_hi = {o.box, o.box, o.box};
  config.periodic = o.periodic;
  config.walls = !(o.no_walls || o.periodic);
  if (o.model == "linear") {
    config.model = sim::ContactModel::linear;
  } else if (o.model == "hertz") {
    config.model = sim::ContactModel::hertz;
  } else {
    throw ValueError(fmt::format("sim particles: --model must be linear or hertz, got '{}'", o.model));
  }
  config.stiffness = o.stiffness;
  config.damping_ratio = o.damping;
  config.friction = o.friction;
  config.dt = o.dt;
  // The two-body collision runs without gravity unless asked.
  const double g = (o.init == "collision" && !o.gravity_given) ? 0.0 : o.gravity;
  config.gravity = {0.0, 0.0, g};

  sim::InitOptions init;
  init.n = o.n;
  init.radius = o.radius;
  init.polydispersity = o.polydispersity;
  init.speed = o.init == "collision" && o.speed == 0.05 ? 0.5 : o.speed;
  init.seed = o.seed;
  {
    // Fail before building the initial state when the run cannot fit (the grid estimated as the
    // constructor plans it).
    const double cell = 2.0 * o.radius * (1.0 + o.polydispersity);
    const double per_axis = std::max(1.0, std::floor(o.box / cell));
    const auto cells = static_cast<std::int64_t>(std::min(per_axis * per_axis * per_axis, 1e18));
    sim::Particles::check_memory(o.n, std::min<std::int64_t>(cells, std::int64_t{1} << 30), device);
  }
  sim::ParticleState state;
  if (o.init == "gas") {
    state = sim::init_gas(init, config);
  } else if (o.init == "block") {
    state = sim::init_block(init, config);
  } else if (o.init == "collision") {
    state = sim::init_collision(init, config);
  } else {
    throw ValueError(fmt::format("sim particles: --init must be gas, block or collision, got '{}'", o.init));
  }

  // Under mpirun/srun with more than one rank: the distributed simulation, rank 0 writing.
  std::unique_ptr<sim::Particles> single;
  std::unique_ptr<sim::DistributedParticles> distributed;
  if (dist::detail::detect_launcher([](const char* name) { return std::getenv(name); }).launcher ==
      dist::detail::Launcher::mpi) {
    dist::init(device);
    if (dist::world_size() > 1) {
      sim::DistributedOptions options;
      options.rebalance_every = o.rebalance_every;
      distributed = std::make_unique<sim::DistributedParticles>(state, config, dist::world(), options);
    }
  }
  const bool root = !distributed || dist::world().rank() == 0;
  // Only rank 0 prints and writes.
  auto print = [root](const std::string& line) {
    if (root) std::fputs(line.c_str(), stdout);
  };
  print(fmt::format("tessel sim particles: {} particles ({}), {} steps of dt = {:g} on {}, {} contacts{}{}\n", o.n,
                    o.init, o.steps, o.dt, device.str(), o.model,
                    o.friction > 0 ? fmt::format(", friction {}", o.friction) : "",
                    config.periodic ? ", periodic" : (config.walls ? ", walls" : ", no walls")));
  if (distributed) {
    const std::vector<double>& b = distributed->slab_bounds();
    print(fmt::format("distributed over {} ranks: slabs along x of width {:.4g} (interaction cutoff {:.4g}){}\n",
                      dist::world_size(), (b.back() - b.front()) / static_cast<double>(b.size() - 1),
                      distributed->cutoff(),
                      o.rebalance_every > 0 ? fmt::format(", rebalanced every {} steps", o.rebalance_every) : ""));
  } else {
    single = std::make_unique<sim::Particles>(state, config, device);
    std::printf("grid %lld x %lld x %lld cells of %.4g; stable time step %.3g\n",
                static_cast<long long>(single->grid_dims()[0]), static_cast<long long>(single->grid_dims()[1]),
                static_cast<long long>(single->grid_dims()[2]), single->cell_size(), single->stable_dt());
  }
  state = {};
  // The two simulations behind one loop: steps timed in ms, diagnostics (collective when
  // distributed), and the state for a frame (gathered on rank 0).
  Event start(device), stop(device);
  auto step = [&](std::int64_t count) {
    if (distributed) {
      dist::world().barrier();
      const auto t0 = std::chrono::steady_clock::now();
      distributed->step(count);
      dist::world().barrier();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    start.record(single->stream());
    single->step(count);
    stop.record(single->stream());
    stop.synchronize();
    return static_cast<double>(start.elapsed_ms(stop));
  };
  auto diagnostics = [&]() -> sim::Diagnostics {
    return distributed ? static_cast<sim::Diagnostics>(distributed->diagnostics()) : single->diagnostics();
  };
  auto frame_state = [&]() { return distributed ? distributed->gather(0) : single->state(); };

  std::FILE* csv = nullptr;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_guard(nullptr, &std::fclose);
  if (root) {
    const std::string csv_path = (std::filesystem::path(o.out) / "diagnostics.csv").string();
    csv = std::fopen(csv_path.c_str(), "w");
    if (csv == nullptr) throw ValueError(fmt::format("sim particles: cannot write {}", csv_path));
    csv_guard.reset(csv);
    std::fprintf(csv, "step,time,step_ms,kinetic,potential_gravity,potential_spring,total_energy,momentum_x,momentum_y,"
                      "momentum_z,contacts,wall_contacts\n");
  }
  auto write_row = [&](double step_ms) {
    const sim::Diagnostics d = diagnostics();  // also the check point (NaN, escaped particles)
    if (!root) return;
    std::fprintf(csv, "%lld,%.9g,%.6g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%lld\n", static_cast<long long>(d.step),
                 d.time, step_ms, d.kinetic, d.potential_gravity, d.potential_spring, d.total_energy(), d.momentum[0],
                 d.momentum[1], d.momentum[2], static_cast<long long>(d.contacts), static_cast<long long>(d.wall_contacts));
  };

  // Frame k is rendered at step round(k * steps / (frames - 1)); one frame means the last step.
  std::vector<std::int64_t> frame_steps;
  for (std::int64_t k = 0; k < o.frames; ++k) {
    frame_steps.push_back(o.frames == 1 ? o.steps
                                        : static_cast<std::int64_t>(std::llround(static_cast<double>(k) * o.steps / (o.frames - 1))));
  }
  std::size_t next_frame = 0;
  int frame_index = 0;
  auto render_due = [&](std::int64_t step) {
    while (next_frame < frame_steps.size() && frame_steps[next_frame] <= step) {
      if (frame_steps[next_frame] == step) {
        const sim::ParticleState frame = frame_state();
        const std::string path = (std::filesystem::path(o.out) / fmt::format("frame_{:04d}.png", frame_index++)).string();
        if (root) render(config, frame, o.image_width, path);
      }
      ++next_frame;
    }
  };

  write_row(0.0);
  render_due(0);
  std::vector<double> chunk_ms;  // ms per step of each timed chunk
  std::vector<std::int64_t> chunk_steps;
  double total_ms = 0;
  // Shown on a terminal, and as one line per tenth of the run in a log (the user asked for a run).
  ProgressBar bar("sim", o.steps, root ? ProgressMode::on : ProgressMode::off);
  std::int64_t done = 0;
  while (done < o.steps) {
    std::int64_t target = std::min(o.steps, (done / o.csv_every + 1) * o.csv_every);
    if (next_frame < frame_steps.size()) target = std::min(target, std::max(done + 1, frame_steps[next_frame]));
    const std::int64_t count = target - done;
    const double ms = step(count);
    total_ms += ms;
    chunk_ms.push_back(ms / static_cast<double>(count));
    chunk_steps.push_back(count);
    done = target;
    if (done % o.csv_every == 0 || done == o.steps) write_row(ms / static_cast<double>(count));
    render_due(done);
    bar.update(done, fmt::format("step {}/{}  {:.3f} ms/step", done, o.steps, total_ms / static_cast<double>(done)));
  }

  // Median ms per step over steps (each chunk's mean counted once per step it covers).
  double median_ms = 0;
  if (!chunk_ms.empty()) {
    std::vector<std::size_t> order(chunk_ms.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return chunk_ms[a] < chunk_ms[b]; });
    std::int64_t seen = 0;
    for (std::size_t i : order) {
      seen += chunk_steps[i];
      if (2 * seen >= o.steps) {
        median_ms = chunk_ms[i];
        break;
      }
    }
  }
  const double mean_ms = o.steps > 0 ? total_ms / static_cast<double>(o.steps) : 0.0;
  if (distributed) {
    const sim::DistributedDiagnostics d = distributed->diagnostics();
    const auto [lo, hi] = std::minmax_element(d.rank_counts.begin(), d.rank_counts.end());
    print(fmt::format("ranks: {}, particles per rank {} .. {} (imbalance {:.3f}: the largest over the mean)\n",
                      d.rank_counts.size(), *lo, *hi, d.imbalance()));
  }
  if (!root) return;
  std::printf("summary: %lld particles x %lld steps in %.3f s of simulation time: %.4g particle-steps/s, %.4f ms/step "
              "(mean), %.4f ms/step (median)\n",
              static_cast<long long>(o.n), static_cast<long long>(o.steps), total_ms / 1e3,
              total_ms > 0 ? static_cast<double>(o.n) * static_cast<double>(o.steps) / (total_ms / 1e3) : 0.0, mean_ms,
              median_ms);
  std::printf("wrote %d frames (frame_NNNN.png) and diagnostics.csv to %s\n", frame_index, o.out.c_str());
}

}  // namespace

void add_sim_command(CLI::App& app) {
  CLI::App* sim = app.add_subcommand("sim", "simulations");
  sim->require_subcommand(1);
  CLI::App* cmd = sim->add_subcommand("particles", "discrete-element simulation of colliding spheres, with PNG renders");
  auto o = std::make_shared<SimOptions>();
  cmd->add_option("--n", o->n, "number of particles")->capture_default_str();
  cmd->add_option("--steps", o->steps, "time steps")->capture_default_str();
  cmd->add_option("--frames", o->frames, "PNG frames, evenly spaced from the first to the last step")->capture_default_str();
  cmd->add_option("--out", o->out, "output directory (created)")->required();
  cmd->add_option("--init", o->init, "initial state: gas, block or collision")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N (default: the GPU when there is one)");
  cmd->add_option("--dt", o->dt, "time step (s)")->capture_default_str();
  cmd->add_flag("--periodic", o->periodic, "periodic boundaries (turns the walls off)");
  cmd->add_flag("--no-walls", o->no_walls, "no box walls (a particle leaving the box is an error)");
  cmd->add_option("--friction", o->friction, "Coulomb friction coefficient (0: none)")->capture_default_str();
  cmd->add_option("--model", o->model, "contact model: linear or hertz")->capture_default_str();
  cmd->add_option("--radius", o->radius, "particle radius")->capture_default_str();
  cmd->add_option("--polydispersity", o->polydispersity, "radii uniform in radius * [1 - p, 1 + p]")->capture_default_str();
  cmd->add_option("--stiffness", o->stiffness, "normal contact stiffness")->capture_default_str();
  cmd->add_option("--damping", o->damping, "normal damping ratio in [0, 1)")->capture_default_str();
  CLI::Option* gravity = cmd->add_option("--gravity", o->gravity, "gravity along z (m/s^2)")->capture_default_str();
  cmd->add_option("--speed", o->speed, "gas: velocities in [-speed, speed]; collision: approach speed")->capture_default_str();
  cmd->add_option("--box", o->box, "box side length")->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--csv-every", o->csv_every, "steps between CSV rows (each row reads diagnostics back)")->capture_default_str();
  cmd->add_option("--image-width", o->image_width, "PNG width in pixels")->capture_default_str();
  cmd->add_option("--rebalance-every", o->rebalance_every,
                  "under mpirun with several ranks: move the slab bounds to balance the particle counts every this "
                  "many steps (0: fixed slabs)")
      ->capture_default_str();
  cmd->callback([o, gravity] {
    SimOptions options = *o;
    options.gravity_given = gravity->count() > 0;
    run(options);
  });
}

}  // namespace tessel::cli
