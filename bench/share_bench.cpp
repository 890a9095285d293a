#include "share_bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "gpemu/zoo.h"
#include "share/serve.h"
#include "workload/roofline.h"

namespace gpemu {
namespace {

ShareResult run(const GpuSpec& gpu, const CostModel& costs, SharePolicy policy, std::vector<SharedJobSpec> jobs) {
  const std::unique_ptr<Clock> clock = make_virtual_clock();
  ShareSpec spec;
  spec.gpu = &gpu;
  spec.options.policy = policy;
  spec.jobs = std::move(jobs);
  ShareResult r = run_shared(*clock, costs, spec);
  for (const SharedJobResult& j : r.jobs)
    if (!j.error.empty()) throw Error(fmt::format("bench share: job {} failed: {}", j.name, j.error));
  return r;
}

nlohmann::json demand_json(const GpuSpec& gpu, const std::string& model, int batch) {
  const zoo::ModelGraph* g = zoo::find_model(model);
  if (!g) return nullptr;
  const auto t = g->phase_totals(zoo::Shape{batch, 0});
  auto d = [&](double flops, double bytes) {
    const KernelDemand k = roofline_demand(gpu, Precision::FP32, flops, bytes);
    return nlohmann::json{{"sm", k.sm}, {"bw", k.bw}};
  };
  const auto& f = t[static_cast<int>(zoo::Phase::Forward)];
  const auto& b = t[static_cast<int>(zoo::Phase::Backward)];
  const auto& o = t[static_cast<int>(zoo::Phase::Optimizer)];
  return {{"model", model},
          {"batch_size", batch},
          {"forward", d(f.flops, f.bytes_read + f.bytes_written)},
          {"backward", d(b.flops + o.flops, b.bytes_read + b.bytes_written + o.bytes_read + o.bytes_written)}};
}

}  // namespace

nlohmann::json run_share_bench(const ShareBenchOptions& o) {
  if (o.steps < 1 || o.cost_steps < 1) throw InputError("bench share: steps must be at least 1");
  const GpuSpec& gpu = find_gpu(o.gpu);
  const auto costs = make_cost_model(std::nullopt);
  const auto c = model_job("compute", o.compute_model, o.compute_batch, o.steps);
  const auto m = model_job("memory", o.memory_model, o.memory_batch, o.steps);
  const double alone_c = run(gpu, *costs, SharePolicy::Mps, {c}).jobs[0].samples_per_s();
  const double alone_m = run(gpu, *costs, SharePolicy::Mps, {m}).jobs[0].samples_per_s();
  auto c2 = c;
  c2.name = "compute2";
  const ShareResult two = run(gpu, *costs, SharePolicy::Mps, {c, c2});
  const ShareResult mixed = run(gpu, *costs, SharePolicy::Mps, {c, m});

  nlohmann::json policies = nlohmann::json::array();
  for (SharePolicy p : {SharePolicy::Fifo, SharePolicy::TimeSlice, SharePolicy::Priority, SharePolicy::Mps}) {
    const ShareResult r = run(gpu, *costs, p, {c, c2});
    policies.push_back({{"policy", to_string(p)},
                        {"ratio", {r.jobs[0].samples_per_s() / alone_c, r.jobs[1].samples_per_s() / alone_c}},
                        {"utilization_pct", r.mean_utilization_pct}});
  }
  nlohmann::json cost = nlohmann::json::array();
  for (int n : o.jobs) {
    if (n < 1) throw InputError(fmt::format("bench share: {} jobs: give at least 1", n));
    std::vector<SharedJobSpec> jobs;
    for (int i = 0; i < n; ++i)
      jobs.push_back(model_job(fmt::format("j{}", i), o.cost_model, o.cost_batch, o.cost_steps));
    const std::int64_t t0 = bench::monotonic_ns();
    run(gpu, *costs, SharePolicy::Mps, jobs);
    const double wall = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
    const double steps = static_cast<double>(n) * o.cost_steps;
    cost.push_back({{"jobs", n},
                    {"model", o.cost_model},
                    {"batch_size", o.cost_batch},
                    {"steps", steps},
                    {"wall_s", wall},
                    {"wall_us_per_step", wall / steps * 1e6}});
  }
  return {
      {"benchmark", "share"},
      {"clock", "virtual"},
      {"gpu", gpu.id},
      {"steps", o.steps},
      {"demands",
       {{"compute", demand_json(gpu, o.compute_model, o.compute_batch)},
        {"memory", demand_json(gpu, o.memory_model, o.memory_batch)}}},
      {"alone", {{"compute", alone_c}, {"memory", alone_m}}},
      {"mps",
       {{"two_compute", {two.jobs[0].samples_per_s() / alone_c, two.jobs[1].samples_per_s() / alone_c}},
        {"compute_beside_memory",
         {{"compute", mixed.jobs[0].samples_per_s() / alone_c}, {"memory", mixed.jobs[1].samples_per_s() / alone_m}}}}},
      {"policies", policies},
      {"cost", cost}};
}

void print_share_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format("Jobs sharing one emulated {} (virtual clock, {} steps per job)\n\n", r["gpu"].get<std::string>(),
                    r["steps"].get<int>());
  bench::Table d(
      {"job", "model", "batch", "forward SM", "forward BW", "backward SM", "backward BW", "alone samples/s"});
  for (const char* k : {"compute", "memory"}) {
    const auto& x = r["demands"][k];
    if (x.is_null()) continue;
    d.add_row({k, x["model"].get<std::string>(), std::to_string(x["batch_size"].get<int>()),
               bench::fixed(x["forward"]["sm"].get<double>(), 2), bench::fixed(x["forward"]["bw"].get<double>(), 2),
               bench::fixed(x["backward"]["sm"].get<double>(), 2), bench::fixed(x["backward"]["bw"].get<double>(), 2),
               bench::fixed(r["alone"][k].get<double>(), 1)});
  }
  d.print(os);
  const auto& mps = r["mps"];
  os << "\nMPS, throughput over alone:\n";
  os << fmt::format("  two compute-bound jobs:           {:.3f} and {:.3f} (about 0.5 each expected)\n",
                    mps["two_compute"][0].get<double>(), mps["two_compute"][1].get<double>());
  os << fmt::format("  compute-bound beside memory-bound: {:.3f} (compute) and {:.3f} (memory)\n",
                    mps["compute_beside_memory"]["compute"].get<double>(),
                    mps["compute_beside_memory"]["memory"].get<double>());
  os << "\nTwo identical compute-bound jobs, throughput over alone:\n";
  bench::Table p({"policy", "job 1", "job 2", "GPU utilisation %"});
  for (const auto& x : r["policies"])
    p.add_row({x["policy"].get<std::string>(), bench::fixed(x["ratio"][0].get<double>(), 3),
               bench::fixed(x["ratio"][1].get<double>(), 3), bench::fixed(x["utilization_pct"].get<double>(), 1)});
  p.print(os);
  os << "\nEmulation cost (MPS, wall time per emulated step, whole run included):\n";
  bench::Table c({"jobs", "model", "batch", "steps", "wall s", "us per step"});
  for (const auto& x : r["cost"])
    c.add_row({std::to_string(x["jobs"].get<int>()), x["model"].get<std::string>(),
               std::to_string(x["batch_size"].get<int>()), bench::grouped(x["steps"].get<double>()),
               bench::fixed(x["wall_s"].get<double>(), 3), bench::fixed(x["wall_us_per_step"].get<double>(), 1)});
  c.print(os);
}

