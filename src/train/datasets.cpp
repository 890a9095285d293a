#include "gpemu/train.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/folder_lock.h"
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

namespace {

// What the marker promises, checked against the folder before reuse: the
// image count and their total size. A cache folder with images deleted,
// truncated or added is regenerated rather than trained on.
std::optional<std::string> cached_dataset_problem(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  nlohmann::json marker;
  try {
    std::ifstream in(dir / kMarker);
    marker = nlohmann::json::parse(in);
    (void)marker.at("images").get<std::uint64_t>();
    (void)marker.at("total_bytes").get<std::uint64_t>();
  } catch (const std::exception&) {
    return std::string("its marker file cannot be read");
  }
  std::uint64_t images = 0, bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".JPEG") {
      ++images;
      bytes += it->file_size(ec);
    }
  }
  if (ec) return fmt::format("it cannot be listed: {}", ec.message());
  const auto want_images = marker["images"].get<std::uint64_t>(),
             want_bytes = marker["total_bytes"].get<std::uint64_t>();
  if (images != want_images || bytes != want_bytes)
    return fmt::format("it holds {} images ({} bytes); its marker says {} ({} bytes)", images, bytes, want_images,
                       want_bytes);
  return std::nullopt;
}

// Staging folders of this dataset left by runs that were killed (SIGKILL, a
// crash): with the cache lock held, no live process is writing one.
void remove_stale_staging(const std::filesystem::path& root, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string prefix = "." + name + ".partial-";
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().filename().string().starts_with(prefix)) stale.push_back(e.path());
  for (const auto& p : stale) fs::remove_all(p, ec);
}

}  // namespace

EnsuredDataset ensure_synthetic_dataset(const std::filesystem::path& root, const SyntheticDatasetSpec& spec,
                                        const std::function<void(const std::string&)>& note) {
  namespace fs = std::filesystem;
  EnsuredDataset out;
  const std::string name = dataset_folder_name(spec);
  out.dir = root / name;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw InputError(fmt::format("cannot create cache folder '{}': {}", root.string(), ec.message()));
  // One generator per cache: a second run waits, then finds the dataset made.
  const FolderLock lock(root, note);
  remove_stale_staging(root, name);
  if (fs::exists(out.dir / kMarker, ec)) {
    const auto problem = cached_dataset_problem(out.dir);
    if (!problem) return out;
    if (note)
      note(fmt::format("the cached dataset {} is damaged ({}); generating it again", out.dir.string(), *problem));
  }

  if (note)
    note(
        fmt::format("generating a synthetic ImageNet-like dataset ({} JPEGs, {} classes, median ~{} KB) in {} "
                    "(once; later runs reuse it)",
                    spec.images, spec.classes, spec.median_kb, out.dir.string()));
  const fs::path tmp = root / fmt::format(".{}.partial-{}", name, ::getpid());
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
    write_file_atomically(tmp / kMarker, marker.dump(2) + "\n", "dataset marker");
    // What is at out.dir now failed its check above or has no marker: a
    // damaged or half-made folder of gpemu's own cache.
    fs::remove_all(out.dir, ec);
    fs::rename(tmp, out.dir, ec);
    if (ec)
      throw InputError(fmt::format("cannot move the generated dataset to '{}': {}", out.dir.string(), ec.message()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.generated = true;
  return out;
}

}  // namespace gpemu::train
