// DLIO runner, data side: where the dataset lives, generating it (with a
// manifest so that a second run skips it), opening it for reading, and the
// seeded draws of DLIO's time values.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/folder_lock.h"
#include "common/fs_errors.h"
#include "common/message_text.h"
#include "common/random.h"
#include "dlio/free_space.h"
#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"

namespace gpemu::dlio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestName = ".gpemu-dlio-dataset.json";
constexpr const char* kStagingName = ".gpemu-dlio-generating";

std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return common::splitmix64(a ^ (b * 0xD1B54A32D192ED03ull)); }

struct FormatInfo {
  pipeline::DlioFormat format;
  const char* extension;  // with the dot
};

std::string where_set(const DlioWorkload& w, const std::string& key) {
  auto it = w.set_keys.find(key);
  if (it != w.set_keys.end()) return it->second;
  return (w.source.empty() ? std::string("configuration") : w.source) + " (default)";
}

FormatInfo format_info(const DlioWorkload& w) {
  switch (w.dataset.format) {
    case DataFormat::Npz: return {pipeline::DlioFormat::Npz, ".npz"};
    case DataFormat::Npy: return {pipeline::DlioFormat::Npy, ".npy"};
    case DataFormat::IndexedBinary:
    case DataFormat::MmapIndexedBinary: return {pipeline::DlioFormat::Raw, ".bin"};
    case DataFormat::Jpeg: return {pipeline::DlioFormat::Jpeg, ".jpg"};
    case DataFormat::Tfrecord: return {pipeline::DlioFormat::Tfrecord, ".tfrecord"};
    default: break;
  }
  throw InputError(fmt::format(
      "{}: dataset.format = '{}' cannot be generated or read by gpemu's DLIO runner; accepted: npz, npy, "
      "indexed_binary, mmap_indexed_binary (raw records), jpeg, tfrecord{}",
      where_set(w, "dataset.format"), to_string(w.dataset.format),
      w.is_set("dataset.format") ? "" : " (the workload does not set dataset.format; DLIO's default is tfrecord)"));
}

struct SplitInfo {
  const char* name;  // "train" / "valid"
  std::uint64_t files;
  std::uint64_t subfolders;
  std::uint64_t seed;
};

// The most samples one split may have when its data is generated or read:
// the loader keeps a sample index per sample (pipeline's dataset limit).
// Parsing alone accepts more (DLIO's dlrm workload lists 4.8 billion).
constexpr std::uint64_t kMaxSamplesPerSplit = std::uint64_t{1} << 26;

SplitInfo split_info(const DlioWorkload& w, DlioSplit split) {
  const auto seed = static_cast<std::uint64_t>(w.train.seed);
  const bool train = split == DlioSplit::Train;
  SplitInfo s =
      train ? SplitInfo{"train", static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_files_train)),
                        static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_subfolders_train)), seed}
            : SplitInfo{"valid", static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_files_eval)),
                        static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_subfolders_eval)),
                        mix(seed, 0x5eed)};
  const double samples = static_cast<double>(s.files) * static_cast<double>(w.dataset.num_samples_per_file);
  if (samples > static_cast<double>(kMaxSamplesPerSplit)) {
    const std::string key = train ? "dataset.num_files_train" : "dataset.num_files_eval";
    throw InputError(
        fmt::format("{}: {} x dataset.num_samples_per_file = {} x {} = {:.4g} samples; gpemu generates and "
                    "reads at most {} samples per split",
                    where_set(w, key), key, s.files, w.dataset.num_samples_per_file, samples, kMaxSamplesPerSplit));
  }
  return s;
}

void make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("DLIO data: cannot create folder '{}': {}", dir.string(), ec.message()));
}

// The generation parameters a manifest records; a second generation with the
// same parameters is skipped.
nlohmann::json generation_params(const DlioWorkload& w, const SplitInfo& s) {
  return {{"split", s.name},
          {"format", std::string(to_string(w.dataset.format))},
          {"num_files", s.files},
          {"num_subfolders", s.subfolders},
          {"samples_per_file", w.dataset.num_samples_per_file},
          {"record_length_bytes", w.dataset.record_length_bytes},
          {"record_length_bytes_stdev", w.dataset.record_length_bytes_stdev},
          {"file_prefix", w.dataset.file_prefix},
          {"seed", s.seed}};
}

