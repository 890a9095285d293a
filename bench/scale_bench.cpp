#include "scale_bench.h"

#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/job.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/train.h"

namespace gpemu {
namespace {

// A line of /proc/self/status ("VmHWM", "VmRSS"), in bytes; 0 where unreadable.
std::uint64_t proc_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return 0;
}

// The kernel's peak-RSS counter only grows; resetting it (writing 5 to
// clear_refs) lets each job report its own peak.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return static_cast<bool>(out);
}

// The 1-minute load average (the machine's other work shows in wall times).
double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = 0;
  in >> l;
  return in ? l : 0.0;
}

// Fewest nodes of at most kMaxGpusPerNode GPUs that split `gpus` evenly.
int nodes_for(int gpus) {
  for (int n = (gpus + kMaxGpusPerNode - 1) / kMaxGpusPerNode;; ++n)
    if (gpus % n == 0) return n;
}

// When every rank has ended its warm-up: the rank's host reports each step
// once it has issued it and, with sync every iteration, waited for it.
class WarmupWatch : public JobObserver {
 public:
  WarmupWatch(int gpus, int warmup) : gpus_(gpus), warmup_(warmup) {}
  void on_step(const StepEvent& e) override {
    if (e.phase != RunPhase::Train || e.done != warmup_) return;
    std::lock_guard lock(mu_);
    if (++reported_ == gpus_) at_ns_ = bench::monotonic_ns();
  }
  // 0 until every rank has reported its warm-up's last step.
  std::int64_t at_ns() const {
    std::lock_guard lock(mu_);
    return at_ns_;
  }

 private:
  mutable std::mutex mu_;
  int gpus_, warmup_;
  int reported_ = 0;
  std::int64_t at_ns_ = 0;
};

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One epoch of `epoch_nodes` nodes of 8 GPUs through the modelled loader
// with a partitioned distributed cache: `gpemu train --clock virtual
// --virtual-dataset imagenette10g --nodes N --gpus-per-node 8 --workers W
// --cores C --storage nvme --page-cache-bytes 0 --cache-bytes B
// --distributed-cache partitioned --network NET --epochs 2 --cv 0`'s data
// and cluster (the step program is JobSpec's default, not the command's, so
// the emulated time differs from that command's by a few per cent): the
// first epoch fills the caches from each node's disk, the second reads them
// (the counters are the second's; the same as that command's).
nlohmann::json run_epoch_of_nodes(const ScaleBenchOptions& o, const GpuSpec& gpu, const NetworkSpec& network,
                                  const CostModel& costs) {
  if (o.epoch_nodes < 0 || o.epoch_batch_size < 1 || o.epoch_workers < 0 || o.epoch_cores < 1)
    throw InputError(
        fmt::format("scale bench: the epoch of nodes needs 0 or more nodes (--epoch-nodes {}), a batch "
                    "size of at least 1 ({}), 0 or more workers ({}) and at least 1 core per node ({})",
                    o.epoch_nodes, o.epoch_batch_size, o.epoch_workers, o.epoch_cores));
  if (o.epoch_nodes == 0) return nullptr;
  const bool peak_reset = reset_peak_rss();
  const std::int64_t t0 = bench::monotonic_ns();
  const double cpu0 = process_cpu_s();
  nlohmann::json e;
  {
    auto clock = make_virtual_clock();
    JobSpec job;
    job.cluster.gpu = &gpu;
    job.cluster.nodes = o.epoch_nodes;
    job.cluster.gpus = o.epoch_nodes * kMaxGpusPerNode;
    job.cluster.network = network;
    job.batch_size = o.epoch_batch_size;
    job.compute.model.name = o.model;
    job.compute.variation.cv = 0;
    job.data.source = DataSource::Modelled;
    job.data.dataset = pipeline::virtual_dataset("imagenette10g");
    job.data.loader.batch_size = static_cast<std::size_t>(o.epoch_batch_size);
    job.data.loader.num_workers = o.epoch_workers;
    job.data.loader.shuffle = true;
    job.data.loader.pin_memory = true;
    job.data.loader.world_size = job.cluster.gpus;
    job.data.model.cores = o.epoch_cores;
    job.data.model.cache_bytes = o.epoch_cache_bytes;
    job.data.model.storage = pipeline::parse_storage("nvme");
    job.data.model.page_cache_bytes = 0;
    job.data.distributed_cache = pipeline::DistributedCacheKind::Partitioned;
    job.schedule.epochs = 2;
    e["nodes"] = o.epoch_nodes;
    e["gpus"] = job.cluster.gpus;
    e["batch_size"] = o.epoch_batch_size;
    e["workers_per_gpu"] = o.epoch_workers;
    e["cores_per_node"] = o.epoch_cores;
    e["cache_bytes_per_node"] = o.epoch_cache_bytes;
    e["dataset"] = "imagenette10g";
    e["samples"] = job.data.dataset.size();
    Job j(*clock, costs, job);
    const RunRecord record = j.run();
    e["emulated_s"] = to_seconds(summarize(record).elapsed);
    std::uint64_t hits = 0, remote = 0, reads = 0, net = 0;
    for (const train::NodeEpochReads& r : train::node_epoch_reads(record))
      if (r.epoch == 1)
        hits += r.cache_hits, remote += r.remote_hits, reads += r.storage_requests, net += r.network_bytes;
    e["cache_hits"] = hits;
    e["remote_hits"] = remote;
    e["storage_reads"] = reads;
    e["network_bytes"] = net;
  }
  e["wall_s"] = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
  e["cpu_s"] = process_cpu_s() - cpu0;
  e["peak_rss_bytes"] = peak_reset ? proc_status_bytes("VmHWM") : 0;
  e["target_wall_s"] = o.epoch_target_wall_s;
  return e;
}

}  // namespace

