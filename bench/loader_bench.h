// Data loader benchmark: gpemu's DataLoader against torchvision's ImageFolder
// + torch DataLoader, on the same generated JPEG dataset, with the same
// transforms, worker count and batch size, in the same run, both on a warm
// page cache. Reports images/s for each and gpemu / torch.
//
// Storage variants for gpemu's loader: read_method (pread or io_uring),
// cold (evict the files from the page cache before each epoch, and before
// the torch run, instead of warming it) and decode = false (an I/O-only
// loader that delivers the JPEG bytes; torch is then not run, as it has no
// equivalent).
//
// JSON keys: gpemu_images_per_s, torch_images_per_s (null when torch is not
// available; torch_error then says why), ratio (null likewise), workers,
// images, batch_size, epochs, read_method, cold, decode, dataset {dir,
// median_bytes, total_bytes, generated}, gpemu {seconds, read_s, decode_s,
// collate_s, wait_s, bytes_read, resident_after_evict_bytes (cold: the most
// left in the page cache by an eviction)}, torch {seconds, version} or null,
// ffcv_images_per_s and ffcv, gpu_decode_images_per_s and gpu_decode (the
// same breakdown plus gpu, gpu_s: the modelled GPU seconds, host_images_per_s;
// its images/s is images / max(host seconds, GPU seconds)) or
// gpu_decode_error; service_images_per_s and service (seconds, images, workers, worker_cpu_s: the
// preprocessing service's worker processes, offload all, after one epoch to warm) or service_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "gpemu/pipeline.h"

namespace gpemu {

struct LoaderBenchOptions {
  std::string dataset_dir;  // empty: <temp>/gpemu-loader-bench-<images>-<seed>; reused when it matches
  std::size_t images = 2000;
  int classes = 100;
  double median_kb = 110.0;  // ImageNet-like file sizes
  std::uint64_t seed = 1;
  int workers = 2;
  std::size_t batch_size = 64;
  int prefetch_factor = 2;
  int image_size = 224;
  int epochs = 1;  // timed epochs per loader
  pipeline::ReadMethod read_method = pipeline::ReadMethod::Pread;
  bool cold = false;   // evict the dataset from the page cache before each epoch
  bool decode = true;  // false: deliver the JPEG bytes (I/O only; torch is not run)
  bool run_torch = true;
  bool run_ffcv = true;  // also the FFCV-style loader over the same images (written once into <dir>.ffcv)
  // Also the GPU-decode loader (DALI-style) over the same images for this card: its workers' host part runs
  // for real, its GPU part is the model's (emulated seconds); empty: not run.
  std::string gpu_decode = "v100";
  // Also `gpemu prep serve` over the same images: this many worker processes of one CPU each (offload all:
  // they read, decode and batch; the bench takes whole batches); 0: not run.
  int service_workers = 2;
  std::string python = "/usr/bin/python3";
  std::string torch_script;  // empty: torch_loader.py beside this file's source
};

nlohmann::json run_loader_bench(const LoaderBenchOptions& options);
// Generates the benchmark's JPEG folder (images, classes, seed, median_kb of
// `options`) in `dir` unless a marker file there says it holds that one
// already; the marker as JSON, with "generated". InputError for a folder
// with other files. The preprocessing service's bench uses it too.
nlohmann::json ensure_loader_bench_dataset(const std::filesystem::path& dir, const LoaderBenchOptions& options);
void print_loader_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace gpemu
