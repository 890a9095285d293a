// Grouped datasets: writing one from any dataset, and opening one
// (pipeline.h, "Grouped datasets").
#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/random.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/dataset_folder.h"

namespace gpemu::pipeline {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "index.tsv";
constexpr std::string_view kHeader = "# gpemu grouped dataset: ";
constexpr std::size_t kMaxGroupSize = 1 << 20;
constexpr std::uintmax_t kMaxIndexBytes = std::uintmax_t{4} << 30;

std::string file_name(std::size_t group) { return fmt::format("group-{:08d}.bin", group); }

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && !text.empty();
}

}  // namespace

GroupedDatasetSummary write_grouped_dataset(const Dataset& dataset, const fs::path& out, std::size_t group_size,
                                            std::string_view order, std::uint64_t seed) {
  if (group_size < 1 || group_size > kMaxGroupSize)
    throw InputError(fmt::format("--size {} is impossible: give 1 to {} samples per file", group_size, kMaxGroupSize));
  if (order != "random" && order != "sequential")
    throw InputError(fmt::format(
        "unknown --order '{}': accepted random (a seeded mix of samples in each file) or sequential (the dataset's "
        "order)",
        order));
  if (dataset.size() == 0) throw InputError(fmt::format("dataset '{}' has no samples to group", dataset.root));
  std::vector<std::size_t> picks(dataset.size());
  std::iota(picks.begin(), picks.end(), std::size_t{0});
  if (order == "random") {
    common::Rng rng(seed);
    for (std::size_t i = picks.size() - 1; i > 0; --i) std::swap(picks[i], picks[rng.below(i + 1)]);
  }
  GroupedDatasetSummary summary;
  write_new_dataset_folder(out, "dataset group --out", [&] {
    FileReader reader;
    std::string index = fmt::format("{}{} samples per file\n", kHeader, group_size);
    for (std::size_t g = 0; g * group_size < picks.size(); ++g) {
      throw_if_interrupted();
      std::vector<std::byte> bytes;
      const std::size_t end = std::min(picks.size(), (g + 1) * group_size);
      for (std::size_t i = g * group_size; i < end; ++i) {
        const Sample& s = dataset.samples[picks[i]];
        const auto data = reader.read(s.path, s.offset, s.length);
        index += fmt::format("{}\t{}\t{}\t{}\t{}\n", file_name(g), bytes.size(), s.length, s.label,
                             s.format == SampleFormat::Jpeg ? "jpeg" : "bytes");
        bytes.insert(bytes.end(), data.begin(), data.end());
      }
      write_dataset_file(out / file_name(g), bytes);
      summary.total_bytes += bytes.size();
      ++summary.files;
    }
    summary.samples = picks.size();
    write_dataset_file(out / kIndexName, std::as_bytes(std::span(index.data(), index.size())));
  });
  return summary;
}

bool is_grouped_dataset(const fs::path& dir) {
  std::ifstream in(dir / kIndexName);
  std::string first;
  return in && std::getline(in, first) && std::string_view(first).substr(0, kHeader.size()) == kHeader;
}