// A manifest path must name a file inside the split folder: relative, with no
// ".." and no "." step. Anything else was not written by gpemu, and acting on
// it (reading it as data, deleting it on regeneration) could reach any file.
bool confined(const std::string& rel) {
  const fs::path p(rel);
  if (rel.empty() || p.is_absolute() || p.has_root_name()) return false;
  for (const auto& part : p) {
    if (part == ".." || part == "." || part.empty()) return false;
  }
  return true;
}

struct Manifest {
  nlohmann::json params;
  std::vector<DlioDataFile> files;
};

// What reading a folder's manifest found: none (no file), a usable one, or one
// that is there but not usable (`problem` says why).
struct ManifestRead {
  std::optional<Manifest> manifest;
  std::string problem;
};

// The folder's manifest when it is well formed in every field, every path is
// confined to the folder and every file's records fit in it (at least one
// record of at least one byte: a "record_length": 0 read 0 bytes per step and
// reported an AU of 93 %, QA S5).
ManifestRead read_manifest(const fs::path& folder) {
  std::ifstream in(folder / kManifestName);
  if (!in) return {};
  ManifestRead r;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Manifest m;
    m.params = j.at("params");
    std::size_t index = 0;
    for (const auto& f : j.at("files")) {
      const auto rel = f.at("path").get<std::string>();
      if (!confined(rel)) {
        r.problem = fmt::format("file {} has the path {}, not a file inside the folder", index,
                                "'" + printable_excerpt(rel, 200) + "'");
        return r;
      }
      DlioDataFile d;
      d.path = folder / rel;
      d.bytes = f.at("bytes").get<std::uint64_t>();
      d.samples = f.at("samples").get<std::uint64_t>();
      d.record_length = f.at("record_length").get<std::uint64_t>();
      d.first_offset = f.at("first_offset").get<std::uint64_t>();
      std::uint64_t records_end = 0;
      const bool fits = !__builtin_mul_overflow(d.samples, d.record_length, &records_end) &&
                        !__builtin_add_overflow(records_end, d.first_offset, &records_end) && records_end <= d.bytes;
      if (d.samples == 0 || d.record_length == 0 || !fits) {
        r.problem = fmt::format(
            "file {} ({}) says {} records of {} bytes from byte {} in a file of {} bytes; accepted: at least one "
            "record of at least 1 byte, all inside the file",
            index, "'" + printable_excerpt(rel, 200) + "'", d.samples, d.record_length, d.first_offset, d.bytes);
        return r;
      }
      m.files.push_back(std::move(d));
      ++index;
    }
    r.manifest = std::move(m);
  } catch (const std::exception&) {  // not JSON, a missing key, a wrong type
    r.problem =
        "it is not JSON with gpemu's keys (params; files with path, bytes, samples, record_length and "
        "first_offset, numbers >= 0)";
  }
  return r;
}

bool files_present(const std::vector<DlioDataFile>& files) {
  for (const auto& f : files) {
    std::error_code ec;
    const auto size = fs::file_size(f.path, ec);
    if (ec || size != f.bytes) return false;
  }
  return true;
}

// dataset.file_prefix names files inside the data folder; a separator or a
// ".." would write (and a later regeneration delete) files elsewhere.
void check_file_prefix(const DlioWorkload& w) {
  const std::string& p = w.dataset.file_prefix;
  if (p.empty() || p == "." || p == ".." || p.find('/') != std::string::npos || p.find('\\') != std::string::npos ||
      p.find('\0') != std::string::npos) {
    throw InputError(
        fmt::format("{}: dataset.file_prefix = '{}' is not a file name; accepted: a non-empty name "
                    "without '/', '\\' or '..' (files are written inside dataset.data_folder)",
                    where_set(w, "dataset.file_prefix"), p));
  }
}

