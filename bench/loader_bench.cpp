#include "loader_bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/zoo.h"
#include "prep_bench.h"

namespace gpemu {
namespace fs = std::filesystem;
namespace pl = gpemu::pipeline;

namespace {

constexpr const char* kMarker = ".gpemu-loader-bench.json";
constexpr int kGeneratorVersion = 1;  // bump when generate_image_dataset changes its output

// Reads every file once so both loaders start from a warm page cache.
void warm_page_cache(const std::vector<std::string>& files) {
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
  }
}

struct TorchRun {
  nlohmann::json result;  // null on failure
  std::string error;
};

TorchRun run_torch(const fs::path& dir, const LoaderBenchOptions& o) {
  TorchRun run;
  const std::string script =
      // The source tree's bench/ folder (data_dir() is the source tree in a build): __FILE__ is relative to
      // the build folder, so it named the script only when gpemu ran from there.
      o.torch_script.empty() ? (zoo::data_dir() / "bench" / "torch_loader.py").string() : o.torch_script;
  if (!fs::exists(script)) {
    run.error = "torch reference script not found: " + script;
    return run;
  }
  if (::access(o.python.c_str(), X_OK) != 0) {
    run.error = "python interpreter not found: " + o.python;
    return run;
  }
  const auto log = fs::temp_directory_path() / ("gpemu-torch-loader-" + std::to_string(::getpid()) + ".log");
  std::ostringstream cmd;
  cmd << bench::shell_quote(o.python) << " " << bench::shell_quote(script) << " --root "
      << bench::shell_quote(dir.string()) << " --images " << o.images << " --workers " << o.workers << " --batch-size "
      << o.batch_size << " --prefetch-factor " << o.prefetch_factor << " --size " << o.image_size << " --epochs "
      << o.epochs << " --seed " << o.seed << " 2>" << bench::shell_quote(log.string());
  const bench::CommandOutput output = bench::run_command(cmd.str());
  if (!output.started) {
    run.error = "cannot start " + o.python;
    return run;
  }
  const int status = output.status;
  const std::string& last = output.last_json_line;
  nlohmann::json j;
  try {
    if (!last.empty()) j = nlohmann::json::parse(last);
  } catch (const std::exception&) {
  }
  std::string err_text;
  {
    std::ifstream in(log);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (all.size() > 600) all = "..." + all.substr(all.size() - 600);
    err_text = all;
  }
  std::error_code ec;
  fs::remove(log, ec);
  if (j.is_object() && j.contains("error")) {
    run.error = j["error"].get<std::string>();
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object() || !j.contains("images_per_s")) {
    run.error = "torch reference run failed (status " + std::to_string(status) + "): " + err_text;
  } else {
    run.result = j;
  }
  return run;
}

}  // namespace

// Generates the dataset unless `dir` already holds one made with the same
// parameters (recorded in a marker file beside the class folders, where
// ImageFolder does not look).
nlohmann::json ensure_loader_bench_dataset(const fs::path& dir, const LoaderBenchOptions& o) {
  const nlohmann::json params = {{"images", o.images},
                                 {"classes", o.classes},
                                 {"seed", o.seed},
                                 {"median_kb", o.median_kb},
                                 {"generator", kGeneratorVersion}};
  std::error_code ec;
  if (fs::exists(dir / kMarker, ec)) {
    try {
      auto marker = nlohmann::json::parse(std::ifstream(dir / kMarker));
      if (marker.at("params") == params) {
        marker["generated"] = false;
        return marker;
      }
    } catch (const std::exception&) {
    }
    fs::remove_all(dir, ec);  // ours, but made with other parameters
  } else if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    throw InputError("loader bench: dataset folder '" + dir.string() +
                     "' exists and was not made by the benchmark (no " + kMarker + "); give an empty or new folder");
  }
  const auto s = pl::generate_image_dataset(dir, o.classes, o.images, o.seed, o.median_kb);
  nlohmann::json marker = {{"params", params}, {"median_bytes", s.median_bytes}, {"total_bytes", s.total_bytes}};
  std::ofstream(dir / kMarker) << marker.dump(2) << "\n";
  marker["generated"] = true;
  return marker;
}

