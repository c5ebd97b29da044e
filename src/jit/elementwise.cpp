// Elementwise source generation and expression lowering (backend-neutral: runs without a GPU).
#include "tessel/jit/elementwise.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "jit/elementwise_host.hpp"
#include "jit/embedded_headers.hpp"
#include "tessel/core/error.hpp"

namespace tessel::jit {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool is_half(DType d) { return d == DType::float16 || d == DType::bfloat16; }

// The type of a body variable.
std::string var_type(DType d, bool widen_half) {
  if (widen_half && is_half(d)) return "float";
  return cuda_type_name(d);
}

void check_tuning(const ElementwiseTuning& t);

void validate(const ElementwiseSpec& spec) {
  const std::string where = "elementwise kernel '" + spec.name + "'";
  if (!is_identifier(spec.name)) throw ValueError(where + ": the name must be a C identifier");
  std::set<std::string> names;
  int outputs = 0;
  for (const auto& op : spec.operands) {
    if (!is_identifier(op.name)) throw ValueError(where + ": operand name '" + op.name + "' is not an identifier");
    if (!names.insert(op.name).second) throw ValueError(where + ": operand '" + op.name + "' appears twice");
    // Names the generated kernel itself declares around the body.
    static const std::set<std::string> reserved = {"n", "aligned", "dims", "count", "step", "start", "done",
                                                   "nvec", "v", "u", "k", "i", "rest", "index_t"};
    if (reserved.count(op.name)) {
      throw ValueError(where + ": operand name '" + op.name + "' is reserved by the generated kernel");
    }
    if (op.is_output && op.is_scalar) throw ValueError(where + ": output '" + op.name + "' cannot be a scalar");
    if (op.is_pointer && op.is_scalar) throw ValueError(where + ": pointer operand '" + op.name + "' cannot be a scalar");
    if (op.is_uniform && (op.is_output || op.is_scalar || op.is_pointer)) {
      throw ValueError(where + ": uniform operand '" + op.name + "' must be an array input");
    }
    if (op.is_uniform && spec.layout != ElementwiseLayout::contiguous) {
      throw ValueError(where + ": uniform operand '" + op.name + "' needs the contiguous layout");
    }
    outputs += op.is_output || op.is_pointer ? 1 : 0;
  }
  if (outputs == 0) throw ValueError(where + ": needs at least one output or pointer operand");
  if (spec.layout == ElementwiseLayout::strided && (spec.rank < 1 || spec.rank > kMaxElementwiseRank)) {
    throw ValueError(where + ": rank " + std::to_string(spec.rank) + " outside [1, " +
                     std::to_string(kMaxElementwiseRank) + "]");
  }
  if (spec.unroll < 1 || spec.unroll > kMaxElementwiseUnroll) {
    throw ValueError(where + ": unroll " + std::to_string(spec.unroll) + " outside [1, " +
                     std::to_string(kMaxElementwiseUnroll) + "]");
  }
  const ElementwiseSpec::OwnTuning& own = spec.own_tuning;
  if (own.block < 0 || own.unroll < 0 || own.waves < 0) {
    throw ValueError(where + ": negative own_tuning field");
  }
  check_tuning(tuning_for(spec, ElementwiseTuning{}));  // the fields it sets, checked in their ranges
}

ElementwiseTuning tuning_from_env() {
  ElementwiseTuning t;
  const char* env = std::getenv("TESSEL_EW_TUNING");
  if (!env || !*env) return t;
  int block = 0, unroll = 0, waves = 0;
  if (std::sscanf(env, "%d,%d,%d", &block, &unroll, &waves) != 3) {
    throw ValueError(std::string("TESSEL_EW_TUNING: expected \"block,unroll,waves\", got \"") + env + "\"");
  }
  return {block, unroll, waves};
}

void check_tuning(const ElementwiseTuning& t) {
  if (t.block < 32 || t.block > 1024 || t.block % 32 != 0) {
    throw ValueError("elementwise tuning: block " + std::to_string(t.block) + " is not a multiple of 32 in [32, 1024]");
  }
  if (t.unroll < 1 || t.unroll > kMaxElementwiseUnroll) {
    throw ValueError("elementwise tuning: unroll " + std::to_string(t.unroll) + " outside [1, " +
                     std::to_string(kMaxElementwiseUnroll) + "]");
  }
  // At most 64 waves keeps the threads in flight (the grid-stride step) under 2^26 on any current
  // GPU, the margin the 32-bit index bound leaves.
  if (t.waves < 1 || t.waves > 64) throw ValueError("elementwise tuning: waves " + std::to_string(t.waves) + " outside [1, 64]");
}

// The tuning is read on every launch: one atomic word (block | unroll << 16 | waves << 32; the
// checked ranges fit 16 bits each), so a read is a load, not a mutex. The first read applies
// TESSEL_EW_TUNING (a bad value throws there, and again on the next read, as before).
std::uint64_t pack_tuning(const ElementwiseTuning& t) {
  return static_cast<std::uint64_t>(t.block) | (static_cast<std::uint64_t>(t.unroll) << 16) |
         (static_cast<std::uint64_t>(t.waves) << 32);
}
ElementwiseTuning unpack_tuning(std::uint64_t w) {
  ElementwiseTuning t;
  t.block = static_cast<int>(w & 0xffffu);
  t.unroll = static_cast<int>((w >> 16) & 0xffffu);
  t.waves = static_cast<int>((w >> 32) & 0xffffu);
  return t;
}
std::atomic<std::uint64_t>& current_tuning() {
  static std::atomic<std::uint64_t> word{[] {
    ElementwiseTuning from_env = tuning_from_env();
    check_tuning(from_env);
    return pack_tuning(from_env);
  }()};
  return word;
}

// The statements for one element: declare variables, run the body, store outputs. `load(op)` and
// `place(op)` give the expressions that read / name the operand's memory.
// `address(op)` gives the address of a pointer operand's element.
template <class Load, class Place, class Address>
void emit_element(std::ostringstream& s, const ElementwiseSpec& spec, const std::string& indent, Load load,
                  Place place, Address address) {
  const auto read = [&](const std::string& raw) { return spec.widen_half ? "tessel::widen(" + raw + ")" : raw; };
  for (const auto& op : spec.operands) {
    const std::string type = var_type(op.dtype, spec.widen_half);
    if (op.is_pointer) {
      s << indent << (op.is_output ? "" : "const ") << cuda_type_name(op.dtype) << "* const " << op.name << " = "
        << address(op) << ";\n";
    } else if (!op.is_output) {
      const std::string raw = op.is_scalar ? "v_" + op.name : op.is_uniform ? "b_" + op.name : load(op);
      s << indent << type << " " << op.name << " = " << read(raw) << ";\n";
    } else if (body_reads(spec.body, op.name)) {
      s << indent << type << " " << op.name << " = " << read(load(op)) << ";\n";
    } else {
      s << indent << type << " " << op.name << ";\n";
    }
  }
  s << indent << "{\n" << indent << "  " << spec.body << "\n" << indent << "}\n";
  for (const auto& op : spec.operands) {
    if (op.is_output && !op.is_pointer) {
      s << indent << place(op) << " = tessel::cast<" << cuda_type_name(op.dtype) << ">(" << op.name << ");\n";
    }
  }
}

void emit_params(std::ostringstream& s, const ElementwiseSpec& spec, bool strided) {
  for (const auto& op : spec.operands) {
    const std::string type = cuda_type_name(op.dtype);
    s << ",\n    ";
    if (op.is_scalar) {
      s << type << " v_" << op.name;
    } else {
      s << (op.is_output ? "" : "const ") << type << "* p_" << op.name;
      if (strided) s << ", tessel::Strides<" << spec.rank << "> s_" << op.name;
    }
  }
}

}  // namespace

