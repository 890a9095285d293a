#include "overhead_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "bench_util.h"
#include "dlio/run_json.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/timeline.h"

namespace gpemu {
namespace {

namespace fs = std::filesystem;

double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  if (!(f >> l)) return -1;
  return l;
}

nlohmann::json summary_us(const std::vector<double>& us) {
  const bench::Summary s = bench::summarize(us);
  return {{"p50", s.p50}, {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
}

// A temporary folder removed at the end (unless the user named one).
struct WorkDir {
  fs::path path;
  bool remove = false;
  explicit WorkDir(const std::string& given) {
    if (!given.empty()) {
      path = given;
      return;
    }
    std::string pattern = (fs::temp_directory_path() / "gpemu-overhead-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("bench overhead: cannot create a temporary folder");
    path = pattern;
    remove = true;
  }
  ~WorkDir() {
    if (!remove) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

dlio::DlioWorkload make_workload(const OverheadBenchOptions& o, const fs::path& dir) {
  using namespace dlio;
  DlioWorkload w;
  w.source = "gpemu bench overhead";
  w.model.name = "overhead";
  w.framework = Framework::PyTorch;
  w.reader.data_loader = DataLoaderKind::PyTorch;
  w.workflow.generate_data = true;
  w.workflow.train = true;
  w.dataset.data_folder = (dir / "data").string();
  w.dataset.format = DataFormat::Npy;
  const std::int64_t samples = static_cast<std::int64_t>(o.steps + 1) * o.batch_size;
  w.dataset.num_samples_per_file = o.samples_per_file;
  w.dataset.num_files_train = (samples + o.samples_per_file - 1) / o.samples_per_file;
  w.dataset.record_length_bytes = static_cast<double>(o.record_bytes);
  w.reader.batch_size = o.batch_size;
  w.reader.read_threads = o.read_threads;
  w.reader.prefetch_size = o.prefetch;
  w.reader.read_type = o.loader_cache ? ReadType::Memory : ReadType::OnDemand;
  w.train.epochs = o.loader_cache ? 2 : 1;
  w.train.total_training_steps = o.steps + 1;
  w.train.computation_time = TimeSpec::constant(to_seconds(o.step));
  w.gpemu.gpu = find_gpu(o.gpu).id;
  w.gpemu.step_time = StepTimeSource::Config;
  validate(w);
  return w;
}

// The kernel + synchronize loop alone: what launching and waiting cost.
nlohmann::json bare_chain(const OverheadBenchOptions& o) {
  RealClockOptions co;
  co.spin_window = o.spin_window;
  auto clock = make_real_clock(co);
  Timeline timeline(*clock);
  Device device(timeline, find_gpu(o.gpu));
  Stream& stream = device.default_stream();
  stream.launch_kernel(o.step);
  stream.synchronize();
  std::vector<double> overshoot;
  overshoot.reserve(static_cast<std::size_t>(o.steps));
  const Time t0 = clock->now();
  for (int i = 0; i < o.steps; ++i) {
    const Time a = clock->now();
    stream.launch_kernel(o.step);
    stream.synchronize();
    overshoot.push_back(to_us(clock->now() - a - o.step));
  }
  const Duration wall = clock->now() - t0;
  const double emulated = to_seconds(o.step) * o.steps;
  return {{"au_pct", 100.0 * emulated / to_seconds(wall)},
          {"us_per_step", to_us(wall) / o.steps},
          {"p99_overshoot_us", bench::percentile(overshoot, 99)}};
}

// The loader over the same files without compute: how fast batches come.
nlohmann::json loader_only(const OverheadBenchOptions& o, const dlio::DlioWorkload& w) {
  const dlio::DlioData data = dlio::open_dlio_data(w, dlio::DlioSplit::Train);
  pipeline::Dataset ds;
  ds.root = data.folder.string();
  for (const auto& f : data.files) {
    for (std::uint64_t k = 0; k < f.samples; ++k) {
      pipeline::Sample s;
      s.path = f.path.string();
      s.offset = f.first_offset + k * f.record_length;
      s.length = f.record_length;
      ds.samples.push_back(std::move(s));
    }
  }
  pipeline::LoaderOptions lo;
  lo.batch_size = static_cast<std::size_t>(o.batch_size);
  lo.num_workers = o.read_threads;
  lo.prefetch_factor = o.prefetch;
  lo.persistent_workers = true;
  lo.drop_last = true;
  lo.decode_images = false;
  pipeline::DataLoader loader(std::move(ds), lo);
  loader.begin_epoch(0);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t batches = 0;
  while (auto b = loader.next()) {
    if (++batches >= static_cast<std::uint64_t>(o.steps)) break;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"batches", batches},
          {"batches_per_s", s > 0 ? batches / s : 0.0},
          {"us_per_batch", batches > 0 ? s * 1e6 / batches : 0.0}};
}

// The figures of one run_dlio_workload result (record_steps on).
nlohmann::json variant(const dlio::DlioRunRecord& r, bool second_epoch_cached) {
  nlohmann::json v;
  const dlio::DlioPhaseResult& t = r.train.value();
  v["au_pct"] = t.au_pct;
  const double total = t.total_s;
  v["au_emulated_pct"] = total > 0 ? 100.0 * t.emulated_compute_s / total : 0.0;
  std::vector<double> load_us, over_us, step_au;
  nlohmann::json per_epoch = nlohmann::json::array();
  for (const dlio::DlioEpoch& e : t.per_epoch.value()) {
    const double et = e.total_s;
    per_epoch.push_back(
        {{"epoch", e.epoch},
         {"au_pct", e.au_pct},
         {"au_emulated_pct", et > 0 ? 100.0 * e.emulated_compute_s / et : 0.0},
         {"source", r.synthetic_data ? "synthetic (memory)"
                                     : (second_epoch_cached && e.epoch == 2 ? "loader cache" : "page cache")}});
    for (const dlio::DlioStepRow& s : e.step_records.value()) {
      if (s.step == 1) continue;  // left out of the metric
      load_us.push_back(s.load_s * 1e6);
      over_us.push_back((s.compute_s - s.emulated_s) * 1e6);
      if (s.proc_s > 0) step_au.push_back(100.0 * s.emulated_s / s.proc_s);
    }
  }
  v["per_epoch"] = per_epoch;
  // Per step: emulated kernel time / (data wait + launch + kernel + wake-up);
  // its median shows the steady state when the host is not preempted.
  v["step_au_emulated_pct_p50"] = bench::percentile(step_au, 50);
  const double measured = std::max<double>(1, static_cast<double>(t.measured_steps));
  const double compute = t.compute_s, load = t.load_wait_s;
  v["per_step_us"] = {{"total", total * 1e6 / measured},
                      {"compute", compute * 1e6 / measured},
                      {"emulated", t.emulated_compute_s * 1e6 / measured},
                      {"load_wait", load * 1e6 / measured},
                      {"other", (total - compute - load) * 1e6 / measured}};
  v["load_wait_us"] = summary_us(load_us);
  v["compute_overshoot_us"] = summary_us(over_us);
  return v;
}

}  // namespace

nlohmann::json run_overhead_bench(const OverheadBenchOptions& o) {
  auto bad = [](const std::string& what) { throw InputError("bench overhead: " + what); };
  if (o.steps < 1) bad(fmt::format("steps {} is not valid; accepted: an integer >= 1", o.steps));
  if (o.step <= 0) bad(fmt::format("step {} ns is not valid; accepted: a duration > 0", o.step));
  if (o.batch_size < 1) bad(fmt::format("batch_size {} is not valid; accepted: an integer >= 1", o.batch_size));
  if (o.record_bytes < 1) bad("record_bytes must be >= 1");
  if (o.samples_per_file < 1) bad("samples_per_file must be >= 1");
  if (o.read_threads < 0) bad(fmt::format("read_threads {} is not valid; accepted: an integer >= 0", o.read_threads));
  if (o.prefetch < 1) bad(fmt::format("prefetch {} is not valid; accepted: an integer >= 1", o.prefetch));
  const GpuSpec& gpu = find_gpu(o.gpu);

  const auto wall0 = std::chrono::steady_clock::now();
  nlohmann::json out;
  out["benchmark"] = "overhead";
  out["clock"] = "real";
  out["gpu"] = gpu.id;
  out["steps"] = o.steps;
  out["step_us"] = to_us(o.step);
  out["batch_size"] = o.batch_size;
  out["record_bytes"] = o.record_bytes;
  out["read_threads"] = o.read_threads;
  out["prefetch"] = o.prefetch;
  out["loader_cache"] = o.loader_cache;
  out["hardware_threads"] = std::thread::hardware_concurrency();
  out["load_avg_1m_start"] = load_average();

  WorkDir dir(o.dataset_dir);
  dlio::DlioWorkload w = make_workload(o, dir.path);
  dlio::DlioRunOptions ro;
  ro.clock = ClockKind::Real;
  ro.world_size = 1;
  ro.spin_window = o.spin_window;
  ro.record_steps = true;
  // 1. DLIO's synthetic loader: batches in memory, nothing read: what the
  //    emulation itself costs per step. 2. The same steps reading the files
  //    through gpemu's loader (page cache, then the loader cache).
  dlio::DlioWorkload synthetic = w;
  synthetic.reader.data_loader = dlio::DataLoaderKind::Synthetic;
  synthetic.workflow.generate_data = false;
  synthetic.train.epochs = 1;
  const dlio::DlioRunRecord rs = dlio::run_dlio_workload(synthetic, ro);
  const dlio::DlioRunRecord rf = dlio::run_dlio_workload(w, ro);

  out["epochs"] = rf.train.value().epochs;
  out["au_pct"] = rs.train.value().au_pct;
  out["target_au_pct"] = 99.0;
  out["meets_target"] = rs.train.value().au_pct >= 99.0;
  out["dlio_reported_au_pct"] = "15-20";
  out["synthetic"] = variant(rs, false);
  out["files"] = variant(rf, o.loader_cache);
  out["au_emulated_pct"] = out["synthetic"]["au_emulated_pct"];
  out["files_au_pct"] = rf.train.value().au_pct;
  out["loader"] = dlio::dlio_loader_json(rf.loader.value());

  out["bare_chain"] = bare_chain(o);
  out["loader_only"] = loader_only(o, w);
  out["load_avg_1m_end"] = load_average();
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

void print_overhead_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format(
      "DLIO runner overhead, real clock, {} steps of {:.0f} us, batch {} x {} B, {} loader workers, "
      "emulated {}\n",
      r.at("steps").get<int>(), r.at("step_us").get<double>(), r.at("batch_size").get<int>(),
      r.at("record_bytes").get<std::uint64_t>(), r.at("read_threads").get<int>(), r.at("gpu").get<std::string>());
  bench::Table t({"epoch", "data from", "AU % (DLIO)", "AU % (emulated/wall)", "data wait us/step",
                  "sync overshoot us/step", "other us/step"},
                 2);
  for (const char* name : {"synthetic", "files"}) {
    const auto& v = r.at(name);
    for (const auto& e : v.at("per_epoch")) {
      t.add_row({std::to_string(e.at("epoch").get<int>()), e.at("source").get<std::string>(),
                 bench::fixed(e.at("au_pct").get<double>(), 2), bench::fixed(e.at("au_emulated_pct").get<double>(), 2),
                 "", "", ""});
    }
    const auto& p = v.at("per_step_us");
    t.add_row({"all", name, bench::fixed(v.at("au_pct").get<double>(), 2),
               bench::fixed(v.at("au_emulated_pct").get<double>(), 2), bench::fixed(p.at("load_wait").get<double>(), 2),
               bench::fixed(p.at("compute").get<double>() - p.at("emulated").get<double>(), 2),
               bench::fixed(p.at("other").get<double>(), 2)});
  }
  t.print(os);
  for (const char* name : {"synthetic", "files"}) {
    const auto& v = r.at(name);
    os << fmt::format("{}: median step AU (emulated/wall) {:.2f} %; ", name,
                      v.at("step_au_emulated_pct_p50").get<double>());
    os << fmt::format(
        "data wait p50/p99/max {:.2f}/{:.2f}/{:.2f} us; synchronize overshoot p50/p99/max "
        "{:.2f}/{:.2f}/{:.2f} us\n",
        v["load_wait_us"]["p50"].get<double>(), v["load_wait_us"]["p99"].get<double>(),
        v["load_wait_us"]["max"].get<double>(), v["compute_overshoot_us"]["p50"].get<double>(),
        v["compute_overshoot_us"]["p99"].get<double>(), v["compute_overshoot_us"]["max"].get<double>());
  }
  os << fmt::format(
      "bare kernel+synchronize loop: AU {:.2f} % ({:.2f} us per step); loader alone: {:.0f} batches/s "
      "({:.2f} us per batch)\n",
      r["bare_chain"]["au_pct"].get<double>(), r["bare_chain"]["us_per_step"].get<double>(),
      r["loader_only"]["batches_per_s"].get<double>(), r["loader_only"]["us_per_batch"].get<double>());
  os << fmt::format(
      "AU (synthetic, in-memory batches) {:.2f} %, target >= {:.0f} %: {} (DLIO reports {} % for steps "
      "under 500 us)\n",
      r.at("au_pct").get<double>(), r.at("target_au_pct").get<double>(),
      r.at("meets_target").get<bool>() ? "met" : "NOT met", r.at("dlio_reported_au_pct").get<std::string>());
  os << fmt::format("host: {} hardware threads, load average {:.2f} -> {:.2f}; wall {:.1f} s\n",
                    r.at("hardware_threads").get<int>(), r.at("load_avg_1m_start").get<double>(),
                    r.at("load_avg_1m_end").get<double>(), r.at("wall_s").get<double>());
}

}  // namespace gpemu
