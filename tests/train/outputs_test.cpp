// Trace, report and JSON outputs of a training run.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/timeline.h"
#include "gpemu/train.h"
#include "support/train_test_util.h"
#include "train/summary_json.h"

namespace gpemu::train {
namespace {

using testing::exact_options;
using testing::FixedCosts;
using testing::modelled_sources;

TEST(Outputs, TraceHasLoaderWorkerSpansAndStallSpansPerGpuHostThread) {
  auto clock = make_virtual_clock();
  FixedCosts costs;
  Trainer t(*clock, find_gpu("v100"), costs, exact_options(2, 4));
  t.timeline().enable_trace(true);
  // Loaders slower than the GPUs: two workers finish a pair of batches every
  // 80 ms; the first of each pair stalls its GPU.
  TrainResult r = t.run(modelled_sources(*clock, t, 32, 4, /*workers=*/2, 20 * kMillisecond));
  add_stall_spans(r, t.timeline());
  std::ostringstream out;
  write_chrome_trace(t.timeline().trace_records(), t.timeline().host_spans(), t.trace_devices(), out);
  const auto j = nlohmann::json::parse(out.str());

  std::map<int, std::string> process;                 // pid -> name
  std::map<std::pair<int, int>, std::string> thread;  // (pid, tid) -> name
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  std::map<std::string, int> spans;  // "track: name" -> count
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto it = thread.find({e["pid"], e["tid"]});
    if (it == thread.end()) continue;
    ++spans[it->second + ": " + e["name"].get<std::string>()];
  }
  for (int g = 0; g < 2; ++g) {
    for (int w = 0; w < 2; ++w) {
      const std::string track = fmt::format("GPU {} loader worker {}", g, w);
      EXPECT_EQ(spans[track + ": read"], 2) << track;  // 4 batches per GPU, 2 per worker
      EXPECT_EQ(spans[track + ": decode"], 2) << track;
    }
    const std::string host = fmt::format("train loop {}", g);
    EXPECT_EQ(spans[host + ": data stall"], 2) << host;
    EXPECT_EQ(spans[host + ": next() batch 0"], 1) << host;
  }
  std::set<std::string> names;
  for (const auto& [pid, name] : process) names.insert(name);
  EXPECT_TRUE(names.count("GPU 0 (V100-PCIE-32GB)"));
  EXPECT_TRUE(names.count("train loop"));
}

TEST(Outputs, JsonHasTheSummaryKeys) {
  auto clock = make_virtual_clock();
  FixedCosts costs;
  Trainer t(*clock, find_gpu("v100"), costs, exact_options(2, 4));
  const nlohmann::json j = summary_json(t.run(modelled_sources(*clock, t, 32, 4, 1, 5 * kMillisecond)));
  for (const char* k : {"epoch_s", "samples_per_s", "gpu_util_pct", "data_stall_pct", "h2d_pct", "peak_allocated_mib",
                        "iterations", "samples", "all_reduce_pct", "all_reduces", "per_gpu", "elapsed_s"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["iterations"], 4);
  EXPECT_EQ(j["samples"], 32);
  EXPECT_EQ(j["per_gpu"].size(), 2u);
  EXPECT_GT(j["data_stall_pct"].get<double>(), 0);
}

TEST(Outputs, ReportFileIsWritten) {
  auto clock = make_virtual_clock();
  FixedCosts costs;
  Trainer t(*clock, find_gpu("v100"), costs, exact_options(2, 4));
  TrainResult r = t.run(modelled_sources(*clock, t, 32, 4, 1, 10 * kMillisecond));
  RunReport rep = make_run_report(r, nlohmann::json{{"gpus", 2}});
  ASSERT_EQ(rep.breakdown.size(), 2u);
  ASSERT_EQ(rep.utilization.size(), 2u);
  ASSERT_EQ(rep.per_batch.size(), 2u);
  EXPECT_EQ(rep.per_batch[0].values.size(), 4u);
  EXPECT_DOUBLE_EQ(rep.per_batch[0].values[0], to_ms(r.batches[0].data_stall));
  // The utilization series averages to the compute share.
  double busy = 0;
  const auto& u = rep.utilization[0];
  for (std::size_t i = 0; i < u.samples.size(); ++i) {
    const double next = i + 1 < u.samples.size() ? u.samples[i + 1].time_s : u.end_s;
    busy += u.samples[i].busy_fraction * (next - u.samples[i].time_s);
  }
  EXPECT_NEAR(busy, to_seconds(r.per_gpu[0].compute_busy), 1e-6);
  double total = 0;
  for (const auto& c : rep.breakdown[0].components) total += c.seconds;
  EXPECT_NEAR(total, to_seconds(r.elapsed), 1e-9);

  testing::TempDir dir;
  const auto path = dir.path() / "run.html";
  write_html_report_file(rep, path);
  std::ifstream in(path);
  const std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("data stall per batch, GPU 1"), std::string::npos);
  EXPECT_NE(html.find("all-reduce wait"), std::string::npos);
}

}  // namespace
}  // namespace gpemu::train