namespace {
// Whether the mention of a name at `at` begins a statement of the body's top level: no enclosing
// braces, and nothing but blanks since the previous statement (`if (m) x = v;` and `else x = v;`
// are conditional, so they do not count).
bool starts_top_level_statement(const std::string& body, std::size_t at) {
  int depth = 0;
  for (std::size_t k = 0; k < at; ++k) depth += body[k] == '{' ? 1 : body[k] == '}' ? -1 : 0;
  if (depth != 0) return false;
  std::size_t k = at;
  while (k > 0 && std::isspace(static_cast<unsigned char>(body[k - 1]))) --k;
  return k == 0 || body[k - 1] == ';' || body[k - 1] == '{' || body[k - 1] == '}';
}
}  // namespace

bool body_reads(const std::string& body, const std::string& name) {
  bool assigned = false;
  std::size_t at = 0;
  while ((at = body.find(name, at)) != std::string::npos) {
    const std::size_t end = at + name.size();
    const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(body[at - 1])) || body[at - 1] == '_' ||
                                     body[at - 1] == '.');
    const bool ends = end >= body.size() || !(std::isalnum(static_cast<unsigned char>(body[end])) || body[end] == '_');
    if (starts && ends) {
      std::size_t next = end;
      while (next < body.size() && std::isspace(static_cast<unsigned char>(body[next]))) ++next;
      const bool plain_assign = next < body.size() && body[next] == '=' && (next + 1 >= body.size() || body[next + 1] != '=');
      if (!plain_assign) return true;
      assigned = assigned || starts_top_level_statement(body, at);
    }
    at = end;
  }
  // Never assigned unconditionally: the elements the body skips keep their value.
  return !assigned;
}