namespace {

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

nlohmann::json summary_us(const std::vector<double>& us) {
  const bench::Summary s = bench::summarize(us);
  return {{"p50_us", s.p50}, {"p99_us", s.p99}, {"max_us", s.max}, {"mean_us", s.mean}};
}

}  // namespace

nlohmann::json run_serve_bench(const ServeBenchOptions& o) {
  if (o.op_requests < 1 || o.batch_requests < 1 || o.clients < 1 || o.client_batches < 1 || !(o.batch_us >= 0) ||
      !(o.client_batch_us >= 0))
    throw InputError("bench serve: request counts must be at least 1 and kernel times at least 0");
  std::string dir = (std::filesystem::temp_directory_path() / "gpemu-bench-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) throw Error("bench serve: cannot make a temporary folder");
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  ServeOptions so;
  so.gpu = &find_gpu(o.gpu);
  so.share.policy = SharePolicy::Mps;
  so.socket = std::filesystem::path(dir) / "s.sock";
  so.max_clients = std::max(256, o.clients + 2);
  ShareServer server(so);
  std::thread serving([&] { server.run(); });
  struct Stop {
    ShareServer& s;
    std::thread& t;
    ~Stop() {
      s.stop();
      t.join();
    }
  } stop{server, serving};

  auto time_us = [](auto&& f) {
    const std::int64_t t0 = bench::monotonic_ns();
    f();
    return static_cast<double>(bench::monotonic_ns() - t0) * 1e-3;
  };
  std::vector<double> op_us, batch_us;
  {
    ServeClient c(server.socket_path(), {"op-client", 0, 0, ""});
    for (int i = 0; i < o.op_requests; ++i) op_us.push_back(time_us([&] { c.kernel(1000); }));
    c.sync();
    const auto ns = static_cast<Duration>(o.batch_us * 1e3);
    for (int i = 0; i < o.batch_requests; ++i) batch_us.push_back(time_us([&] { c.batch(ns); }) - o.batch_us);
  }
  // Many clients at once.
  std::vector<std::vector<double>> per(static_cast<std::size_t>(o.clients));
  std::atomic<int> finished{0}, failed{0};
  std::string first_error;
  std::mutex error_mu;
  const double cpu0 = process_cpu_s();
  const std::int64_t t0 = bench::monotonic_ns();
  {
    std::vector<std::thread> threads;
    const auto ns = static_cast<Duration>(o.client_batch_us * 1e3);
    for (int k = 0; k < o.clients; ++k)
      threads.emplace_back([&, k] {
        try {
          ServeClient c(server.socket_path(), {fmt::format("client{}", k), 0, 0, ""});
          for (int i = 0; i < o.client_batches; ++i)
            per[static_cast<std::size_t>(k)].push_back(time_us([&] { c.batch(ns); }));
          ++finished;
        } catch (const std::exception& e) {
          ++failed;
          std::lock_guard lock(error_mu);
          if (first_error.empty()) first_error = e.what();
        }
      });
    for (auto& t : threads) t.join();
  }
  const double wall = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
  const double cpu = process_cpu_s() - cpu0;
  std::vector<double> all;
  for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
  const double requests = static_cast<double>(all.size());
  return {{"benchmark", "serve"},
          {"clock", "real"},
          {"gpu", so.gpu->id},
          {"policy", "mps"},
          {"cores", std::thread::hardware_concurrency()},
          {"per_op", summary_us(op_us)},
          {"per_op_requests", o.op_requests},
          {"per_batch", summary_us(batch_us)},
          {"per_batch_requests", o.batch_requests},
          {"batch_us", o.batch_us},
          {"clients",
           {{"clients", o.clients},
            {"finished", finished.load()},
            {"failed", failed.load()},
            {"error", first_error.empty() ? nlohmann::json() : nlohmann::json(first_error)},
            {"batches_each", o.client_batches},
            {"batch_us", o.client_batch_us},
            {"wall_s", wall},
            {"requests_per_s", requests / wall},
            {"round_trip", summary_us(all)},
            {"cpu_us_per_request", requests > 0 ? cpu / requests * 1e6 : 0}}}};
}

void print_serve_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format("gpemu serve in this process, {} under MPS, real clock ({} cores)\n\n", r["gpu"].get<std::string>(),
                    r["cores"].get<int>());
  bench::Table t({"request", "requests", "p50 us", "p99 us", "max us"});
  auto row = [&](const std::string& name, int n, const nlohmann::json& s) {
    t.add_row({name, std::to_string(n), bench::fixed(s["p50_us"].get<double>(), 1),
               bench::fixed(s["p99_us"].get<double>(), 1), bench::fixed(s["max_us"].get<double>(), 1)});
  };
  row("kernel (returns at once)", r["per_op_requests"].get<int>(), r["per_op"]);
  row(fmt::format("batch of {} us, less the kernel", r["batch_us"].get<double>()), r["per_batch_requests"].get<int>(),
      r["per_batch"]);
  t.print(os);
  const auto& c = r["clients"];
  os << fmt::format(
      "\n{} clients at once, {} batch requests of {} us each: {} finished, {} failed; {:.2f} s wall, {:.0f} "
      "requests/s; "
      "round trip p50 {:.0f} us, p99 {:.0f} us; {:.1f} us of CPU per request\n",
      c["clients"].get<int>(), c["batches_each"].get<int>(), c["batch_us"].get<double>(), c["finished"].get<int>(),
      c["failed"].get<int>(), c["wall_s"].get<double>(), c["requests_per_s"].get<double>(),
      c["round_trip"]["p50_us"].get<double>(), c["round_trip"]["p99_us"].get<double>(),
      c["cpu_us_per_request"].get<double>());
  if (!c["error"].is_null()) os << "first error: " << c["error"].get<std::string>() << '\n';
}

}  // namespace gpemu
