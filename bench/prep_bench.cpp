#include "prep_bench.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/pipeline.h"
#include "gpemu/prep_serve.h"
#include "loader_bench.h"

namespace gpemu {

namespace fs = std::filesystem;
namespace pl = gpemu::pipeline;

namespace {

pl::LoaderOptions loader_options(const PrepBenchOptions& o, int workers) {
  pl::LoaderOptions lo;
  lo.batch_size = o.batch_size;
  lo.num_workers = workers;
  lo.shuffle = true;
  lo.seed = o.seed;
  lo.transform.height = lo.transform.width = o.image_size;
  return lo;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Images a consumer that takes each batch at once gets from `source` over
// epochs 1..epochs (epoch 0 warms it when `warm`), and the source clock's seconds.
std::pair<std::size_t, double> consume(pl::BatchSource& source, Clock& clock, int epochs, bool warm) {
  if (warm) {
    source.begin_epoch(0);
    while (source.next({})) {
    }
  }
  std::size_t images = 0;
  const Time start = clock.now();
  for (int e = 1; e <= epochs; ++e) {
    source.begin_epoch(static_cast<std::uint64_t>(e));
    while (auto b = source.next({})) images += static_cast<std::size_t>(b->samples);
  }
  return {images, to_seconds(clock.now() - start)};
}

double images_per_s(pl::BatchSource& source, Clock& clock, int epochs, bool warm) {
  const auto [images, seconds] = consume(source, clock, epochs, warm);
  return static_cast<double>(images) / seconds;
}

nlohmann::json side_by_side(double real, double modelled) {
  return {{"real_images_per_s", real}, {"modelled_images_per_s", modelled}, {"ratio", real / modelled}};
}

}  // namespace

BenchService::BenchService(int workers, int cpus_per_worker) {
  prep::PrepServerOptions so;
  so.workers = workers;
  so.cpus_per_worker = cpus_per_worker;
  so.quiet = true;
  server_ = std::make_unique<prep::PrepServer>(so);
  thread_ = std::thread([this] { server_->run(); });
}

BenchService::~BenchService() {
  server_->stop();
  thread_.join();
}

nlohmann::json time_prep_service(const prep::PrepClientOptions& client, int epochs) {
  auto clock = make_clock(ClockKind::Real);
  prep::PrepServiceSource service(*clock, client);
  const auto [images, seconds] = consume(service, *clock, epochs, true);
  const prep::PrepServiceCounters c = service.counters();
  return {{"images_per_s", static_cast<double>(images) / seconds},
          {"seconds", seconds},
          {"images", images},
          {"worker_cpu_s", c.worker_cpu_s},
          {"worker_samples_decoded", c.worker_samples_decoded},
          {"client_samples_decoded", c.client_samples_decoded}};
}

nlohmann::json run_prep_bench(const PrepBenchOptions& o) {
  if (o.images < 1 || o.batch_size < 1 || o.epochs < 1 || o.workers < 1 || o.worker_cpus < 1 || o.local_workers < 1 ||
      o.image_size < 1)
    throw InputError(
        "prep bench: images, batch size, image size, epochs, workers, worker CPUs and local workers must be >= 1");
  const pl::PrepOffload offload = pl::parse_prep_offload(o.offload, "--offload");
  if (offload == pl::PrepOffload::None)
    throw InputError("prep bench: --offload none runs no service: read, decode or all");
  // The service first: its workers are forked before this process starts a thread.
  BenchService service(o.workers, o.worker_cpus);

  LoaderBenchOptions lb;
  lb.images = o.images;
  lb.classes = 10;
  lb.median_kb = o.median_kb;
  lb.seed = o.seed;
  const fs::path dir = o.dataset_dir.empty()
                           ? fs::temp_directory_path() / fmt::format("gpemu-prep-bench-{}-{}", o.images, o.seed)
                           : fs::path(o.dataset_dir);
  const nlohmann::json marker = ensure_loader_bench_dataset(dir, lb);
  const pl::Dataset dataset = pl::open_image_folder(dir);

  // The per-sample costs on one core: the real loader in this thread.
  auto real = make_clock(ClockKind::Real);
  pl::LoaderModelOptions m;
  double local_real = 0;
  {
    pl::PipelineSource local(*real, dataset, loader_options(o, 0));
    local.begin_epoch(0);
    while (local.next({})) {
    }
    Duration read = 0, decode = 0;
    std::size_t samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    local.begin_epoch(1);
    while (auto b = local.next({})) {
      read += b->read;
      decode += b->decode;
      samples += static_cast<std::size_t>(b->samples);
    }
    local_real = static_cast<double>(samples) / seconds_since(t0);
    m.read_per_sample = read / static_cast<Duration>(samples);
    m.decode_per_sample = decode / static_cast<Duration>(samples);
  }
  m.read_bytes_per_s = 0;
  m.decode_ns_per_byte = 0;
  m.cores = 64;  // the client's threads have cores of their own, as the service's workers do
  const auto shared = std::make_shared<const pl::Dataset>(dataset);
  double local_modelled = 0;
  {
    auto clock = make_virtual_clock();
    pl::ModelledLoader loader(*clock, shared, loader_options(o, 0), m);
    local_modelled = images_per_s(loader, *clock, 1, false);
  }

  // The service, real and modelled.
  prep::PrepClientOptions co;
  co.port = service.server().port();
  co.job.dataset = fs::absolute(dir).string();
  co.job.batch_size = o.batch_size;
  co.job.seed = o.seed;
  co.job.offload = offload;
  co.job.transform = loader_options(o, 0).transform;
  co.local_workers = o.local_workers;
  const nlohmann::json timed = time_prep_service(co, o.epochs);
  const double service_real = timed["images_per_s"].get<double>();

  const NetworkSpec net = parse_network(o.network);
  pl::PrepServiceOptions p;
  p.workers = o.workers;
  p.cpus_per_worker = o.worker_cpus;
  p.offload = offload;
  p.nic_bytes_per_s = net.nic_bytes_per_s();
  p.latency = net.latency;
  p.network = net.name;
  pl::LoaderModelOptions mp = m;
  mp.prep_service = p;
  double service_modelled = 0;
  {
    auto clock = make_virtual_clock();
    pl::ModelledLoader loader(*clock, shared, loader_options(o, o.local_workers), mp);
    service_modelled = images_per_s(loader, *clock, o.epochs, false);
  }

  nlohmann::json service_json = side_by_side(service_real, service_modelled);
  for (const char* k : {"worker_cpu_s", "worker_samples_decoded", "client_samples_decoded"}) service_json[k] = timed[k];
  return {{"images", dataset.size()},
          {"batch_size", o.batch_size},
          {"image_size", o.image_size},
          {"workers", o.workers},
          {"worker_cpus", o.worker_cpus},
          {"offload", pl::to_string(offload)},
          {"local_workers", o.local_workers},
          {"epochs", o.epochs},
          {"network", net.name},
          {"cores_note",
           service.server().cpu_note().empty() ? nlohmann::json(nullptr) : nlohmann::json(service.server().cpu_note())},
          {"per_sample",
           {{"read_us", to_seconds(m.read_per_sample) * 1e6}, {"decode_us", to_seconds(m.decode_per_sample) * 1e6}}},
          {"local", side_by_side(local_real, local_modelled)},
          {"service", service_json},
          {"dataset", {{"dir", dir.string()}, {"generated", marker.value("generated", false)}}}};
}

void print_prep_bench(const nlohmann::json& r, std::ostream& out) {
  out << fmt::format(
      "{} images, batch {}, {}x{} outputs; per sample on one core: read {:.1f} us, decode {:.1f} us (the model's "
      "costs)\n",
      r["images"].get<std::size_t>(), r["batch_size"].get<std::size_t>(), r["image_size"].get<int>(),
      r["image_size"].get<int>(), r["per_sample"]["read_us"].get<double>(), r["per_sample"]["decode_us"].get<double>());
  bench::Table t({"pipeline", "real images/s", "modelled images/s", "real / modelled"});
  auto row = [&](const std::string& name, const nlohmann::json& x) {
    t.add_row({name, bench::fixed(x["real_images_per_s"].get<double>(), 0),
               bench::fixed(x["modelled_images_per_s"].get<double>(), 0), bench::fixed(x["ratio"].get<double>(), 3)});
  };
  row("local loader, 1 core", r["local"]);
  row(fmt::format("service: {} workers x {} CPUs, offload {}", r["workers"].get<int>(), r["worker_cpus"].get<int>(),
                  r["offload"].get<std::string>()),
      r["service"]);
  t.print(out);
  out << fmt::format("modelled network: {}; the workers' CPU: {:.2f} s over {} epochs (and one to warm)\n",
                     r["network"].get<std::string>(), r["service"]["worker_cpu_s"].get<double>(),
                     r["epochs"].get<int>());
  if (!r["cores_note"].is_null()) out << "note: " << r["cores_note"].get<std::string>() << '\n';
}

}  // namespace gpemu