int vector_width(const ElementwiseSpec& spec) {
  std::int64_t widest = 1;
  for (const auto& op : spec.operands) {
    if (!op.is_scalar && !op.is_pointer) widest = std::max(widest, itemsize(op.dtype));
  }
  return static_cast<int>(std::max<std::int64_t>(1, 16 / widest));
}

ElementwiseTuning elementwise_tuning() { return unpack_tuning(current_tuning().load(std::memory_order_acquire)); }

ElementwiseTuning tuning_for(const ElementwiseSpec& spec, ElementwiseTuning tuning) {
  if (spec.own_tuning.block != 0) tuning.block = spec.own_tuning.block;
  if (spec.own_tuning.unroll != 0) tuning.unroll = spec.own_tuning.unroll;
  if (spec.own_tuning.waves != 0) tuning.waves = spec.own_tuning.waves;
  return tuning;
}

void set_elementwise_tuning(const ElementwiseTuning& tuning) {
  check_tuning(tuning);
  current_tuning().store(pack_tuning(tuning), std::memory_order_release);
}

std::int64_t elementwise_threads(std::int64_t n, bool contiguous_aligned, int vec, int unroll) {
  if (!contiguous_aligned || vec <= 1) return n;
  const std::int64_t per_thread = static_cast<std::int64_t>(vec) * unroll;
  return (n + per_thread - 1) / per_thread;
}

std::string elementwise_kernel_name(const ElementwiseSpec& spec) {
  std::string n = spec.name;
  n += spec.layout == ElementwiseLayout::contiguous ? "_c" : "_s" + std::to_string(spec.rank);
  if (spec.layout == ElementwiseLayout::contiguous) {
    for (std::size_t k = 0; k < spec.operands.size(); ++k) {
      if (spec.operands[k].is_uniform) n += "_b" + std::to_string(k);
    }
  }
  if (spec.index32) n += "_i32";
  if (spec.layout == ElementwiseLayout::contiguous && spec.unroll > 1 && vector_width(spec) > 1) {
    n += "_u" + std::to_string(spec.unroll);
  }
  if (spec.layout == ElementwiseLayout::contiguous && spec.streaming && vector_width(spec) > 1) n += "_cs";
  return n;
}

