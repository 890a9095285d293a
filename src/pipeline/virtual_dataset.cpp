// Datasets described by their sizes, without files (pipeline.h, "dataset").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "common/message_text.h"
#include "common/random.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/spec_error.h"

namespace gpemu::pipeline {
namespace {

// ImageNet's file-size distribution: (cumulative percent, bytes) points of
// the CDF GPEmu measured on ImageNet's files (mengwanguc/gpemu,
// plots/new/sff/size/filesizes.txt), read at these percents with linear
// interpolation between its 1,283 points; 0 % is its smallest file, not 0
// bytes. The source's mean is 115,591 bytes; this table's, 116,716.
constexpr std::pair<double, double> kImagenetSizes[] = {
    {0, 1483},        {0.5, 2536},    {1, 3345},    {2, 5397},      {3, 7805},       {4, 10149},      {5, 12407},
    {6, 14632},       {7, 16854},     {8, 19040},   {9, 21193},     {10, 23347},     {11, 25419},     {12, 27580},
    {13, 29814},      {14, 32114},    {15, 34419},  {16, 36824},    {17, 39306},     {18, 41790},     {19, 44375},
    {20, 46989},      {21, 49677},    {22, 52378},  {23, 55043},    {24, 57751},     {25, 60403},     {26, 62993},
    {27, 65538},      {28, 67991},    {29, 70406},  {30, 72706},    {31, 74962},     {32, 77115},     {33, 79223},
    {34, 81254},      {35, 83204},    {36, 85090},  {37, 86930},    {38, 88722},     {39, 90487},     {40, 92162},
    {41, 93860},      {42, 95511},    {43, 97150},  {44, 98722},    {45, 100304},    {46, 101873},    {47, 103433},
    {48, 104990},     {49, 106523},   {50, 108062}, {51, 109570},   {52, 111075},    {53, 112589},    {54, 114085},
    {55, 115589},     {56, 117078},   {57, 118589}, {58, 120105},   {59, 121609},    {60, 123146},    {61, 124671},
    {62, 126201},     {63, 127731},   {64, 129300}, {65, 130874},   {66, 132471},    {67, 134061},    {68, 135675},
    {69, 137341},     {70, 139042},   {71, 140754}, {72, 142490},   {73, 144261},    {74, 146073},    {75, 147923},
    {76, 149837},     {77, 151785},   {78, 153821}, {79, 155907},   {80, 158091},    {81, 160325},    {82, 162680},
    {83, 165139},     {84, 167654},   {85, 170298}, {86, 173127},   {87, 176150},    {88, 179383},    {89, 182903},
    {90, 186704},     {91, 190968},   {92, 195591}, {93, 200932},   {94, 207141},    {95, 214510},    {96, 223903},
    {97, 237231},     {98, 260682},   {99, 362551}, {99.5, 588812}, {99.8, 1185633}, {99.9, 1892091}, {99.95, 3237296},
    {99.99, 7025359}, {100, 15737107}};

// The size at cumulative share u in (0, 1) of the table.
double imagenet_quantile(double u) {
  const double pct = u * 100;
  const auto* hi = std::lower_bound(std::begin(kImagenetSizes), std::end(kImagenetSizes), pct,
                                    [](const std::pair<double, double>& e, double v) { return e.first < v; });
  if (hi == std::begin(kImagenetSizes)) return hi->second;
  if (hi == std::end(kImagenetSizes)) return std::prev(hi)->second;
  const auto* lo = std::prev(hi);
  return lo->second + (hi->second - lo->second) * (pct - lo->first) / (hi->first - lo->first);
}

struct Preset {
  std::string_view name;
  std::size_t files;
  int classes;
};
// ILSVRC-2012 train: 1,281,167 images in 1,000 classes (Russakovsky et al.,
// IJCV 2015, table 2). Imagenette-10G: vmtouch's "Files: 87473" over its train
// folder in GPEmu's DataStall artifact (mengwanguc/gpemu, rep/datastall); 10
// classes, Imagenette's. Imagenette: fast.ai's imagenette2 (full size) training
// split, 9,469 images of 10 ImageNet classes (github.com/fastai/imagenette;
// GPEmu's sharing runs log 74 batches of 128 per epoch of it).
constexpr Preset kPresets[] = {{"imagenet1k", 1'281'167, 1000},
                               {"imagenette10g", 87'473, 10},
                               {"imagenette", 9'469, 10}};

constexpr std::uint64_t kMaxSampleBytes = 1ull << 40;
// ImageNet-21k's 14 M images fit; each sample costs about 100 bytes of memory.
constexpr std::size_t kMaxSamples = 20'000'000;
constexpr std::uintmax_t kMaxSizesFileBytes = 1ull << 30;

Dataset make(std::string root, std::vector<std::uint64_t> sizes, int classes, std::uint64_t seed) {
  // A seeded permutation (Fisher-Yates over xoshiro256**) spreads the sizes.
  common::Rng rng(common::mix_seed(seed, 0x7669727475616cULL));
  for (std::size_t i = sizes.size(); i > 1; --i) std::swap(sizes[i - 1], sizes[rng.next() % i]);
  Dataset d;
  d.root = std::move(root);
  d.samples.reserve(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Sample s;
    s.path = fmt::format("{}/{}", root, i);
    s.length = sizes[i];
    s.label = static_cast<std::int64_t>(i % static_cast<std::size_t>(classes));
    s.format = SampleFormat::Jpeg;
    d.samples.push_back(std::move(s));
  }
  for (int c = 0; c < classes; ++c) d.classes.push_back(fmt::format("class{}", c));
  return d;
}

// The dataset's name (or sizes file) is refused: the spec's data.dataset, worded
// by each front end (the CLI's --virtual-dataset, a jobs file's 'dataset').
SpecError dataset_error(std::string rule) { return SpecError("data.dataset", "", std::move(rule)); }

}  // namespace

std::vector<std::uint64_t> parse_sample_sizes(std::string_view text, const std::string& name) {
  std::vector<std::uint64_t> sizes;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size() || v < 1 || v > kMaxSampleBytes) {
      throw InputError(
          fmt::format("{}:{}: '{}' is not a sample size: give one whole number of bytes per line, 1 to {} (1 TiB)",
                      name, line_no, printable_excerpt(line, 40), kMaxSampleBytes));
    }
    if (sizes.size() == kMaxSamples)
      throw InputError(fmt::format("{}:{}: more than {} samples; a virtual dataset holds at most that many", name,
                                   line_no, kMaxSamples));
    sizes.push_back(v);
  }
  if (sizes.empty())
    throw InputError(fmt::format("{}: no sample sizes in it: give one number of bytes per line", name));
  return sizes;
}

Dataset grouped(const Dataset& dataset, std::size_t group_size) {
  if (group_size < 1) throw InputError("a group size of 0 is impossible: give 1 (no groups) or more samples per file");
  Dataset g = dataset;
  if (group_size == 1) return g;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < g.samples.size(); ++i) {
    if (i % group_size == 0) offset = 0;
    Sample& s = g.samples[i];
    s.path = fmt::format("{}/group-{}", dataset.root, i / group_size);
    s.offset = offset;
    offset += s.length;
  }
  g.root = fmt::format("{} in groups of {}", dataset.root, group_size);
  g.group_size = group_size;
  return g;
}

Dataset virtual_dataset(std::string_view spec, std::uint64_t seed) {
  // ffcv:<spec>: that dataset as `gpemu dataset ffcv` would write it with its
  // defaults (write_imagenet.sh's 500, 0.50, 90), the coin seeded as the order.
  if (spec.starts_with("ffcv:")) {
    FfcvWriteOptions o;
    o.seed = seed;
    return ffcv_layout(virtual_dataset(spec.substr(5), seed), o);
  }
  for (const Preset& p : kPresets) {
    if (spec != p.name) continue;
    std::vector<std::uint64_t> sizes(p.files);
    for (std::size_t i = 0; i < p.files; ++i) {
      const double u = (static_cast<double>(i) + 0.5) / static_cast<double>(p.files);
      sizes[i] = static_cast<std::uint64_t>(std::llround(imagenet_quantile(u)));
    }
    return make(fmt::format("virtual:{}", p.name), std::move(sizes), p.classes, seed);
  }
  if (spec.starts_with("sizes=")) {
    const std::string path(spec.substr(6));
    if (path.empty()) throw dataset_error("sizes=: give a file after 'sizes='");
    std::error_code ec;
    const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (ec) throw dataset_error(fmt::format("sizes=: cannot read '{}': {}", one_line_message(path), ec.message()));
    if (bytes > kMaxSizesFileBytes)
      throw dataset_error(
          fmt::format("sizes=: '{}' holds {} bytes; a sizes file may hold at most {} "
                      "(1 GiB)",
                      one_line_message(path), bytes, kMaxSizesFileBytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw dataset_error(fmt::format("sizes=: cannot open '{}'", one_line_message(path)));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw dataset_error(fmt::format("sizes=: cannot read '{}'", one_line_message(path)));
    return make(fmt::format("virtual:{}", path), parse_sample_sizes(text.str(), one_line_message(path)), 1, seed);
  }
  throw dataset_error(
      fmt::format("'{}': unknown; accepted imagenet1k, imagenette10g, imagenette or sizes=FILE (one "
                  "size in bytes per line), each also as ffcv:<that> (its FFCV-style layout)",
                  printable_excerpt(spec, 200)));
}

}  // namespace gpemu::pipeline
