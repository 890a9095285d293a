#include "gpemu/train/datasets.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/error.h"

namespace gpemu::train {
namespace {

constexpr const char* kMarker = "gpemu-dataset.json";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::filesystem::path cache_dir() {
  if (auto v = env("GPEMU_CACHE_DIR"); !v.empty()) return v;
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return std::filesystem::path(v) / "gpemu";
  if (auto v = env("HOME"); !v.empty()) return std::filesystem::path(v) / ".cache" / "gpemu";
  throw InputError("no cache folder: set GPEMU_CACHE_DIR (or XDG_CACHE_HOME or HOME), or pass --data DIR");
}

SyntheticDatasetSpec default_dataset_spec() { return SyntheticDatasetSpec{}; }

std::string dataset_folder_name(const SyntheticDatasetSpec& s) {
  return fmt::format("imagenet-like-{}img-{}cls-{}kb-seed{}", s.images, s.classes,
                     static_cast<long long>(std::llround(s.median_kb)), s.seed);
}

EnsuredDataset ensure_synthetic_dataset(const std::filesystem::path& root, const SyntheticDatasetSpec& spec,
                                        const std::function<void(const std::string&)>& note) {
  namespace fs = std::filesystem;
  EnsuredDataset out;
  out.dir = root / dataset_folder_name(spec);
  std::error_code ec;
  if (fs::exists(out.dir / kMarker, ec)) return out;

  if (note)
    note(fmt::format("generating a synthetic ImageNet-like dataset ({} JPEGs, {} classes, median ~{} KB) in {} "
                     "(once; later runs reuse it)",
                     spec.images, spec.classes, spec.median_kb, out.dir.string()));
  fs::create_directories(root, ec);
  if (ec) throw InputError(fmt::format("cannot create cache folder '{}': {}", root.string(), ec.message()));
  const fs::path tmp = root / fmt::format(".{}.partial-{}", dataset_folder_name(spec), ::getpid());
  fs::remove_all(tmp, ec);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    out.summary = pipeline::generate_image_dataset(tmp, spec.classes, spec.images, spec.seed, spec.median_kb);
    nlohmann::json marker = {{"images", out.summary.images},
                             {"classes", spec.classes},
                             {"seed", spec.seed},
                             {"median_kb_target", spec.median_kb},
                             {"total_bytes", out.summary.total_bytes},
                             {"median_bytes", out.summary.median_bytes},
                             {"p90_bytes", out.summary.p90_bytes},
                             {"max_bytes", out.summary.max_bytes}};
    std::ofstream(tmp / kMarker) << marker.dump(2) << '\n';
    fs::remove_all(out.dir, ec);  // an incomplete folder from an older run
    fs::rename(tmp, out.dir);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.generated = true;
  return out;
}

}  // namespace gpemu::train