std::string file_name(const DlioWorkload& w, std::uint64_t i, std::uint64_t n, const char* ext) {
  const int width = static_cast<int>(std::to_string(n).size());
  return fmt::format("{}_{:0{}}_of_{}{}", w.dataset.file_prefix, i, width, n, ext);
}

// Per-file record length: normal(mean, stdev) truncated to mean +- 3 stdev and
// at least 1 byte (redrawn outside), rounded to whole bytes.
std::vector<std::uint64_t> record_lengths(const DlioWorkload& w, const SplitInfo& s) {
  const double mean = w.dataset.record_length_bytes;
  const double sd = w.dataset.record_length_bytes_stdev;
  std::vector<std::uint64_t> out(s.files);
  TimeSpec spec;
  spec.mean = mean;
  spec.stdev = sd;
  TimeSampler draw(spec, mix(s.seed, 0x1e27));
  const double lo = std::max(1.0, mean - 3 * sd), hi = std::max(lo, mean + 3 * sd);
  for (auto& l : out) {
    double v = mean;
    if (sd > 0) {
      for (int tries = 0; tries < 1000; ++tries) {
        v = draw.next_seconds();
        if (v >= lo && v <= hi) break;
      }
      v = std::clamp(v, lo, hi);
    }
    l = static_cast<std::uint64_t>(std::max(1.0, std::round(v)));
  }
  return out;
}

// Offset of the first record and record length of a generated file, read back
// with the pipeline's own opener (npy/npz headers).
std::pair<std::uint64_t, std::uint64_t> layout_of(const fs::path& staging, pipeline::DlioFormat format,
                                                  std::uint64_t record_length, const fs::path& file) {
  if (format == pipeline::DlioFormat::Raw) return {0, record_length};
  if (format == pipeline::DlioFormat::Jpeg) return {0, fs::file_size(file)};
  pipeline::DlioOptions o;
  o.format = format;
  const pipeline::Dataset ds = pipeline::open_dlio_dataset(staging, o);
  for (const auto& s : ds.samples) {
    if (fs::path(s.path) == file) return {s.offset, s.length};
  }
  throw Error("DLIO data: generated file '" + file.string() + "' has no records");
}

// Files gpemu did not write are read by their headers, which must agree with
// the workload: DLIO's own generator stores npz/npy samples on the array's
// last axis, and reading its first axis as samples would report I/O figures
// for records of the wrong size without a word.
void check_found_records(const DlioWorkload& w, const FormatInfo& fi, const std::vector<DlioDataFile>& files) {
  if (fi.format == pipeline::DlioFormat::Jpeg) return;
  const auto want_samples = static_cast<std::uint64_t>(w.dataset.num_samples_per_file);
  // A TFRecord sample is its framed tf.train.Example: longer than the record.
  const bool fixed_length = w.dataset.record_length_bytes_stdev == 0 && fi.format != pipeline::DlioFormat::Raw &&
                            fi.format != pipeline::DlioFormat::Tfrecord;
  const auto want_length = static_cast<std::uint64_t>(std::llround(w.dataset.record_length_bytes));
  for (const auto& f : files) {
    if (f.samples == want_samples && (!fixed_length || f.record_length == want_length)) continue;
    throw InputError(fmt::format(
        "DLIO data: '{}' holds {} records of {} bytes, but the workload says {} samples of {} bytes per file "
        "(dataset.num_samples_per_file, dataset.record_length_bytes); gpemu reads samples along the first array "
        "axis, and DLIO's generator puts them on the last: regenerate the folder with workflow.generate_data: "
        "true, or set the two keys to what the files hold",
        f.path.string(), f.samples, f.record_length, want_samples, want_length));
  }
}

}  // namespace

std::uint64_t DlioData::bytes() const {
  std::uint64_t b = 0;
  for (const auto& f : files) b += f.bytes;
  return b;
}

std::uint64_t DlioData::samples() const {
  std::uint64_t n = 0;
  for (const auto& f : files) n += f.samples;
  return n;
}