std::string generate_elementwise_source(const ElementwiseSpec& spec) {
  validate(spec);
  const bool strided = spec.layout == ElementwiseLayout::strided;
  const std::string index_t = spec.index32 ? "int" : "long long";
  std::ostringstream s;
  s << "// Generated by tessel: elementwise kernel '" << spec.name << "', "
    << (strided ? "strided rank " + std::to_string(spec.rank) : std::string("contiguous")) << ", "
    << (spec.index32 ? "32" : "64") << "-bit index.\n";
  s << "#include \"tessel_device.cuh\"\n";
  if (!spec.preamble.empty()) s << spec.preamble << "\n";
  s << "\nextern \"C\" __global__ void " << elementwise_kernel_name(spec) << "(long long n";
  if (strided) {
    s << ", tessel::Dims<" << spec.rank << "> dims";
  } else {
    s << ", int aligned";
  }
  emit_params(s, spec, strided);
  s << ") {\n";
  s << "  typedef " << index_t << " index_t;\n";
  s << "  const index_t count = static_cast<index_t>(n);\n";
  s << "  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;\n";
  s << "  const index_t start = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n";

  if (!strided) {
    const int vec = vector_width(spec);
    const std::string load_vec = spec.streaming ? "tessel::load_vec_stream<" : "tessel::load_vec<";
    const std::string store_vec = spec.streaming ? "tessel::store_vec_stream<" : "tessel::store_vec<";
    s << "  index_t done = 0;\n";
    for (const auto& op : spec.operands) {
      if (op.is_uniform) s << "  const " << cuda_type_name(op.dtype) << " b_" << op.name << " = *p_" << op.name << ";\n";
    }
    if (vec > 1) {
      const int u_count = spec.unroll;
      s << "  if (aligned) {\n";
      s << "    // 16-byte accesses of the widest operand; narrower operands move vec elements too.\n";
      s << "    const index_t nvec = count / " << vec << ";\n";
      s << "    index_t v = start;\n";
      if (u_count > 1) {
        // Every thread issues all its loads (u_count vectors per input, a warp's accesses
        // contiguous for each u) before computing: several independent 16-byte loads in flight.
        s << "    for (; v + " << (u_count - 1) << " * step < nvec; v += " << u_count << " * step) {\n";
        for (const auto& op : spec.operands) {
          if (op.is_scalar || op.is_pointer || op.is_uniform) continue;
          const bool load = !op.is_output || body_reads(spec.body, op.name);
          s << "      tessel::vec<" << cuda_type_name(op.dtype) << ", " << vec << "> x_" << op.name << "[" << u_count << "];\n";
          if (load) {
            s << "#pragma unroll\n";
            s << "      for (int u = 0; u < " << u_count << "; ++u) x_" << op.name << "[u] = " << load_vec << vec
              << ">(p_" << op.name << " + (v + u * step) * " << vec << ");\n";
          }
        }
        s << "#pragma unroll\n";
        s << "      for (int u = 0; u < " << u_count << "; ++u) {\n";
        s << "#pragma unroll\n";
        s << "        for (int k = 0; k < " << vec << "; ++k) {\n";
        emit_element(
            s, spec, "          ", [](const ElementwiseOperand& op) { return "x_" + op.name + "[u].v[k]"; },
            [](const ElementwiseOperand& op) { return "x_" + op.name + "[u].v[k]"; },
            [&](const ElementwiseOperand& op) {
              return "p_" + op.name + " + (v + u * step) * " + std::to_string(vec) + " + k";
            });
        s << "        }\n";
        s << "      }\n";
        for (const auto& op : spec.operands) {
          if (!op.is_output || op.is_pointer) continue;
          s << "#pragma unroll\n";
          s << "      for (int u = 0; u < " << u_count << "; ++u) " << store_vec << vec << ">(p_" << op.name
            << " + (v + u * step) * " << vec << ", x_" << op.name << "[u]);\n";
        }
        s << "    }\n";
      }
      s << "    for (; v < nvec; v += step) {\n";
      for (const auto& op : spec.operands) {
        if (op.is_scalar || op.is_pointer || op.is_uniform) continue;
        const bool load = !op.is_output || body_reads(spec.body, op.name);
        s << "      tessel::vec<" << cuda_type_name(op.dtype) << ", " << vec << "> x_" << op.name;
        if (load) s << " = " << load_vec << vec << ">(p_" << op.name << " + v * " << vec << ")";
        s << ";\n";
      }
      s << "#pragma unroll\n";
      s << "      for (int k = 0; k < " << vec << "; ++k) {\n";
      emit_element(
          s, spec, "        ", [](const ElementwiseOperand& op) { return "x_" + op.name + ".v[k]"; },
          [](const ElementwiseOperand& op) { return "x_" + op.name + ".v[k]"; },
          [&](const ElementwiseOperand& op) { return "p_" + op.name + " + v * " + std::to_string(vec) + " + k"; });
      s << "      }\n";
      for (const auto& op : spec.operands) {
        if (op.is_output && !op.is_pointer) {
          s << "      " << store_vec << vec << ">(p_" << op.name << " + v * " << vec << ", x_" << op.name << ");\n";
        }
      }
      s << "    }\n";
      s << "    done = nvec * " << vec << ";\n";
      s << "  }\n";
    } else {
      s << "  (void)aligned;\n";
    }
    s << "  for (index_t i = done + start; i < count; i += step) {\n";
    emit_element(
        s, spec, "    ", [](const ElementwiseOperand& op) { return "p_" + op.name + "[i]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + "[i]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + " + i"; });
    s << "  }\n";
  } else {
    const int r = spec.rank;
    s << "  for (index_t i = start; i < count; i += step) {\n";
    s << "    // Coordinates from the linear index, innermost dimension fastest.\n";
    s << "    index_t rest = i;\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "    index_t o_" << op.name << " = 0;\n";
    }
    if (r > 1) {
      s << "#pragma unroll\n";
      s << "    for (int d = " << r - 1 << "; d >= 1; --d) {\n";
      s << "      const index_t size = static_cast<index_t>(dims.size[d]);\n";
      s << "      const index_t c = rest % size;\n";
      s << "      rest /= size;\n";
      for (const auto& op : spec.operands) {
        if (!op.is_scalar) s << "      o_" << op.name << " += c * static_cast<index_t>(s_" << op.name << ".stride[d]);\n";
      }
      s << "    }\n";
    }
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "    o_" << op.name << " += rest * static_cast<index_t>(s_" << op.name << ".stride[0]);\n";
    }
    emit_element(
        s, spec, "    ", [](const ElementwiseOperand& op) { return "p_" + op.name + "[o_" + op.name + "]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + "[o_" + op.name + "]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + " + o_" + op.name; });
    s << "  }\n";
  }
  s << "}\n";
  return s.str();
}