nlohmann::json run_scale_bench(const ScaleBenchOptions& o) {
  if (o.steps < 1) throw InputError(fmt::format("scale bench: --steps {}: need at least 1", o.steps));
  if (o.warmup < 0) throw InputError(fmt::format("scale bench: --warmup {}: need 0 or more", o.warmup));
  if (o.gpus.empty()) throw InputError("scale bench: give at least one job size (--gpus)");
  for (int g : o.gpus)
    if (g < 1) throw InputError(fmt::format("scale bench: a job of {} GPUs: need at least 1", g));
  const GpuSpec& spec = find_gpu(o.gpu);
  const NetworkSpec network = parse_network(o.network);
  const SyncMode sync = parse_sync_mode(o.sync);
  auto costs = make_cost_model(std::nullopt);
  if (o.model.empty()) throw InputError("scale bench: --model is empty; give a model (see 'gpemu models')");

  nlohmann::json out;
  out["benchmark"] = "scale";
  out["clock"] = "virtual";
  out["gpu"] = spec.id;
  out["model"] = o.model;
  out["batch_size"] = o.batch_size;
  out["network"] = network.name;
  out["sync"] = o.sync;
  out["steps"] = o.steps;
  out["warmup"] = o.warmup;
  out["target_steps_per_s"] = o.target_steps_per_s;
  out["load_average_1m"] = load_average();
  nlohmann::json jobs = nlohmann::json::array();
  std::vector<double> xs, ys, steady_ys;
  for (int gpus : o.gpus) {
    const int nodes = nodes_for(gpus);
    const bool peak_reset = reset_peak_rss();
    const std::uint64_t rss0 = proc_status_bytes("VmRSS");
    const std::int64_t t0 = bench::monotonic_ns();
    const double cpu0 = process_cpu_s();
    TimelineStats st;
    Time emulated = 0;
    std::int64_t warm_ns = 0, ran_ns = 0;  // every rank past its warm-up; run() returned
    {
      auto clock = make_virtual_clock();
      // `gpemu train --clock virtual --synthetic -n steps --gpus N --nodes M
      // --cv 0`: the same JobSpec the train command builds.
      JobSpec job;
      job.cluster.gpu = &spec;
      job.cluster.gpus = gpus;
      job.cluster.nodes = nodes;
      job.cluster.network = network;
      job.batch_size = o.batch_size;
      job.compute.model.name = o.model;
      job.compute.sync = sync;
      job.compute.variation.cv = 0;
      job.data.source = DataSource::Synthetic;
      job.data.synthetic_batches = o.steps;
      Job j(*clock, *costs, job);
      WarmupWatch watch(gpus, o.warmup);
      RunRecord record = j.run(&watch);
      ran_ns = bench::monotonic_ns();
      warm_ns = o.warmup == 0 ? t0 : watch.at_ns();
      const RunSummary r = summarize(record);
      st = j.timeline().stats();
      emulated = r.elapsed;
    }
    const double wall = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
    const double cpu = process_cpu_s() - cpu0;
    const std::uint64_t peak = proc_status_bytes("VmHWM");
    nlohmann::json j;
    j["gpus"] = gpus;
    j["nodes"] = nodes;
    j["wall_s"] = wall;
    j["cpu_s"] = cpu;
    j["wall_s_per_step"] = wall / o.steps;
    j["steps_per_s"] = wall > 0 ? o.steps / wall : 0.0;
    const int steady_steps = o.steps - o.warmup;
    const double steady = static_cast<double>(ran_ns - warm_ns) * 1e-9;
    j["warmup_s"] = warm_ns > 0 ? nlohmann::json(static_cast<double>(warm_ns - t0) * 1e-9) : nlohmann::json();
    if (steady_steps > 0 && warm_ns > 0 && steady > 0) {
      j["steady_wall_s_per_step"] = steady / steady_steps;
      j["steady_steps_per_s"] = steady_steps / steady;
    } else {
      j["steady_wall_s_per_step"] = nullptr;
      j["steady_steps_per_s"] = nullptr;
    }
    j["emulated_s_per_step"] = to_seconds(emulated) / o.steps;
    j["memory_bytes_per_gpu"] = peak_reset && peak > rss0 ? static_cast<double>(peak - rss0) / gpus : 0.0;
    j["timeline"] = {{"ops_issued", st.ops_issued},   {"ops_pending_path", st.ops_pending_path},
                     {"resolutions", st.resolutions}, {"restarts", st.restarts},
                     {"ops_loaded", st.ops_loaded},   {"events", st.events},
                     {"water_fills", st.water_fills}, {"flow_rate_updates", st.flow_rate_updates}};
    xs.push_back(std::log(static_cast<double>(gpus)));
    ys.push_back(std::log(wall / o.steps));
    if (j["steady_wall_s_per_step"].is_number())
      steady_ys.push_back(std::log(j["steady_wall_s_per_step"].get<double>()));
    jobs.push_back(std::move(j));
  }
  const bool of_steady = steady_ys.size() == ys.size();
  if (of_steady) ys = steady_ys;
  // Least-squares slope of log(wall per step) on log(GPUs).
  double exponent = 0;
  if (xs.size() >= 2) {
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += ys[i];
    mx /= static_cast<double>(xs.size());
    my /= static_cast<double>(ys.size());
    double sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
    exponent = sxx > 0 ? sxy / sxx : 0;
  }
  out["exponent"] = exponent;
  out["exponent_of"] = of_steady ? "steady" : "overall";
  out["largest_overall_steps_per_s"] = jobs.back()["steps_per_s"];
  out["largest_steps_per_s"] =
      jobs.back()["steady_steps_per_s"].is_number() ? jobs.back()["steady_steps_per_s"] : jobs.back()["steps_per_s"];
  out["jobs"] = std::move(jobs);
  out["epoch"] = run_epoch_of_nodes(o, spec, network, *costs);
  return out;
}