fs::path resolve_data_folder(const DlioWorkload& w, const fs::path& base_dir) {
  const fs::path folder = w.dataset.data_folder;
  if (folder.is_absolute()) return folder.lexically_normal();
  fs::path p = fs::path(w.storage.storage_root) / folder;
  if (!p.is_absolute()) p = (base_dir.empty() ? fs::current_path() : base_dir) / p;
  return p.lexically_normal();
}

DlioData generate_dlio_data(const DlioWorkload& w, DlioSplit split, const fs::path& base_dir,
                            const std::function<void(const DlioProgress&)>& progress) {
  const FormatInfo fi = format_info(w);
  const SplitInfo s = split_info(w, split);
  DlioData data;
  data.folder = resolve_data_folder(w, base_dir) / s.name;
  if (s.files == 0) return data;
  if (fi.format == pipeline::DlioFormat::Jpeg && w.dataset.num_samples_per_file != 1) {
    throw InputError(
        fmt::format("{}: dataset.num_samples_per_file = {} with format jpeg; a JPEG file holds one "
                    "sample, accepted: 1",
                    where_set(w, "dataset.num_samples_per_file"), w.dataset.num_samples_per_file));
  }
  check_file_prefix(w);
  const nlohmann::json params = generation_params(w, s);
  const auto t0 = std::chrono::steady_clock::now();
  make_dir(data.folder);
  // Concurrent runs on one data folder take turns; the second then finds the
  // dataset complete and skips generation.
  const FolderLock lock(data.folder);
  const ManifestRead read = read_manifest(data.folder);
  const auto& old = read.manifest;
  if (!read.problem.empty()) {
    data.manifest_problem = fmt::format("the manifest '{}' was not valid ({}); the folder was generated again",
                                        (data.folder / kManifestName).string(), read.problem);
  }
  if (old && old->params == params && old->files.size() == s.files && files_present(old->files)) {
    data.files = old->files;
    data.skipped = true;
    return data;
  }
  if (old) {  // remove what the previous generation wrote (and only that: paths are confined)
    for (const auto& f : old->files) {
      std::error_code ec;
      fs::remove(f.path, ec);
    }
    std::error_code ec;
    fs::remove(data.folder / kManifestName, ec);
  }
  std::error_code ec;
  // Staging folders of killed runs (with the lock held, none is live).
  for (const auto& e : fs::directory_iterator(data.folder, ec)) {
    if (e.path().filename().string().starts_with(kStagingName)) fs::remove_all(e.path(), ec);
  }
  const fs::path staging = data.folder / fmt::format("{}-{}", kStagingName, ::getpid());
  make_dir(staging);
  // A failed or interrupted generation leaves neither its staging folder nor a
  // manifest; files already placed stay, unlisted, and are replaced next time.
  struct RemoveStaging {
    fs::path dir;
    ~RemoveStaging() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } remove_staging{staging};

  const auto lengths = record_lengths(w, s);
  const auto per_file = static_cast<std::size_t>(w.dataset.num_samples_per_file);
  {
    std::uint64_t planned = 0;
    for (std::uint64_t i = 0; i < s.files; ++i) {
      const std::uint64_t length = lengths.empty() ? 1 : lengths[std::min<std::size_t>(i, lengths.size() - 1)];
      planned = checked_add(planned, checked_mul(length, per_file, "DLIO data: a file's bytes"),
                            "DLIO data: the bytes to write");
    }
    detail::require_free_space(data.folder, planned,
                               "DLIO data generation (dataset.num_files, num_samples_per_file, record_length_bytes)");
  }
  const bool varying = w.dataset.record_length_bytes_stdev > 0;
  nlohmann::json listed = nlohmann::json::array();
  auto place = [&](std::uint64_t i, const fs::path& produced, std::pair<std::uint64_t, std::uint64_t> layout) {
    const auto [first, length] = layout;
    fs::path rel = file_name(w, i, s.files, fi.extension);
    if (s.subfolders > 0) rel = fs::path(std::to_string(i % s.subfolders)) / rel;
    const fs::path dest = data.folder / rel;
    make_dir(dest.parent_path());
    fs::rename(produced, dest, ec);
    if (ec)
      throw InputError(
          fmt::format("DLIO data: cannot move '{}' to '{}': {}", produced.string(), dest.string(), ec.message()));
    DlioDataFile f;
    f.path = dest;
    f.bytes = fs::file_size(dest);
    f.samples = per_file;
    f.record_length = length;
    f.first_offset = first;
    listed.push_back({{"path", rel.string()},
                      {"bytes", f.bytes},
                      {"samples", f.samples},
                      {"record_length", f.record_length},
                      {"first_offset", f.first_offset}});
    data.files.push_back(std::move(f));
    if (progress) {
      DlioProgress p;
      p.phase = DlioPhase::Generate;
      p.rank = -1;
      p.step = i + 1;
      p.steps = s.files;
      p.bytes = data.files.back().bytes;
      progress(p);
    }
  };
  if (varying) {
    // One file per call, each with its own record length.
    for (std::uint64_t i = 0; i < s.files; ++i) {
      pipeline::DlioGeneratorOptions g;
      g.format = fi.format;
      g.num_files = 1;
      g.samples_per_file = per_file;
      g.record_length = lengths[i];
      g.seed = mix(s.seed, i);
      const auto paths = pipeline::generate_dlio_dataset(staging, g);
      place(i, paths.at(0), layout_of(staging, fi.format, lengths[i], paths.at(0)));
    }
  } else {
    pipeline::DlioGeneratorOptions g;
    g.format = fi.format;
    g.num_files = s.files;
    g.samples_per_file = per_file;
    g.record_length = lengths.empty() ? 1 : lengths[0];
    g.seed = s.seed;
    const auto paths = pipeline::generate_dlio_dataset(staging, g);
    // Non-JPEG files share one layout: read it from the first file only.
    std::pair<std::uint64_t, std::uint64_t> shared{0, g.record_length};
    if (fi.format == pipeline::DlioFormat::Npy || fi.format == pipeline::DlioFormat::Npz ||
        fi.format == pipeline::DlioFormat::Tfrecord) {
      shared = layout_of(staging, fi.format, g.record_length, paths.at(0));
    }
    for (std::uint64_t i = 0; i < s.files; ++i) {
      place(i, paths.at(i),
            fi.format == pipeline::DlioFormat::Jpeg ? layout_of(staging, fi.format, 0, paths.at(i)) : shared);
    }
  }
  fs::remove_all(staging, ec);

  // Written last: the dataset is complete when its manifest exists.
  const nlohmann::json manifest = {{"gpemu_dlio_dataset", 1}, {"params", params}, {"files", listed}};
  write_file_atomically(data.folder / kManifestName, manifest.dump(1) + "\n", "DLIO dataset manifest");
  data.generated = true;
  data.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return data;
}