// ---- host C++ (the CPU backend) ---------------------------------------------------------------

namespace detail {

const std::string& host_prelude() {
  static const std::string* text = [] {
    std::size_t count = 0;
    const EmbeddedHeader* headers = embedded_host_headers(&count);
    auto* t = new std::string(count > 0 ? std::string(headers[0].source, headers[0].size) : std::string());
    // Pasted into the main file, where GCC warns about "#pragma once".
    const std::size_t at = t->find("#pragma once\n");
    if (at != std::string::npos) t->erase(at, 13);
    return t;
  }();
  return *text;
}

namespace {
ElementwiseSpec host_variant(const ElementwiseSpec& spec) {
  ElementwiseSpec v = spec;
  v.index32 = false;
  v.unroll = 1;
  v.streaming = false;
  return v;
}
}  // namespace

std::string elementwise_host_symbol(const ElementwiseSpec& spec) {
  return elementwise_kernel_name(host_variant(spec)) + "_host";
}

std::string generate_elementwise_host_source(const ElementwiseSpec& in) {
  const ElementwiseSpec spec = host_variant(in);
  validate(spec);
  const bool strided = spec.layout == ElementwiseLayout::strided;
  const int r = spec.rank;
  std::ostringstream s;
  s << "// Generated by tessel: elementwise kernel '" << spec.name << "', host C++, "
    << (strided ? "strided rank " + std::to_string(r) : std::string("contiguous")) << ".\n";
  s << host_prelude() << "\n#include <omp.h>\n";
  if (!spec.preamble.empty()) s << spec.preamble << "\n";
  s << "\nextern \"C\" int " << elementwise_host_symbol(spec) << "(TsHostLaunch* ts_launch, void** ts_params) {\n";
  s << "  const long long n = *static_cast<const long long*>(ts_params[0]);\n";
  if (strided) {
    s << "  const long long* const dims = static_cast<const long long*>(ts_params[1]);\n";
  } else {
    s << "  // ts_params[1]: the CUDA kernel's alignment flag, unused here.\n";
  }
  int p = 2;
  for (const auto& op : spec.operands) {
    const std::string type = cuda_type_name(op.dtype);
    if (op.is_scalar) {
      s << "  const " << type << " v_" << op.name << " = *static_cast<const " << type << "*>(ts_params[" << p++
        << "]);\n";
      continue;
    }
    const std::string pointer = (op.is_output ? "" : "const ") + type + "*";
    s << "  " << pointer << " const p_" << op.name << " = *static_cast<" << pointer << " const*>(ts_params[" << p++
      << "]);\n";
    if (strided) {
      s << "  const long long* const s_" << op.name << " = static_cast<const long long*>(ts_params[" << p++ << "]);\n";
    }
  }
  s << "  if (n <= 0) return 0;\n";
  for (const auto& op : spec.operands) {
    if (op.is_uniform) s << "  const " << cuda_type_name(op.dtype) << " b_" << op.name << " = *p_" << op.name << ";\n";
  }
  s << "  const int ts_threads = ts_launch->num_threads > 0 ? ts_launch->num_threads : omp_get_max_threads();\n";
  const std::string parallel = "#pragma omp parallel for schedule(static) num_threads(ts_threads) if (n >= " +
                               std::to_string(kHostParallelThreshold) + ")\n";
  if (!strided) {
    s << parallel;
    s << "  for (long long i = 0; i < n; ++i) {\n";
    emit_element(
        s, spec, "    ", [](const ElementwiseOperand& op) { return "p_" + op.name + "[i]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + "[i]"; },
        [](const ElementwiseOperand& op) { return "p_" + op.name + " + i"; });
    s << "  }\n";
  } else {
    // Blocks of the linear index, each split into runs along the innermost dimension: one
    // division per block (its first coordinates), then offsets step through the strides.
    const std::string last = std::to_string(r - 1);
    s << "  const long long ts_inner = dims[" << last << "];\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "  const long long ts_step_" << op.name << " = s_" << op.name << "[" << last << "];\n";
    }
    s << "  const long long ts_block = 4096;\n";
    s << "  const long long ts_blocks = (n + ts_block - 1) / ts_block;\n";
    s << parallel;
    s << "  for (long long ts_b = 0; ts_b < ts_blocks; ++ts_b) {\n";
    s << "    long long i = ts_b * ts_block;\n";
    s << "    const long long ts_end = n - i < ts_block ? n : i + ts_block;\n";
    s << "    long long ts_c[" << r << "];\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "    long long o_" << op.name << " = 0;\n";
    }
    s << "    long long rest = i;\n";
    s << "    for (int ts_d = " << last << "; ts_d >= 0; --ts_d) {\n";
    s << "      ts_c[ts_d] = rest % dims[ts_d];\n";
    s << "      rest /= dims[ts_d];\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "      o_" << op.name << " += ts_c[ts_d] * s_" << op.name << "[ts_d];\n";
    }
    s << "    }\n";
    s << "    for (;;) {\n";
    s << "      const long long ts_run = ts_end - i < ts_inner - ts_c[" << last << "] ? ts_end - i : ts_inner - ts_c["
      << last << "];\n";
    s << "      for (long long k = 0; k < ts_run; ++k) {\n";
    const auto at = [](const ElementwiseOperand& op) { return "o_" + op.name + " + k * ts_step_" + op.name; };
    emit_element(
        s, spec, "        ", [&](const ElementwiseOperand& op) { return "p_" + op.name + "[" + at(op) + "]"; },
        [&](const ElementwiseOperand& op) { return "p_" + op.name + "[" + at(op) + "]"; },
        [&](const ElementwiseOperand& op) { return "p_" + op.name + " + (" + at(op) + ")"; });
    s << "      }\n";
    s << "      i += ts_run;\n";
    s << "      if (i >= ts_end) break;\n";
    s << "      // The innermost coordinate reached its extent: back to 0, and carry outwards.\n";
    s << "      ts_c[" << last << "] = 0;\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "      o_" << op.name << " += (ts_run - ts_inner) * ts_step_" << op.name << ";\n";
    }
    s << "      for (int ts_d = " << r - 2 << "; ts_d >= 0; --ts_d) {\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "        o_" << op.name << " += s_" << op.name << "[ts_d];\n";
    }
    s << "        if (++ts_c[ts_d] < dims[ts_d]) break;\n";
    s << "        ts_c[ts_d] = 0;\n";
    for (const auto& op : spec.operands) {
      if (!op.is_scalar) s << "        o_" << op.name << " -= dims[ts_d] * s_" << op.name << "[ts_d];\n";
    }
    s << "      }\n";
    s << "    }\n";
    s << "  }\n";
  }
  s << "  return 0;\n";
  s << "}\n";
  return s.str();
}

}  // namespace detail