nlohmann::json run_loader_bench(const LoaderBenchOptions& o) {
  if (o.images < 1 || o.workers < 0 || o.batch_size < 1 || o.epochs < 1 || o.classes < 1) {
    throw InputError("loader bench: images, batch_size, epochs and classes must be >= 1 and workers >= 0");
  }
  // The preprocessing service first: its workers are forked before the loaders start threads.
  std::optional<BenchService> service;
  if (o.service_workers > 0 && o.decode) service.emplace(o.service_workers, 1);
  const fs::path dir = o.dataset_dir.empty()
                           ? fs::temp_directory_path() /
                                 ("gpemu-loader-bench-" + std::to_string(o.images) + "-" + std::to_string(o.seed))
                           : fs::path(o.dataset_dir);
  const auto marker = ensure_loader_bench_dataset(dir, o);
  auto dataset = pl::open_image_folder(dir);
  if (dataset.size() > o.images) dataset.samples.resize(o.images);
  const std::vector<std::string> files = dataset.files();
  std::uint64_t resident_after_evict = 0;
  auto evict = [&] {
    pl::evict_from_page_cache(files);
    resident_after_evict = std::max(resident_after_evict, pl::page_cache_resident_bytes(files));
  };
  if (!o.cold) warm_page_cache(files);

  // gpemu's loader, and its FFCV-style loader over the same images: one
  // timed run of a loader over a dataset.
  pl::LoaderOptions lo;
  lo.batch_size = o.batch_size;
  lo.num_workers = o.workers;
  lo.prefetch_factor = o.prefetch_factor;
  lo.shuffle = true;
  lo.seed = o.seed;
  lo.transform.height = lo.transform.width = o.image_size;
  lo.read_method = o.read_method;
  lo.decode_images = o.decode;
  auto timed = [&](const pl::Dataset& d, const pl::LoaderOptions& options, const std::vector<std::string>& its_files) {
    pl::DataLoader loader(d, options);
    std::size_t images = 0;
    Duration read = 0, decode = 0, collate = 0, wait = 0, gpu = 0;
    Duration evicting = 0;  // not part of the loader's time
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
      if (o.cold) {
        const auto e0 = std::chrono::steady_clock::now();
        pl::evict_from_page_cache(its_files);
        resident_after_evict = std::max(resident_after_evict, pl::page_cache_resident_bytes(its_files));
        evicting += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - e0).count();
      }
      loader.begin_epoch(static_cast<std::uint64_t>(epoch));
      while (auto b = loader.next()) {
        images += b->size();
        read += b->timing.read_ns;
        decode += b->timing.decode_ns;
        collate += b->timing.collate_ns;
        wait += b->timing.wait_ns;
        if (options.gpu_decode) {
          const pl::GpuDecodeCost c = pl::gpu_decode_cost(*options.gpu_decode, b->gpu_jpeg_pixels, b->gpu_crop_pixels,
                                                          b->size(), options.transform);
          gpu += c.engine + c.sm;
        }
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - to_seconds(evicting);
    return nlohmann::json{{"seconds", seconds},
                          {"images", images},
                          {"images_per_s", images / seconds},
                          {"read_s", to_seconds(read)},
                          {"decode_s", to_seconds(decode)},
                          {"collate_s", to_seconds(collate)},
                          {"wait_s", to_seconds(wait)},
                          {"bytes_read", loader.stats().bytes_read},
                          {"skipped", loader.stats().skipped},
                          {"gpu_s", to_seconds(gpu)}};
  };
  nlohmann::json gpemu_run = timed(dataset, lo, files);
  const double gpemu_ips = gpemu_run["images_per_s"].get<double>();
  gpemu_run.erase("images_per_s");

  nlohmann::json r;
  r["workers"] = o.workers;
  r["images"] = o.images;
  r["batch_size"] = o.batch_size;
  r["epochs"] = o.epochs;
  r["image_size"] = o.image_size;
  r["read_method"] = pl::to_string(o.read_method);
  r["cold"] = o.cold;
  r["decode"] = o.decode;
  r["dataset"] = {{"dir", dir.string()},
                  {"median_bytes", marker.value("median_bytes", 0)},
                  {"total_bytes", marker.value("total_bytes", 0)},
                  {"generated", marker.value("generated", false)}};
  r["gpemu_images_per_s"] = gpemu_ips;
  r["gpemu"] = gpemu_run;
  if (o.cold) r["gpemu"]["resident_after_evict_bytes"] = resident_after_evict;
  // The FFCV-style loader: the same images written once into an FFCV-style
  // file beside the folder (FFCV's write_imagenet.sh 500 0.50 90), memory-mapped.
  r["ffcv_images_per_s"] = nullptr;
  r["ffcv"] = nullptr;
  if (!o.run_ffcv || !o.decode) {
    r["ffcv_error"] = o.decode ? "not run (run_ffcv = false)" : "not run: bytes only (decode = false)";
  } else {
    const fs::path file = dir.string() + ".ffcv";
    std::error_code ec;
    double write_s = 0;
    if (marker.value("generated", false) || !fs::exists(file, ec)) {
      fs::remove(file, ec);
      const auto w0 = std::chrono::steady_clock::now();
      pl::write_ffcv_file(dataset, file, pl::FfcvWriteOptions{});
      write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    }
    const pl::Dataset ffcv = pl::open_ffcv_file(file);
    if (!o.cold) warm_page_cache({file.string()});
    pl::LoaderOptions fo = lo;
    fo.read_method = pl::ReadMethod::Pread;  // the FFCV-style loader maps the file (use_ffcv_loader)
    pl::use_ffcv_loader(ffcv, fo.batch_size, fo, nullptr);
    nlohmann::json f = timed(ffcv, fo, {file.string()});
    r["ffcv_images_per_s"] = f["images_per_s"];
    f.erase("images_per_s");
    f["file"] = file.string();
    f["file_bytes"] = fs::file_size(file, ec);
    f["write_s"] = write_s;  // 0: the file was already there
    r["ffcv"] = f;
  }
  // The GPU-decode loader (DALI-style): the workers parse (and, without a JPEG
  // engine, entropy-decode) for real; the GPU's decode and resize are the
  // model's, in emulated seconds; the slower of the two sets its images/s.
  r["gpu_decode_images_per_s"] = nullptr;
  r["gpu_decode"] = nullptr;
  if (o.gpu_decode.empty() || !o.decode) {
    r["gpu_decode_error"] = o.decode ? "not run (gpu_decode empty)" : "not run: bytes only (decode = false)";
  } else {
    pl::LoaderOptions go = lo;
    go.gpu_decode = pl::gpu_decode_model(find_gpu(o.gpu_decode));
    nlohmann::json g = timed(dataset, go, files);
    const double host_s = g["seconds"].get<double>();
    g["host_images_per_s"] = g["images_per_s"];
    g.erase("images_per_s");
    g["gpu"] = go.gpu_decode->gpu;
    g["engine"] = go.gpu_decode->engine;
    r["gpu_decode_images_per_s"] = g["images"].get<double>() / std::max(host_s, g["gpu_s"].get<double>());
    r["gpu_decode"] = g;
  }
  // The preprocessing service (gpemu prep serve) over the same folder: its workers read, decode and batch.
  r["service_images_per_s"] = nullptr;
  r["service"] = nullptr;
  if (!service) {
    r["service_error"] = o.decode ? "not run (service_workers = 0)" : "not run: bytes only (decode = false)";
  } else {
    prep::PrepClientOptions c;
    c.port = service->server().port();
    c.job.dataset = fs::absolute(dir).string();
    c.job.batch_size = o.batch_size;
    c.job.seed = o.seed;
    c.job.offload = pl::PrepOffload::All;
    c.job.transform = lo.transform;
    c.prefetch_factor = o.prefetch_factor;
    nlohmann::json s = time_prep_service(c, o.epochs);
    r["service_images_per_s"] = s["images_per_s"];
    s.erase("images_per_s");
    s["workers"] = o.service_workers;
    r["service"] = s;
  }
  r["torch_images_per_s"] = nullptr;
  r["ratio"] = nullptr;
  r["torch"] = nullptr;
  if (!o.run_torch) {
    r["torch_error"] = "not run (run_torch = false)";
  } else if (!o.decode) {
    r["torch_error"] = "not run: bytes only (decode = false) has no torchvision equivalent";
  } else {
    if (o.cold) evict();  // torch runs its epochs in one process: only its first is cold
    const auto t = run_torch(dir, o);
    if (t.result.is_null()) {
      r["torch_error"] = t.error;
    } else {
      const double tips = t.result["images_per_s"].get<double>();
      r["torch_images_per_s"] = tips;
      r["ratio"] = tips > 0 ? nlohmann::json(gpemu_ips / tips) : nlohmann::json(nullptr);
      r["torch"] = {{"seconds", t.result.value("seconds", 0.0)},
                    {"images", t.result.value("images", 0)},
                    {"version", t.result.value("torch_version", std::string())}};
    }
  }
  return r;
}