DlioData open_dlio_data(const DlioWorkload& w, DlioSplit split, const fs::path& base_dir) {
  const FormatInfo fi = format_info(w);
  const SplitInfo s = split_info(w, split);
  DlioData data;
  data.folder = resolve_data_folder(w, base_dir) / s.name;
  const std::string hint =
      fmt::format("generate it with workflow.generate_data: true (++workload.workflow.generate_data=True)");
  std::error_code ec;
  if (!is_folder(data.folder, "DLIO data")) {
    // A workload that set nothing (an empty file) reads DLIO's default ./data
    // from the current folder: say so, or the folder looks chosen (U6).
    const std::string origin =
        w.is_set("dataset.data_folder") || w.dataset.data_folder != DlioWorkload{}.dataset.data_folder
            ? ""
            : fmt::format(" (dataset.data_folder is DLIO's default '{}', resolved against '{}'{})",
                          w.dataset.data_folder, base_dir.string(),
                          w.set_keys.empty() ? fmt::format(": {} sets no key at all", w.source) : "");
    throw InputError(
        fmt::format("DLIO data: the {} folder '{}' does not exist{}; {}", s.name, data.folder.string(), origin, hint));
  }
  ManifestRead read = read_manifest(data.folder);
  if (!read.problem.empty()) {
    throw InputError(fmt::format("DLIO data: the manifest '{}' is not valid: {}; {}",
                                 (data.folder / kManifestName).string(), read.problem, hint));
  }
  if (auto& m = read.manifest) {
    auto files = std::move(m->files);
    if (files.size() < s.files) {
      throw InputError(
          fmt::format("DLIO data: '{}' holds {} generated files, the workload needs {} "
                      "(dataset.num_files_{}); {}",
                      data.folder.string(), files.size(), s.files, split == DlioSplit::Train ? "train" : "eval", hint));
    }
    files.resize(s.files);
    for (const auto& f : files) {
      if (!is_file(f.path, "DLIO data")) {
        throw InputError(
            fmt::format("DLIO data: '{}' is listed in the folder's manifest but missing; {}", f.path.string(), hint));
      }
      // A file cut short after generation is found now, not mid-epoch.
      const auto size = fs::file_size(f.path, ec);
      if (ec || size != f.bytes) {
        throw InputError(
            fmt::format("DLIO data: '{}' holds {} bytes, its manifest says {} (changed after it was "
                        "generated); {}",
                        f.path.string(), ec ? 0 : size, f.bytes, hint));
      }
    }
    data.files = std::move(files);
    return data;
  }
  // No manifest: files written by DLIO or by hand. The folder itself and its
  // subfolders, files with the format's extension, sorted by path.
  std::vector<fs::path> dirs = {data.folder};
  for (const auto& e : fs::directory_iterator(data.folder, ec)) {
    if (e.path().filename().string().front() != '.' && is_folder(e, "DLIO data")) dirs.push_back(e.path());
  }
  if (ec) throw_fs_error("DLIO data", "list", data.folder, ec);
  std::sort(dirs.begin(), dirs.end());
  pipeline::DlioOptions o;
  o.format = fi.format;
  if (fi.format == pipeline::DlioFormat::Raw) {
    o.record_length = static_cast<std::uint64_t>(std::llround(w.dataset.record_length_bytes));
  }
  std::vector<DlioDataFile> files;
  auto has_files = [&](const fs::path& dir) {
    std::error_code e2;
    for (const auto& e : fs::directory_iterator(dir, e2)) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
      if ((ext == fi.extension || (fi.format == pipeline::DlioFormat::Jpeg && ext == ".jpeg")) &&
          is_file(e, "DLIO data")) {
        return true;
      }
    }
    if (e2) throw_fs_error("DLIO data", "list", dir, e2);
    return false;
  };
  for (const auto& dir : dirs) {
    if (!has_files(dir)) continue;
    const pipeline::Dataset ds = pipeline::open_dlio_dataset(dir, o);
    for (const auto& sample : ds.samples) {
      if (files.empty() || files.back().path != fs::path(sample.path)) {
        DlioDataFile f;
        f.path = sample.path;
        f.bytes = fs::file_size(f.path, ec);
        if (ec) throw_fs_error("DLIO data", "stat", f.path, ec);
        f.record_length = sample.length;
        f.first_offset = sample.offset;
        files.push_back(std::move(f));
      }
      DlioDataFile& f = files.back();
      // The runner reads a file as equal records one after another (a
      // TFRecord file written elsewhere may hold records of several sizes).
      if (sample.length != f.record_length || sample.offset != f.first_offset + f.samples * f.record_length) {
        throw InputError(
            fmt::format("DLIO data: record {} of '{}' is {} bytes at byte {}, its first record {} bytes; gpemu's DLIO "
                        "runner reads files of equal records; {}",
                        f.samples, f.path.string(), sample.length, sample.offset, f.record_length, hint));
      }
      ++f.samples;
    }
  }
  std::sort(files.begin(), files.end(), [](const DlioDataFile& a, const DlioDataFile& b) { return a.path < b.path; });
  if (files.size() < s.files) {
    throw InputError(fmt::format("DLIO data: '{}' holds {} {} files, the workload needs {} (dataset.num_files_{}); {}",
                                 data.folder.string(), files.size(), fi.extension, s.files,
                                 split == DlioSplit::Train ? "train" : "eval", hint));
  }
  files.resize(s.files);
  check_found_records(w, fi, files);
  data.files = std::move(files);
  return data;
}

}  // namespace gpemu::dlio