// ---- expressions -------------------------------------------------------------------------------

struct Expr::Node {
  enum class Kind { input, literal, call, format, cast } kind;
  DType dtype;
  int index = 0;
  std::string text;  // literal code, function name or format
  std::vector<Expr> args;
};

Expr Expr::input(int index, DType dtype) {
  Node n{Node::Kind::input, dtype, index, "", {}};
  Expr e;
  e.node_ = std::make_shared<const Node>(std::move(n));
  return e;
}
Expr Expr::literal(std::string code, DType dtype) {
  Expr e;
  e.node_ = std::make_shared<const Node>(Node{Node::Kind::literal, dtype, 0, std::move(code), {}});
  return e;
}
Expr Expr::call(std::string fn, std::vector<Expr> args, DType dtype) {
  Expr e;
  e.node_ = std::make_shared<const Node>(Node{Node::Kind::call, dtype, 0, std::move(fn), std::move(args)});
  return e;
}
Expr Expr::format(std::string pattern, std::vector<Expr> args, DType dtype) {
  Expr e;
  e.node_ = std::make_shared<const Node>(Node{Node::Kind::format, dtype, 0, std::move(pattern), std::move(args)});
  return e;
}
Expr Expr::cast(Expr value, DType dtype) {
  Expr e;
  e.node_ = std::make_shared<const Node>(Node{Node::Kind::cast, dtype, 0, "", {std::move(value)}});
  return e;
}
DType Expr::dtype() const {
  if (!node_) throw ValueError("jit::Expr: undefined expression");
  return node_->dtype;
}