Dataset open_grouped_dataset(const fs::path& dir) {
  const fs::path index = dir / kIndexName;
  const std::string where = index.string();
  std::error_code ec;
  if (fs::exists(dir / kIncompleteDatasetMarker, ec))
    throw InputError(fmt::format("{}: the dataset's writing did not finish ({} is there); write it again", dir.string(),
                                 kIncompleteDatasetMarker));
  const std::uintmax_t size = fs::file_size(index, ec);
  if (ec) throw InputError(fmt::format("{}: cannot be read ({})", where, ec.message()));
  if (size > kMaxIndexBytes)
    throw InputError(fmt::format("{}: {} bytes; an index is at most {} bytes", where, size, kMaxIndexBytes));
  std::ifstream in(index);
  if (!in) throw InputError(fmt::format("{}: cannot be read", where));
  std::string line;
  std::getline(in, line);
  std::size_t k = 0;
  {
    std::string_view h(line);
    constexpr std::string_view kTail = " samples per file";
    if (h.substr(0, kHeader.size()) != kHeader || h.size() < kHeader.size() + kTail.size() ||
        h.substr(h.size() - kTail.size()) != kTail ||
        !parse_number(h.substr(kHeader.size(), h.size() - kHeader.size() - kTail.size()), k) || k < 1 ||
        k > kMaxGroupSize)
      throw InputError(
          fmt::format("{} line 1: expected '{}<1 to {}> samples per file'", where, kHeader, kMaxGroupSize));
  }
  Dataset d;
  d.root = dir.string();
  d.group_size = k;
  std::unordered_map<std::string, std::uint64_t> file_sizes;
  std::size_t line_no = 1;
  std::uint64_t expected_offset = 0;
  std::string group_file;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto bad = [&](const std::string& why) { return InputError(fmt::format("{} line {}: {}", where, line_no, why)); };
    std::vector<std::string_view> f;
    std::string_view rest(line);
    for (std::size_t tab; (tab = rest.find('\t')) != std::string_view::npos; rest.remove_prefix(tab + 1))
      f.push_back(rest.substr(0, tab));
    f.push_back(rest);
    if (f.size() != 5)
      throw bad(fmt::format("{} fields; expected file, offset, length, label and format separated by tabs", f.size()));
    const std::string name(f[0]);
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
      throw bad(fmt::format("'{}' is not a file name in the dataset's folder", name));
    Sample s;
    if (!parse_number(f[1], s.offset)) throw bad(fmt::format("offset '{}' is not a whole number", f[1]));
    if (!parse_number(f[2], s.length)) throw bad(fmt::format("length '{}' is not a whole number", f[2]));
    if (!parse_number(f[3], s.label)) throw bad(fmt::format("label '{}' is not a 64-bit integer", f[3]));
    if (f[4] == "jpeg")
      s.format = SampleFormat::Jpeg;
    else if (f[4] == "bytes")
      s.format = SampleFormat::Bytes;
    else
      throw bad(fmt::format("format '{}': accepted jpeg or bytes", f[4]));
    // Whole groups in order: a group's samples share a file, back to back from offset 0.
    const std::size_t i = d.samples.size();
    if (i % k == 0) {
      if (file_sizes.count(name)) throw bad(fmt::format("file '{}' starts a second group", name));
      group_file = name;
      expected_offset = 0;
    } else if (name != group_file) {
      throw bad(fmt::format("sample {} belongs to the group of '{}' ({} samples per file), not '{}'", i, group_file, k,
                            name));
    }
    if (s.offset != expected_offset)
      throw bad(fmt::format("offset {} where the group's previous sample ends at {}", s.offset, expected_offset));
    auto it = file_sizes.find(name);
    if (it == file_sizes.end()) {
      const std::uintmax_t bytes = fs::file_size(dir / name, ec);
      if (ec) throw bad(fmt::format("file '{}' cannot be read ({})", name, ec.message()));
      it = file_sizes.emplace(name, bytes).first;
    }
    if (s.length > it->second || s.offset > it->second - s.length)
      throw bad(fmt::format("{} bytes at offset {} lie past the end of '{}' ({} bytes)", s.length, s.offset, name,
                            it->second));
    expected_offset = s.offset + s.length;
    s.path = (dir / name).string();
    d.samples.push_back(std::move(s));
  }
  if (d.samples.empty()) throw InputError(fmt::format("{}: no samples", where));
  return d;
}

Dataset open_dataset_folder(const fs::path& dir) {
  if (is_ffcv_file(dir)) return open_ffcv_file(dir);
  return is_grouped_dataset(dir) ? open_grouped_dataset(dir) : open_image_folder(dir);
}

}  // namespace gpemu::pipeline