void print_scale_bench(const nlohmann::json& r, std::ostream& os) {
  const int warmup = r.value("warmup", 0);
  os << fmt::format(
      "scale: {} x{} per GPU, {} steps per GPU ({} of warm-up), virtual clock, {} between nodes, sync every {}\n",
      r.at("model").get<std::string>(), r.at("batch_size").get<int>(), r.at("steps").get<int>(), warmup,
      r.at("network").get<std::string>(), r.at("sync").get<std::string>());
  auto fixed_or_dash = [](const nlohmann::json& v, double scale, int digits) {
    return v.is_number() ? bench::fixed(scale * v.get<double>(), digits) : std::string("-");
  };
  bench::Table t({"GPUs", "nodes", "wall s", "CPU s", "warm-up s", "steady ms/step", "steady steps/s", "steps/s",
                  "emulated ms/step", "KiB/GPU", "timeline ops", "restarts", "events"});
  for (const nlohmann::json& j : r.at("jobs")) {
    const nlohmann::json& tl = j.at("timeline");
    const nlohmann::json& steady = j.at("steady_steps_per_s");
    t.add_row({std::to_string(j.at("gpus").get<int>()), std::to_string(j.at("nodes").get<int>()),
               bench::fixed(j.at("wall_s").get<double>(), 2), bench::fixed(j.at("cpu_s").get<double>(), 2),
               fixed_or_dash(j.at("warmup_s"), 1, 2), fixed_or_dash(j.at("steady_wall_s_per_step"), 1e3, 1),
               steady.is_number() ? bench::significant(steady.get<double>(), 3) : std::string("-"),
               bench::significant(j.at("steps_per_s").get<double>(), 3),
               bench::fixed(1e3 * j.at("emulated_s_per_step").get<double>(), 1),
               bench::grouped(j.at("memory_bytes_per_gpu").get<double>() / 1024),
               bench::grouped(tl.at("ops_issued").get<double>()), bench::grouped(tl.at("restarts").get<double>()),
               bench::grouped(tl.at("events").get<double>())});
  }
  t.print(os);
  const bool of_steady = r.value("exponent_of", std::string("overall")) == "steady";
  os << fmt::format("{} wall time per step grows as GPUs^{:.2f} (least-squares fit; 1 = linear)\n",
                    of_steady ? "steady" : "overall", r.at("exponent").get<double>());
  os << fmt::format("1-minute load average at the start: {:.2f} (wall time includes waiting for a CPU)\n",
                    r.value("load_average_1m", 0.0));
  os << fmt::format(
      "largest job: {} {} steps per wall second ({} overall, with building the job and the warm-up); "
      "target {}\n",
      bench::significant(r.at("largest_steps_per_s").get<double>(), 3), of_steady ? "steady" : "overall",
      bench::significant(r.value("largest_overall_steps_per_s", 0.0), 3),
      bench::significant(r.at("target_steps_per_s").get<double>(), 3));
  const nlohmann::json& e = r.value("epoch", nlohmann::json());
  if (!e.is_object()) return;
  os << fmt::format(
      "\nepochs of {} nodes x 8 GPUs ({} GPUs, batch {} per GPU), {} workers per GPU, {} cores per node, an nvme "
      "disk and a {} GiB partitioned cache per node, two {} epochs ({} samples each; the first fills the caches):\n",
      e.at("nodes").get<int>(), e.at("gpus").get<int>(), e.at("batch_size").get<int>(),
      e.at("workers_per_gpu").get<int>(), e.at("cores_per_node").get<int>(),
      bench::fixed(e.at("cache_bytes_per_node").get<double>() / (1u << 30), 1), e.at("dataset").get<std::string>(),
      bench::grouped(e.at("samples").get<double>()));
  os << fmt::format(
      "  wall {} s for both (target: one epoch in at most {} s on one core), CPU {} s, peak resident {} MiB; emulated "
      "{} s; second epoch: cache hits {}, remote hits {}, storage reads {}, {} MB over the network\n",
      bench::fixed(e.at("wall_s").get<double>(), 2), bench::significant(e.at("target_wall_s").get<double>(), 3),
      bench::fixed(e.at("cpu_s").get<double>(), 2), bench::fixed(e.at("peak_rss_bytes").get<double>() / (1u << 20), 0),
      bench::fixed(e.at("emulated_s").get<double>(), 3), bench::grouped(e.at("cache_hits").get<double>()),
      bench::grouped(e.at("remote_hits").get<double>()), bench::grouped(e.at("storage_reads").get<double>()),
      bench::fixed(e.at("network_bytes").get<double>() / 1e6, 0));
}

}  // namespace gpemu