namespace {

// Emits each node once (shared subtrees are computed once) as "const T tN = ...;".
class Lowering {
 public:
  Lowering(const std::vector<DType>& inputs) : inputs_(inputs) {}

  std::string emit(const Expr& e) {
    const Expr::Node* n = e.node();
    if (!n) throw ValueError("jit::lower_expressions: undefined expression");
    auto it = names_.find(n);
    if (it != names_.end()) return it->second;
    std::string code;
    switch (n->kind) {
      case Expr::Node::Kind::input:
        if (n->index < 0 || n->index >= static_cast<int>(inputs_.size())) {
          throw ValueError("jit::lower_expressions: input " + std::to_string(n->index) + " out of range (" +
                           std::to_string(inputs_.size()) + " inputs)");
        }
        if (inputs_[static_cast<std::size_t>(n->index)] != n->dtype) {
          throw DTypeError("jit::lower_expressions: input " + std::to_string(n->index) + " is " +
                           dtype_name(inputs_[static_cast<std::size_t>(n->index)]) + ", the expression says " +
                           dtype_name(n->dtype));
        }
        return names_[n] = "in" + std::to_string(n->index);  // already a variable
      case Expr::Node::Kind::literal:
        code = n->text;
        break;
      case Expr::Node::Kind::call: {
        code = n->text + "(";
        for (std::size_t i = 0; i < n->args.size(); ++i) code += (i ? ", " : "") + emit(n->args[i]);
        code += ")";
        break;
      }
      case Expr::Node::Kind::format: {
        std::vector<std::string> args;
        for (const Expr& a : n->args) args.push_back(emit(a));
        for (std::size_t i = 0; i < n->text.size(); ++i) {
          if (n->text[i] == '{') {
            const std::size_t close = n->text.find('}', i);
            if (close == std::string::npos) throw ValueError("jit::Expr::format: unclosed '{' in \"" + n->text + "\"");
            const int k = std::atoi(n->text.substr(i + 1, close - i - 1).c_str());
            if (k < 0 || k >= static_cast<int>(args.size())) {
              throw ValueError("jit::Expr::format: {" + std::to_string(k) + "} with " + std::to_string(args.size()) +
                               " arguments in \"" + n->text + "\"");
            }
            code += args[static_cast<std::size_t>(k)];
            i = close;
          } else {
            code += n->text[i];
          }
        }
        break;
      }
      case Expr::Node::Kind::cast: {
        const std::string arg = emit(n->args[0]);
        // Round to the target dtype, then widen again if it is computed in float.
        code = "tessel::widen(tessel::cast<" + std::string(cuda_type_name(n->dtype)) + ">(" + arg + "))";
        break;
      }
    }
    const std::string name = "t" + std::to_string(count_++);
    body_ += "const " + var_type(n->dtype, true) + " " + name + " = " + code + ";\n  ";
    return names_[n] = name;
  }