void print_loader_bench(const nlohmann::json& r, std::ostream& out) {
  auto num = [](const nlohmann::json& v, int decimals) {
    return v.is_number() ? bench::fixed(v.get<double>(), decimals) : std::string("-");
  };
  out << "Data loader: " << r.value("images", 0) << " JPEGs (median "
      << bench::fixed(r["dataset"].value("median_bytes", 0) / 1000.0, 1) << " KB), " << r.value("workers", 0)
      << " workers, batch " << r.value("batch_size", 0) << ", "
      << (r.value("decode", true)
              ? "RandomResizedCrop(" + std::to_string(r.value("image_size", 224)) + ") + flip + normalize"
              : std::string("bytes only (no decode)"))
      << ", " << r.value("read_method", std::string("pread")) << " reads, "
      << (r.value("cold", false) ? "cold" : "warm") << " page cache\n";
  bench::Table t({"loader", "images/s", "seconds"});
  t.add_row({"gpemu", num(r["gpemu_images_per_s"], 1), num(r["gpemu"]["seconds"], 2)});
  t.add_row({"gpemu FFCV-style (mmap)", num(r["ffcv_images_per_s"], 1),
             r["ffcv"].is_object() ? num(r["ffcv"]["seconds"], 2) : std::string("-")});
  t.add_row({r["gpu_decode"].is_object()
                 ? "gpemu GPU decode (DALI-style, " + r["gpu_decode"]["gpu"].get<std::string>() + " modelled)"
                 : std::string("gpemu GPU decode (DALI-style)"),
             num(r["gpu_decode_images_per_s"], 1),
             r["gpu_decode"].is_object() ? num(r["gpu_decode"]["seconds"], 2) : std::string("-")});
  t.add_row({r["service"].is_object() ? fmt::format("gpemu prep serve ({} worker processes, offload all)",
                                                    r["service"]["workers"].get<int>())
                                      : std::string("gpemu prep serve"),
             num(r["service_images_per_s"], 1),
             r["service"].is_object() ? num(r["service"]["seconds"], 2) : std::string("-")});
  t.add_row({"torch DataLoader", num(r["torch_images_per_s"], 1),
             r["torch"].is_object() ? num(r["torch"]["seconds"], 2) : std::string("-")});
  t.print(out);
  if (r["ratio"].is_number()) {
    out << "gpemu / torch: " << bench::fixed(r["ratio"].get<double>(), 2) << "x\n";
  } else {
    out << "torch: " << r.value("torch_error", std::string("not available")) << "\n";
  }
  if (!r["ffcv"].is_object()) out << "FFCV-style: " << r.value("ffcv_error", std::string("not run")) << "\n";
  if (!r["service"].is_object()) out << "prep serve: " << r.value("service_error", std::string("not run")) << "\n";
  if (const auto& d = r["gpu_decode"]; d.is_object()) {
    out << "GPU decode: host part " << num(d["host_images_per_s"], 1) << " images/s (measured), GPU part "
        << num(d["gpu_s"], 3) << " s for " << d.value("images", 0) << " images on the "
        << (d.value("engine", false) ? "JPEG engine" : "SMs") << " (modelled)\n";
  } else {
    out << "GPU decode: " << r.value("gpu_decode_error", std::string("not run")) << "\n";
  }
  const auto& g = r["gpemu"];
  out << "gpemu worker time: read " << num(g["read_s"], 2) << " s, decode+transform " << num(g["decode_s"], 2)
      << " s, collate " << num(g["collate_s"], 3) << " s; consumer waited " << num(g["wait_s"], 2) << " s\n";
  if (g.contains("resident_after_evict_bytes"))
    out << "page cache after eviction: " << bench::fixed(g["resident_after_evict_bytes"].get<double>() / 1e6, 1)
        << " MB of the dataset still resident\n";
}

}  // namespace gpemu
