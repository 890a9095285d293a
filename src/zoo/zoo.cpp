// Names of the zoo's enums, where the data lives, and the per-process cache
// of loaded graphs.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

#include "zoo/data_dir.h"
#include "zoo/seq_len.h"

// Set by CMakeLists.txt on this file only (other objects then do not depend on
// where the tree is checked out, so ccache shares them between checkouts).
#ifndef GPEMU_DEFAULT_DATA_DIR
#define GPEMU_DEFAULT_DATA_DIR "."
#endif
#ifndef GPEMU_INSTALL_DATA_DIR
#define GPEMU_INSTALL_DATA_DIR ""
#endif
#ifndef GPEMU_DATA_DIR_FROM_MODULE
#define GPEMU_DATA_DIR_FROM_MODULE "../../../share/gpemu"
#endif
#ifndef GPEMU_DATA_DIR_FROM_BIN
#define GPEMU_DATA_DIR_FROM_BIN "../share/gpemu"
#endif

namespace gpemu::zoo {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

}  // namespace

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "?";
}

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::Conv: return "conv";
    case OpClass::Conv3d: return "conv3d";
    case OpClass::Matmul: return "matmul";
    case OpClass::Norm: return "norm";
    case OpClass::Pooling: return "pooling";
    case OpClass::Softmax: return "softmax";
    case OpClass::Reduction: return "reduction";
    case OpClass::Embedding: return "embedding";
    case OpClass::Elementwise: return "elementwise";
    case OpClass::Copy: return "copy";
    case OpClass::View: return "view";
    case OpClass::Optimizer: return "optimizer";
    case OpClass::Other: return "other";
  }
  return "?";
}

std::string_view to_string(Role r) {
  switch (r) {
    case Role::Param: return "param";
    case Role::Buffer: return "buffer";
    case Role::Input: return "input";
    case Role::State: return "state";
    case Role::Grad: return "grad";
    case Role::Act: return "act";
    case Role::External: return "external";
  }
  return "?";
}

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::AMP_FP16: return "amp";
    case Precision::AMP_BF16: return "bf16";
    case Precision::HALF_FP16: return "half";
    case Precision::HALF_BF16: return "half_bf16";
  }
  return "?";
}

std::string_view to_string(Optimizer o) { return o == Optimizer::SGD ? "sgd" : "adam"; }

Precision parse_precision(std::string_view text) {
  const std::string s = lower(text);
  if (s == "fp32" || s == "float32") return Precision::FP32;
  if (s == "amp" || s == "fp16" || s == "amp_fp16" || s == "amp-fp16") return Precision::AMP_FP16;
  if (s == "bf16" || s == "amp_bf16" || s == "amp-bf16") return Precision::AMP_BF16;
  throw InputError(fmt::format("unknown precision '{}': expected fp32, amp (FP16 autocast) or bf16", text));
}

Optimizer parse_optimizer(std::string_view text) {
  const std::string s = lower(text);
  if (s == "sgd") return Optimizer::SGD;
  if (s == "adam") return Optimizer::Adam;
  throw InputError(fmt::format("unknown optimizer '{}': expected sgd or adam", text));
}

std::optional<OpClass> parse_op_class(std::string_view text) {
  for (int i = 0; i <= static_cast<int>(OpClass::Other); ++i)
    if (to_string(static_cast<OpClass>(i)) == text) return static_cast<OpClass>(i);
  return std::nullopt;
}

std::filesystem::path resolve_data_dir(const DataDirCandidates& c) {
  namespace fs = std::filesystem;
  if (!c.env.empty()) return fs::path(c.env);
  auto holds_data = [](const fs::path& dir) {
    std::error_code ec;
    return !dir.empty() && fs::is_directory(dir / "zoo", ec);
  };
  if (!c.executable.empty()) {
    const fs::path beside = (c.executable.parent_path() / c.from_executable).lexically_normal();
    if (holds_data(beside)) return beside;
  }
  if (!c.module.empty()) {
    const fs::path beside = (c.module.parent_path() / c.from_module).lexically_normal();
    if (holds_data(beside)) return beside;
  }
  if (holds_data(c.installed)) return c.installed;
  return c.source;
}

std::filesystem::path data_dir() {
  // Without the variable the answer cannot change while the process runs.
  static const std::filesystem::path found = [] {
    DataDirCandidates c;
    std::error_code ec;
    c.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) c.executable.clear();
    c.from_executable = GPEMU_DATA_DIR_FROM_BIN;
    // The object this code is in: the program itself, or a shared object
    // such as the Python module.
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&data_dir), &info) && info.dli_fname) {
      const std::filesystem::path object = std::filesystem::weakly_canonical(info.dli_fname, ec);
      if (!ec && object != std::filesystem::weakly_canonical(c.executable, ec)) {
        c.module = object;
        c.from_module = GPEMU_DATA_DIR_FROM_MODULE;
      }
    }
    c.installed = GPEMU_INSTALL_DATA_DIR;
    c.source = GPEMU_DEFAULT_DATA_DIR;
    return resolve_data_dir(c);
  }();
  if (const char* env = std::getenv("GPEMU_DATA_DIR"); env && *env) {
    // A mistyped or moved data folder would otherwise turn every prediction
    // into an uncalibrated roofline estimate without a word.
    std::error_code ec;
    if (!std::filesystem::is_directory(env, ec))
      throw InputError(
          fmt::format("GPEMU_DATA_DIR '{}' is not a folder: it must name gpemu's data folder (holding "
                      "zoo/ and data/calibration.json); unset it to use {}",
                      env, found.string()));
    return std::filesystem::path(env);
  }
  return found;
}

std::filesystem::path zoo_dir() { return data_dir() / "zoo"; }

std::string canonical_name(std::string_view name) {
  std::string s = lower(name);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

std::vector<std::string> zoo_models() {
  std::vector<std::string> out;
  std::error_code ec;
  const auto dir = zoo_dir();
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool has_model(std::string_view name) {
  std::error_code ec;
  return std::filesystem::is_regular_file(zoo_dir() / (canonical_name(name) + ".json"), ec);
}

namespace {

struct Cache {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<ModelGraph>> graphs;  // by file path
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

const ModelGraph* find_model(std::string_view name) {
  const std::filesystem::path file = zoo_dir() / (canonical_name(name) + ".json");
  const std::string key = file.string();
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  if (auto it = c.graphs.find(key); it != c.graphs.end()) return it->second.get();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return nullptr;
  auto g = std::make_unique<ModelGraph>(ModelGraph::load(file));
  const ModelGraph* out = g.get();
  c.graphs.emplace(key, std::move(g));
  return out;
}

void check_seq_len_applies(std::string_view name, std::int64_t seq_len) {
  if (seq_len <= 0) return;
  const ModelGraph* g = find_model(name);
  if (g && !g->has_seq_len())
    throw InputError(
        fmt::format("--seq-len {}: {} has no sequence dimension; give --seq-len only for sequence "
                    "models (gpemu models lists their default_seq_len)",
                    seq_len, g->name()));
}

const ModelGraph& load_model(std::string_view name) {
  if (const ModelGraph* g = find_model(name)) return *g;
  const auto known = zoo_models();
  if (known.empty())
    throw InputError(
        fmt::format("unknown model '{}': the model zoo {} holds no models (set GPEMU_DATA_DIR to the "
                    "folder that holds zoo/)",
                    name, zoo_dir().string()));
  throw InputError(fmt::format("unknown model '{}': the model zoo has {}", name, join(known)));
}

}  // namespace gpemu::zoo
