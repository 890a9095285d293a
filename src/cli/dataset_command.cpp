#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"

namespace gpemu::cli {
namespace {

struct SynthArgs {
  std::string out;
  long long images = 2000;
  int classes = 100;
  double median_kb = 110;
  std::uint64_t seed = 0;
  bool json = false;
};

void synth(const SynthArgs& a) {
  if (a.images < 1) throw InputError(fmt::format("--images {} is impossible: it must be at least 1", a.images));
  if (a.classes < 1) throw InputError(fmt::format("--classes {} is impossible: it must be at least 1", a.classes));
  if (!(a.median_kb > 0))
    throw InputError(fmt::format("--median-kb {} is impossible: it must be positive", a.median_kb));
  const std::filesystem::path out(a.out);
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
    throw InputError(fmt::format("--out '{}' exists and is not a folder", a.out));
  if (std::filesystem::is_directory(out, ec) && !std::filesystem::is_empty(out, ec))
    throw InputError(
        fmt::format("--out '{}' is not empty: give a new or empty folder (the images would mix with "
                    "the files there)",
                    a.out));
  const pipeline::ImageDatasetSummary s =
      pipeline::synthesize_image_folder(out, a.classes, static_cast<std::size_t>(a.images), a.seed, a.median_kb);
  if (a.json) {
    nlohmann::json j = {{"out", a.out},
                        {"images", s.images},
                        {"classes", a.classes},
                        {"seed", a.seed},
                        {"total_bytes", s.total_bytes},
                        {"median_bytes", s.median_bytes},
                        {"p90_bytes", s.p90_bytes},
                        {"max_bytes", s.max_bytes}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("wrote an ImageFolder of synthetic JPEGs to {}\n\n", a.out);
  print_summary(std::cout, {{"images", std::to_string(s.images)},
                            {"classes", std::to_string(a.classes)},
                            {"total", fmt::format("{:.1f} MB", static_cast<double>(s.total_bytes) / 1e6)},
                            {"median size", fmt::format("{:.1f} KB", static_cast<double>(s.median_bytes) / 1e3)},
                            {"p90 size", fmt::format("{:.1f} KB", static_cast<double>(s.p90_bytes) / 1e3)},
                            {"largest", fmt::format("{:.1f} KB", static_cast<double>(s.max_bytes) / 1e3)}});
  std::cout << fmt::format("train on it: gpemu train --data {}\n", a.out);
}

struct GroupArgs {
  std::string data, out, order = "random";
  long long size = 0;
  std::uint64_t seed = 0;
  bool json = false;
};

void group(const GroupArgs& a) {
  if (a.size < 1) throw InputError(fmt::format("--size {} is impossible: give 1 or more samples per file", a.size));
  std::error_code ec;
  const pipeline::Dataset source = std::filesystem::is_regular_file(a.data, ec) ? pipeline::open_file_list(a.data)
                                                                                : pipeline::open_image_folder(a.data);
  const pipeline::GroupedDatasetSummary s =
      pipeline::write_grouped_dataset(source, a.out, static_cast<std::size_t>(a.size), a.order, a.seed);
  if (a.json) {
    const nlohmann::json j = {{"data", a.data},       {"out", a.out},
                              {"group_size", a.size}, {"order", a.order},
                              {"seed", a.seed},       {"samples", s.samples},
                              {"files", s.files},     {"total_bytes", s.total_bytes}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("wrote {} samples of {} in {} files of {} to {}\n", s.samples, a.data, s.files, a.size,
                           a.out);
  std::cout << fmt::format("train on it: gpemu train --data {} (files are shuffled as units, read by groups)\n", a.out);
}

struct FfcvArgs {
  std::string data, out, page_size = "4M";
  pipeline::FfcvWriteOptions o;
  bool json = false;
};

void ffcv(FfcvArgs& a) {
  a.o.page_size = gpemu::parse_byte_size(a.page_size, "--page-size");
  std::error_code ec;
  const pipeline::Dataset source = std::filesystem::is_regular_file(a.data, ec) ? pipeline::open_file_list(a.data)
                                                                                : pipeline::open_image_folder(a.data);
  const pipeline::FfcvSummary s = pipeline::write_ffcv_file(source, a.out, a.o);
  if (a.json) {
    const nlohmann::json j = {{"data", a.data},
                              {"out", a.out},
                              {"max_resolution", a.o.max_resolution},
                              {"jpeg_share", a.o.jpeg_share},
                              {"jpeg_quality", a.o.jpeg_quality},
                              {"page_size", a.o.page_size},
                              {"seed", a.o.seed},
                              {"samples", s.samples},
                              {"jpeg", s.jpeg},
                              {"raw", s.raw},
                              {"pages", s.pages},
                              {"file_bytes", s.file_bytes}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format(
      "wrote {} images of {} to {}: {} as JPEG (quality {}), {} as raw RGB, longer side at most {} "
      "pixels, {} pages of {} bytes, {:.1f} MB\n",
      s.samples, a.data, a.out, s.jpeg, a.o.jpeg_quality, s.raw, a.o.max_resolution, s.pages, a.o.page_size,
      static_cast<double>(s.file_bytes) / 1e6);
  std::cout << fmt::format("train on it: gpemu train --data {} (memory-mapped, quasi-random order)\n", a.out);
}

}  // namespace

void add_dataset_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("dataset", "Make datasets for training experiments");
  cmd->require_subcommand(1);
  auto a = std::make_shared<SynthArgs>();
  auto* s = cmd->add_subcommand("synth",
                                "Generate an ImageNet-like ImageFolder of real JPEGs (log-normal sizes, median near "
                                "--median-kb), deterministic for a seed");
  s->add_option("--out", a->out, "New or empty folder to write (created; class_NNNN/img_NNNNNNNN.JPEG)")->required();
  s->add_option("--images", a->images, "Number of images")->capture_default_str();
  s->add_option("--classes", a->classes, "Number of class folders")->capture_default_str();
  s->add_option("--median-kb", a->median_kb, "Median file size, KB")->capture_default_str();
  s->add_option("--seed", a->seed, "Seed")->capture_default_str();
  s->add_flag("--json", a->json, "Machine-readable output");
  s->callback([a] { synth(*a); });

  auto g = std::make_shared<GroupArgs>();
  auto* gc = cmd->add_subcommand(
      "group", "Pack a dataset's samples N to a file with an index (GPEmu's file grouping: one seek per file)");
  gc->add_option("--data", g->data, "ImageFolder (or a file list) to pack")->required();
  gc->add_option("--out", g->out, "New or empty folder to write (group-NNNNNNNN.bin and index.tsv)")->required();
  gc->add_option("--size", g->size, "Samples per file")->required();
  gc->add_option("--order", g->order,
                 "random: a seeded mix of samples in each file; sequential: the dataset's order (by class for an "
                 "ImageFolder)")
      ->capture_default_str();
  gc->add_option("--seed", g->seed, "Seed of the random order")->capture_default_str();
  gc->add_flag("--json", g->json, "Machine-readable output");
  gc->callback([g] { group(*g); });

  auto f = std::make_shared<FfcvArgs>();
  auto* fc = cmd->add_subcommand("ffcv",
                                 "Write an ImageFolder into one FFCV-style file (page-aligned records, per-sample "
                                 "metadata, JPEG or raw pixels), as FFCV's write_imagenet.sh does");
  fc->add_option("--data", f->data, "ImageFolder (or a file list of JPEGs) to write")->required();
  fc->add_option("--out", f->out, "New file to write")->required();
  fc->add_option("--max-resolution", f->o.max_resolution, "Longer side of a stored image at most, pixels")
      ->capture_default_str();
  fc->add_option("--jpeg-share", f->o.jpeg_share, "Share of images stored as JPEG (the rest raw RGB), 0 to 1")
      ->capture_default_str();
  fc->add_option("--jpeg-quality", f->o.jpeg_quality, "Quality of the stored JPEGs, 1 to 100")->capture_default_str();
  fc->add_option("--page-size", f->page_size, "Page size, a multiple of 4096 bytes (e.g. 4M)")->capture_default_str();
  fc->add_option("--seed", f->o.seed, "Seed of the JPEG-or-raw choice")->capture_default_str();
  fc->add_flag("--json", f->json, "Machine-readable output");
  fc->callback([f] { ffcv(*f); });
}

}  // namespace gpemu::cli