  std::string body_;

 private:
  const std::vector<DType>& inputs_;
  std::unordered_map<const Expr::Node*, std::string> names_;
  int count_ = 0;
};

}  // namespace

ElementwiseSpec lower_expressions(const std::string& name, const std::vector<DType>& input_dtypes,
                                  const std::vector<bool>& input_is_scalar, const std::vector<Expr>& outputs,
                                  const std::vector<DType>& output_dtypes) {
  if (outputs.size() != output_dtypes.size()) {
    throw ValueError("jit::lower_expressions: " + std::to_string(outputs.size()) + " expressions but " +
                     std::to_string(output_dtypes.size()) + " output dtypes");
  }
  if (!input_is_scalar.empty() && input_is_scalar.size() != input_dtypes.size()) {
    throw ValueError("jit::lower_expressions: input_is_scalar must be empty or have one entry per input");
  }
  ElementwiseSpec spec;
  spec.name = name;
  spec.widen_half = true;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    spec.operands.push_back({"out" + std::to_string(j), output_dtypes[j], true, false});
  }
  for (std::size_t i = 0; i < input_dtypes.size(); ++i) {
    const bool scalar = !input_is_scalar.empty() && input_is_scalar[i];
    spec.operands.push_back({"in" + std::to_string(i), input_dtypes[i], false, scalar});
  }
  Lowering lowering(input_dtypes);
  std::string assigns;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const std::string value = lowering.emit(outputs[j]);
    assigns += "out" + std::to_string(j) + " = " + value + ";";
  }
  spec.body = lowering.body_ + assigns;
  return spec;
}

}  // namespace tessel::jit
