// Several jobs on one emulated GPU (share.h), under the virtual clock: each
// policy's effect on the jobs, memory shared as on the card, the jobs file's
// checks, and GPEmu's Salus experiment reproduced.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/results.h"
#include "share/share_json.h"

namespace gpemu {
namespace {

SharedJobSpec model_job(const std::string& name, const std::string& model, int batch, int steps, double arrival_s = 0) {
  return gpemu::model_job(name, model, batch, steps, from_seconds(arrival_s));
}

SharedJobSpec fixed_job(const std::string& name, double step_s, int batch, int steps, double arrival_s) {
  return fixed_step_job(name, step_s, batch, steps, from_seconds(arrival_s));
}

ShareResult run(const std::string& gpu, SharePolicy policy, std::vector<SharedJobSpec> jobs) {
  static const auto costs = make_cost_model(std::nullopt);
  const std::unique_ptr<Clock> clock = make_virtual_clock();
  ShareSpec spec;
  spec.gpu = &find_gpu(gpu);
  spec.options.policy = policy;
  spec.jobs = std::move(jobs);
  return run_shared(*clock, *costs, spec);
}

// Median per-step throughput of a job over the steps that ended in [from, to).
double median_throughput(const SharedJobResult& j, Time from, Time to) {
  std::vector<double> v;
  const std::vector<Time> ends = j.step_ends();
  const std::vector<std::int64_t> samples = j.step_samples();
  for (std::size_t i = 1; i < ends.size(); ++i) {
    if (ends[i - 1] < from || ends[i] >= to) continue;
    v.push_back(static_cast<double>(samples[i]) / to_seconds(ends[i] - ends[i - 1]));
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each job's result holds the engine's RunRecord of its job (as DLIO's
// DlioRunRecord does): the figures share prints and writes are the record's.
TEST(Share, EachJobsResultHoldsItsJobsRunRecord) {
  const ShareResult r =
      run("V100", SharePolicy::Mps, {model_job("m", "resnet18", 16, 4), fixed_job("f", 0.002, 8, 3, 0.001)});
  ASSERT_EQ(r.jobs.size(), 2u);
  const SharedJobResult &m = r.jobs[0], &f = r.jobs[1];
  ASSERT_TRUE(m.error.empty() && f.error.empty()) << m.error << f.error;
  EXPECT_EQ(m.record.model, "resnet18");
  EXPECT_EQ(m.record.gpu, r.gpu);
  EXPECT_EQ(m.record.batch_size, 16);
  ASSERT_EQ(m.record.ranks.size(), 1u);
  EXPECT_EQ(m.record.ranks[0].iterations, 4);
  EXPECT_EQ(m.record.ranks[0].train.samples, 64);
  EXPECT_GT(m.record.ranks[0].peak_reserved_bytes, m.record.ranks[0].peak_allocated_bytes / 2);
  EXPECT_EQ(m.record.ranks[0].compute_intervals.size(), m.kernels().size());
  EXPECT_EQ(f.record.model, "");
  EXPECT_EQ(f.record.step_time, StepTime::Fixed);
  EXPECT_EQ(f.compute_busy(), 3 * 2 * kMillisecond);
  // The JSON is written from the record.
  const nlohmann::json j = share_json(r, true);
  for (std::size_t i = 0; i < 2; ++i) {
    const SharedJobResult& job = r.jobs[i];
    const nlohmann::json& o = j["jobs"][i];
    EXPECT_EQ(o["iterations"], job.record.ranks[0].iterations);
    EXPECT_EQ(o["samples"], job.record.ranks[0].train.samples);
    EXPECT_EQ(o["peak_allocated_bytes"], job.record.ranks[0].peak_allocated_bytes);
    EXPECT_EQ(o["batch_size"], job.record.batch_size);
    ASSERT_EQ(o["steps"]["end_s"].size(), job.record.steps.size());
    for (std::size_t k = 0; k < job.record.steps.size(); ++k) {
      EXPECT_DOUBLE_EQ(o["steps"]["end_s"][k].get<double>(), to_seconds(job.record.steps[k].step_end));
      EXPECT_EQ(o["steps"]["samples"][k], job.record.steps[k].samples);
    }
  }
  EXPECT_TRUE(j["jobs"][1]["model"].is_null());
}

TEST(Share, FifoGivesEachOfKJobsAKthOfTheGpu) {
  const double step = 0.5;
  const ShareResult r =
      run("P100", SharePolicy::Fifo,
          {fixed_job("a", step, 128, 200, 0), fixed_job("b", step, 128, 200, 10), fixed_job("c", step, 128, 200, 20)});
  ASSERT_EQ(r.jobs.size(), 3u);
  for (const SharedJobResult& j : r.jobs) EXPECT_TRUE(j.error.empty()) << j.error;
  const double alone = 128 / step;
  EXPECT_NEAR(median_throughput(r.jobs[0], 0, from_seconds(10)), alone, alone * 0.001);
  EXPECT_NEAR(median_throughput(r.jobs[0], from_seconds(11), from_seconds(20)), alone / 2, alone * 0.001);
  EXPECT_NEAR(median_throughput(r.jobs[1], from_seconds(21), from_seconds(90)), alone / 3, alone * 0.001);
  EXPECT_NEAR(r.mean_utilization_pct, 100, 0.1);
}

TEST(Share, MpsHalvesTwoComputeBoundJobsAndLessAMixedPair) {
  const double alone_c =
      run("A100-SXM4-40GB", SharePolicy::Mps, {model_job("c", "resnet50", 64, 20)}).jobs[0].samples_per_s();
  const double alone_m =
      run("A100-SXM4-40GB", SharePolicy::Mps, {model_job("m", "mobilenet_v3_small", 64, 20)}).jobs[0].samples_per_s();
  const ShareResult two =
      run("A100-SXM4-40GB", SharePolicy::Mps, {model_job("c", "resnet50", 64, 20), model_job("d", "resnet50", 64, 20)});
  EXPECT_NEAR(two.jobs[0].samples_per_s() / alone_c, 0.5, 0.03);
  EXPECT_NEAR(two.jobs[1].samples_per_s() / alone_c, 0.5, 0.03);
  const ShareResult mixed = run("A100-SXM4-40GB", SharePolicy::Mps,
                                {model_job("c", "resnet50", 64, 20), model_job("m", "mobilenet_v3_small", 64, 60)});
  EXPECT_GT(mixed.jobs[0].samples_per_s() / alone_c, 0.6);
  EXPECT_GT(mixed.jobs[1].samples_per_s() / alone_m, 0.6);
  EXPECT_LT(mixed.jobs[0].samples_per_s() / alone_c, 1.0);
}

TEST(Share, PriorityRunsTheHighJobFirstAtKernelBoundaries) {
  const double alone = run("V100", SharePolicy::Priority, {model_job("h", "resnet18", 64, 30)}).jobs[0].jct_s();
  SharedJobSpec high = model_job("h", "resnet18", 64, 30), low = model_job("l", "resnet18", 64, 30);
  high.priority = 10;
  const ShareResult r = run("V100", SharePolicy::Priority, {low, high});
  const ShareResult fifo = run("V100", SharePolicy::Fifo, {low, high});
  // The high job waits only for a low kernel already running when its own
  // arrives (between its steps, while its host waits): faster than its
  // fair share, slower than alone; the low job gets what is left.
  EXPECT_LT(r.jobs[1].jct_s(), 0.8 * fifo.jobs[1].jct_s());
  EXPECT_GE(r.jobs[1].jct_s(), alone);
  EXPECT_GT(r.jobs[0].jct_s(), r.jobs[1].jct_s());
  EXPECT_NEAR(r.makespan, fifo.makespan, fifo.makespan / 50);  // the GPU is kept as busy
}

TEST(Share, TimeSliceLosesTheSwitchesWhileContended) {
  const ShareResult fifo =
      run("V100", SharePolicy::Fifo, {fixed_job("a", 0.1, 32, 50, 0), fixed_job("b", 0.1, 32, 50, 0)});
  const ShareResult ts =
      run("V100", SharePolicy::TimeSlice, {fixed_job("a", 0.1, 32, 50, 0), fixed_job("b", 0.1, 32, 50, 0)});
  // 2 ms slices, 25 us switches: 2/2.025 of the GPU while both run.
  EXPECT_NEAR(to_seconds(ts.makespan) / to_seconds(fifo.makespan), 2.025 / 2, 0.002);
}

TEST(Share, OneJobsGrowthMakesAnotherRunOutAndOnlyItStops) {
  const ShareResult r = run("V100-PCIE-16GB", SharePolicy::Mps,
                            {model_job("a", "resnet50", 128, 10), model_job("b", "resnet50", 128, 10, 0.2),
                             model_job("c", "resnet18", 32, 10, 0.4)});
  EXPECT_TRUE(r.jobs[0].error.empty()) << r.jobs[0].error;
  EXPECT_NE(r.jobs[1].error.find("CUDA out of memory"), std::string::npos) << r.jobs[1].error;
  EXPECT_EQ(r.jobs[1].iterations(), 0);
  EXPECT_TRUE(r.jobs[2].error.empty()) << r.jobs[2].error;
  EXPECT_EQ(r.jobs[0].iterations(), 10);
  EXPECT_EQ(r.jobs[2].iterations(), 10);
  EXPECT_LE(r.peak_memory_used_bytes, r.memory_capacity_bytes);
  // Alone, b fits: the card's memory, not b, is what ran out.
  EXPECT_TRUE(run("V100-PCIE-16GB", SharePolicy::Mps, {model_job("b", "resnet50", 128, 2)}).jobs[0].error.empty());
}

TEST(Share, MigSlicesRunWithoutInterferenceAtTheirShare) {
  SharedJobSpec a = model_job("a", "resnet50", 64, 10), b = model_job("b", "resnet50", 64, 10);
  a.mig = "3g.20gb";
  b.mig = "4g.20gb";
  const ShareResult r = run("A100-SXM4-40GB", SharePolicy::Mig, {a, b});
  const ShareResult alone = run("A100-SXM4-40GB", SharePolicy::Mig, {a});
  // b's kernels do not touch a's (only their batches' copies share the PCIe link).
  EXPECT_NEAR(r.jobs[0].samples_per_s() / alone.jobs[0].samples_per_s(), 1.0, 0.01);
  EXPECT_GT(r.jobs[1].samples_per_s(), r.jobs[0].samples_per_s());
  // Slices that do not fit together, and a slice a job's memory does not fit in.
  SharedJobSpec c = model_job("c", "resnet50", 64, 10);
  c.mig = "1g.5gb";
  EXPECT_THROW(run("A100-SXM4-40GB", SharePolicy::Mig, {a, b, c}), InputError);
  SharedJobSpec big = model_job("big", "resnet50", 256, 2);
  big.mig = "1g.5gb";
  EXPECT_NE(run("A100-SXM4-40GB", SharePolicy::Mig, {big}).jobs[0].error.find("out of memory"), std::string::npos);
}

std::string jobs_error(const std::string& text) {
  try {
    parse_jobs(text, "jobs.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JobsFile, BadInputIsNamedWithWhatIsAccepted) {
  EXPECT_NE(jobs_error("{"), "");
  EXPECT_NE(jobs_error("[]").find("an object"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": []})").find("a list of 1 to"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "btach_size": 3}]})").find("unknown key 'btach_size'"),
            std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "compute_s": 1}]})").find("not both"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"batch_size": 3}]})").find("neither"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "batch_size": -1}]})").find("an integer from 1"),
            std::string::npos);
  EXPECT_NE(
      jobs_error(R"({"jobs": [{"model": "resnet50", "batch_size": 18446744073709551615}]})").find("an integer from 1"),
      std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"compute_s": 0}]})").find("from 1e-09"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "arrival_s": "soon"}]})").find("'arrival_s'"),
            std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"name": "a", "model": "x"}, {"name": "a", "model": "x"}]})").find("taken"),
            std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "precision": "fp64"}]})").find("job 1"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"gpus": 2, "jobs": [{"model": "x"}]})").find("unknown key 'gpus'"), std::string::npos);
  EXPECT_THROW(load_jobs_file("/nonexistent/jobs.json"), InputError);
  const JobsFile ok = parse_jobs(
      R"({"gpu": "a100", "jobs": [{"model": "resnet50", "batch_size": 32, "iterations": 5, "priority": 2}]})", "t");
  EXPECT_EQ(ok.gpu, "a100");
  EXPECT_EQ(ok.jobs[0].name, "job1");
  EXPECT_EQ(ok.jobs[0].job.batch_size, 32);
  EXPECT_EQ(ok.jobs[0].priority, 2);
}

TEST(JobsFile, AModelJobRunsPyTorch2sProgramUnlessItNamesTorch1) {
  ShareSpec spec;
  spec.jobs = parse_jobs(
                  R"({"jobs": [{"model": "vit_b_16"}, {"model": "vit_b_16", "torch": "1"},
                               {"model": "resnet50", "torch": "2"}, {"model": "resnet50", "host": "gpemu-2022-volta"}]})",
                  "t")
                  .jobs;
  give_cost_models(spec);
  const ModelSpec &two = spec.jobs[0].job.compute.model, &one = spec.jobs[1].job.compute.model;
  EXPECT_EQ(two.name, "vit_b_16_sdpa");  // nn.MultiheadAttention through SDPA
  EXPECT_FALSE(two.keep_grads);
  EXPECT_EQ(two.sync, StepSync::Pipelined);
  ASSERT_TRUE(two.host.has_value());
  EXPECT_EQ(two.host->name, kDefaultHost);
  EXPECT_EQ(one.name, "vit_b_16");
  EXPECT_TRUE(one.keep_grads);
  EXPECT_EQ(one.sync, StepSync::Phases);
  EXPECT_FALSE(one.host.has_value());
  EXPECT_TRUE(spec.jobs[2].job.compute.model.variant->foreach_optimizer);
  // The host issuing the steps, as --host names it; another program, another cost model.
  EXPECT_EQ(spec.jobs[3].job.compute.model.host->name, "gpemu-2022-volta");
  EXPECT_NE(spec.jobs[3].costs, spec.jobs[2].costs);
  EXPECT_NE(jobs_error(R"({"jobs": [{"model": "resnet50", "torch": "3"}]})").find("torch '3'"), std::string::npos);
  EXPECT_NE(jobs_error(R"({"jobs": [{"compute_s": 0.1, "torch": "2"}]})").find("'torch' applies to a job with"),
            std::string::npos);
  ShareSpec bad;
  bad.jobs = parse_jobs(R"({"jobs": [{"name": "x", "model": "resnet50", "host": "nosuch"}]})", "t").jobs;
  try {
    give_cost_models(bad);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job 'x': host 'nosuch'"), std::string::npos) << e.what();
  }
}

// N15: what ran silently wrong: a step that rounds to no time, a key given
// twice (JSON keeps the last), and "mean JCT 0.00 s" when no job finished.
TEST(JobsFile, OddValuesThatRanSilentlyAreRefusedOrSaid) {
  const std::string tiny = jobs_error(R"({"jobs": [{"compute_s": 1e-300, "iterations": 10}]})");
  EXPECT_NE(tiny.find("'compute_s' is 1e-300: expected a number from 1e-09 and at most 3600"), std::string::npos)
      << tiny;
  EXPECT_EQ(parse_jobs(R"({"jobs": [{"compute_s": 1e-9}]})", "t").jobs.size(), 1u);
  const std::string twice = jobs_error(R"({"jobs": [{"compute_s": 1, "iterations": 5, "iterations": 7}]})");
  EXPECT_NE(twice.find("jobs.json: the key 'iterations' is given twice in one object"), std::string::npos) << twice;
  EXPECT_NE(jobs_error(R"({"jobs": [{"compute_s": 1}], "jobs": [{"compute_s": 2}]})").find("'jobs' is given twice"),
            std::string::npos);
  // The same key in two objects is two keys.
  EXPECT_EQ(parse_jobs(R"({"jobs": [{"name": "a", "compute_s": 1}, {"name": "b", "compute_s": 1}]})", "t").jobs.size(),
            2u);
  ShareResult none;
  none.jobs.resize(2);
  for (auto& j : none.jobs) j.error = "interrupted by SIGINT";
  share_detail::sum_up(none);
  EXPECT_EQ(mean_jct_text(none), "none: no job finished");
  EXPECT_TRUE(share_json(none)["mean_jct_s"].is_null());
  EXPECT_EQ(share_json(none)["jobs_finished"], 0);
  none.jobs[1].error.clear();
  none.jobs[1].end = from_seconds(2.5);
  share_detail::sum_up(none);
  EXPECT_EQ(mean_jct_text(none), "2.50 s (1 of 2 jobs finished)");
}

TEST(JobsFile, DatasetsQueuesAndCoresAreCheckedToo) {
  const char* errors[][2] = {
      {R"({"jobs": [{"model": "alexnet", "epochs": 2}]})", "'epochs' is for a job with a 'dataset'"},
      {R"({"jobs": [{"compute_s": 1, "dataset": "imagenette"}]})", "'dataset' is for a 'model' job"},
      {R"({"jobs": [{"model": "alexnet", "dataset": "imagenet22k"}]})", "imagenet22k"},
      {R"({"jobs": [{"model": "alexnet", "dataset": "imagenette", "workers": -1}]})", "'workers'"},
      {R"({"jobs": [{"name": "a", "model": "alexnet", "after": "b"}, {"name": "b", "model": "alexnet"}]})",
       "name an earlier job"},
      {R"({"jobs": [{"name": "a", "model": "alexnet", "after": "a"}]})", "name an earlier job"},
      {R"({"cores": 0, "jobs": [{"model": "alexnet"}]})", "'cores'"}};
  for (const auto& [text, said] : errors) EXPECT_NE(jobs_error(text).find(said), std::string::npos) << text;
  // The engine's data.dataset is said as the file's key, not the CLI's --virtual-dataset (issue 29).
  const std::string dataset = jobs_error(R"({"jobs": [{"name": "d", "model": "alexnet", "dataset": "imagenet"}]})");
  EXPECT_NE(dataset.find("job 1 ('d'): dataset 'imagenet': unknown; accepted imagenet1k"), std::string::npos)
      << dataset;
  EXPECT_EQ(dataset.find("--"), std::string::npos) << dataset;
  // Keys and names are quoted on one line whatever bytes they hold (found by the jobs_json fuzz harness).
  for (const char* text : {"{\"jobs\": [{\"model\": \"alexnet\", \"it\\nerations\": 5}]}",
                           "{\"jobs\": [{\"name\": \"a\\nb\", \"model\": \"alexnet\", \"workers\": 1}]}"}) {
    const std::string e = jobs_error(text);
    EXPECT_NE(e, "") << text;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  const JobsFile ok = parse_jobs(R"({"cores": 24, "jobs": [{"name": "a", "model": "alexnet", "dataset": "imagenette",
      "epochs": 3, "workers": 23, "decode_us": 3000, "prefetch_factor": 4}, {"name": "b", "model": "resnet18",
      "after": "a", "arrival_s": 2}]})",
                                 "t");
  EXPECT_EQ(ok.cores, 24);
  const JobSpec& a = ok.jobs[0].job;
  EXPECT_EQ(a.data.source, DataSource::Modelled);
  EXPECT_EQ(a.data.dataset.size(), 9469u);  // Imagenette's training split
  EXPECT_EQ(a.schedule.epochs, 3u);
  EXPECT_EQ(a.data.loader.num_workers, 23);
  EXPECT_EQ(a.data.loader.prefetch_factor, 4);
  EXPECT_EQ(a.data.model.decode_per_sample, 3 * kMillisecond);
  EXPECT_EQ(ok.jobs[1].after, "a");
}

// A queue: the job after another starts its delay after that one's end, to the nanosecond.
TEST(Share, AJobQueuedAfterAnotherStartsItsDelayAfterItsEnd) {
  std::vector<SharedJobSpec> jobs = {fixed_job("a", 0.25, 64, 40, 1), fixed_job("b", 0.5, 64, 10, 3)};
  jobs[1].after = "a";
  const ShareResult r = run("V100", SharePolicy::Fifo, jobs);
  ASSERT_TRUE(r.jobs[0].error.empty() && r.jobs[1].error.empty());
  EXPECT_EQ(r.jobs[0].end, from_seconds(1 + 40 * 0.25));
  EXPECT_EQ(r.jobs[1].arrival, r.jobs[0].end + from_seconds(3));
  EXPECT_EQ(r.jobs[1].end, r.jobs[1].arrival + from_seconds(10 * 0.5));
  EXPECT_EQ(r.makespan, r.jobs[1].end);
  // An earlier job is required: the spec is refused otherwise.
  jobs[0].after = "b";
  EXPECT_THROW(run("V100", SharePolicy::Fifo, jobs), InputError);
}

// Jobs whose batches come from modelled loaders share the machine's cores:
// two CPU-bound jobs on as many cores as one job's workers take about twice
// as long as one alone; with a core per worker they do not slow each other
// down through the CPU.
// N12: a job name is printed in `gpemu share`'s table; an escape sequence in
// it could clear the screen, set the title or forge a row.
TEST(JobsFile, ControlCharactersInANameAreRefused) {
  for (const char* name : {"\\u001b[31mred", "a\\u0000x", "tab\\tname", "del\\u007f", "csi\\u009b2J"}) {
    const std::string e = jobs_error(std::string(R"({"jobs": [{"name": ")") + name + R"(", "model": "alexnet"}]})");
    EXPECT_NE(e.find("'name'"), std::string::npos) << name << ": " << e;
    EXPECT_NE(e.find("without control characters"), std::string::npos) << name << ": " << e;
    EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  }
  EXPECT_EQ(parse_jobs(R"({"jobs": [{"name": "résumé 日本", "model": "alexnet"}]})", "t").jobs[0].name, "résumé 日本");
  // A spec made in code (the Python module) is checked too.
  EXPECT_THROW(run("V100", SharePolicy::Fifo, {model_job("\x1b]0;owned\x07", "alexnet", 8, 1)}), InputError);
}

TEST(Share, DatasetJobsShareTheMachinesCores) {
  auto job = [](const std::string& name) {
    SharedJobSpec j = gpemu::model_job(name, "alexnet", 32, 0);
    with_dataset(j, "imagenette", 4, 1);
    j.job.schedule.max_iterations = 40;
    j.job.data.model.decode_per_sample = 20 * kMillisecond;  // CPU-bound: 0.16 s of CPU per batch per worker
    return j;
  };
  auto jct = [&](int cores, std::vector<SharedJobSpec> jobs) {
    static const auto costs = make_cost_model(std::nullopt);
    const std::unique_ptr<Clock> clock = make_virtual_clock();
    ShareSpec spec;
    spec.gpu = &find_gpu("V100");
    spec.options.policy = SharePolicy::Mps;
    spec.cpu_cores = cores;
    spec.jobs = std::move(jobs);
    const ShareResult r = run_shared(*clock, *costs, spec);
    for (const SharedJobResult& j : r.jobs) EXPECT_TRUE(j.error.empty()) << j.error;
    EXPECT_EQ(r.jobs.front().iterations(), 40);
    return r.jobs.front().jct_s();
  };
  const double alone = jct(4, {job("a")});
  const double crowded = jct(4, {job("a"), job("b")});
  const double roomy = jct(8, {job("a"), job("b")});
  EXPECT_GT(crowded, 1.8 * alone);
  EXPECT_LT(roomy, 1.1 * alone);
}

// The jobs file's "storage" is the machine's disk that the dataset jobs read
// (SessionSpec::data_storage): two disk-bound jobs read it at half the pace
// each, so each takes about twice as long as one alone (not exactly: the
// GPU steps between the reads are the jobs' own).
TEST(Share, DatasetJobsShareTheMachinesDisk) {
  const JobsFile file = parse_jobs(R"({"cores": 16, "storage": "hdd", "jobs": [{"name": "a", "model": "alexnet",
      "dataset": "imagenette", "iterations": 5}, {"name": "b", "model": "alexnet", "dataset": "imagenette",
      "iterations": 5}]})",
                                   "t");
  ASSERT_TRUE(file.storage);
  EXPECT_EQ(file.storage->name, "hdd");
  auto jct = [&](std::vector<SharedJobSpec> jobs) {
    static const auto costs = make_cost_model(std::nullopt);
    const std::unique_ptr<Clock> clock = make_virtual_clock();
    ShareSpec spec;
    spec.gpu = &find_gpu("V100");
    spec.options.policy = SharePolicy::Mps;
    spec.cpu_cores = file.cores;
    spec.storage = file.storage;
    spec.jobs = std::move(jobs);
    const ShareResult r = run_shared(*clock, *costs, spec);
    for (const SharedJobResult& j : r.jobs) EXPECT_TRUE(j.error.empty()) << j.error;
    return r.jobs.front().jct_s();
  };
  const double alone = jct({file.jobs[0]});
  const double both = jct(file.jobs);
  EXPECT_GT(both, 1.9 * alone);
  EXPECT_LT(both, 2.1 * alone);
  // A storage the file cannot have is named, with what is accepted.
  const std::string e = jobs_error(R"({"storage": "floppy", "jobs": [{"model": "alexnet"}]})");
  EXPECT_NE(e.find("'storage'"), std::string::npos) << e;
  EXPECT_NE(e.find("hdd, ssd, nvme, nfs"), std::string::npos) << e;
}

TEST(Share, AnUnknownModelOrMigOffPolicyIsRefusedUpFront) {
  EXPECT_THROW(run("V100", SharePolicy::Fifo, {model_job("a", "resnet9000", 32, 2)}), InputError);
  SharedJobSpec a = model_job("a", "resnet50", 32, 2);
  a.mig = "1g.5gb";
  EXPECT_THROW(run("A100-SXM4-40GB", SharePolicy::Fifo, {a}), InputError);
  EXPECT_THROW(run("A100-SXM4-40GB", SharePolicy::Mig, {model_job("b", "resnet50", 32, 2)}), InputError);
}

// ---- GPEmu's Salus experiment (../shared/reference/published/repro/) ----

std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (char ch : s) {
      if (ch == '"') {
        quoted = !quoted;
      } else if (ch == ',' && !quoted) {
        out.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    out.push_back(cur);
    return out;
  };
  if (!std::getline(in, line)) return rows;
  header = split(line);
  while (std::getline(in, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// N4: a 50-byte jobs file with accepted values took gigabytes: 10^8
// iterations kept 10^8 step records, and an hour-long step a million
// one-second utilisation windows per thousand steps.
std::string run_error(std::vector<SharedJobSpec> jobs) {
  try {
    run("V100-PCIE-16GB", SharePolicy::Fifo, std::move(jobs));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Share, RunsWhoseRecordsOrClockWouldNotFitAreRefusedUpFront) {
  const std::string many = jobs_error(R"({"jobs": [{"compute_s": 0.01, "iterations": 100000000}]})");
  EXPECT_NE(many.find("'iterations'"), std::string::npos) << many;
  EXPECT_NE(many.find("an integer from 1 to 1000000"), std::string::npos) << many;
  // Each job within its limit, the jobs together past it.
  std::vector<SharedJobSpec> five;
  for (int i = 0; i < 5; ++i) five.push_back(fixed_job("j" + std::to_string(i), 0.01, 8, 300000, 0));
  const std::string together = run_error(five);
  EXPECT_NE(together.find("share: the jobs' iterations come to 1500000 steps in all ('j0' 300000, 'j1' 300000"),
            std::string::npos)
      << together;
  EXPECT_NE(together.find("accepted: at most 1000000 in all"), std::string::npos) << together;
  // A dataset job's steps are its epochs of batches.
  SharedJobSpec data = model_job("d", "resnet18", 32, 0);
  with_dataset(data, "imagenet1k", 2, 1000);
  EXPECT_NE(run_error({data}).find("steps in all ('d' 40037000)"), std::string::npos) << run_error({data});
  // Within the steps, past the clock: 3 x 300000 hour-long steps, one after the other.
  const std::string clock = run_error(
      {fixed_job("a", 3600, 8, 300000, 0), fixed_job("b", 3600, 8, 300000, 0), fixed_job("c", 3600, 8, 300000, 0)});
  EXPECT_NE(clock.find("share: the jobs' arrivals and steps add up to 3.24e+09 s of emulated time"), std::string::npos)
      << clock;
  EXPECT_NE(clock.find("accepted: a run that fits the emulated clock"), std::string::npos) << clock;
}

// Without per-step rows (ShareSpec::per_step) a run keeps no step and no
// kernel of any job, after 10^5 steps as after 10^3, and its figures are
// those of a run that keeps them.
TEST(Share, WithoutPerStepRowsTheResultIsTheSameAndDoesNotGrowWithSteps) {
  static const auto costs = make_cost_model(std::nullopt);
  auto run_with = [&](bool per_step, SharePolicy policy, std::vector<SharedJobSpec> jobs) {
    const std::unique_ptr<Clock> clock = make_virtual_clock();
    ShareSpec spec;
    spec.gpu = &find_gpu("v100");
    spec.options.policy = policy;
    spec.jobs = std::move(jobs);
    spec.utilization_window = from_seconds(0.05);
    spec.per_step = per_step;
    return run_shared(*clock, *costs, spec);
  };
  const std::vector<SharedJobSpec> two = {model_job("a", "resnet18", 32, 40), model_job("b", "resnet50", 16, 20, 0.3)};
  for (const SharePolicy p : {SharePolicy::TimeSlice, SharePolicy::Mps, SharePolicy::Fifo}) {
    const ShareResult kept = run_with(true, p, two), flat = run_with(false, p, two);
    EXPECT_EQ(share_json(flat, false), share_json(kept, false)) << to_string(p);
    EXPECT_GT(kept.jobs[0].kernels().size(), 0u);
    EXPECT_GT(flat.mean_utilization_pct, 0);
  }
  for (const int steps : {1'000, 100'000}) {
    const ShareResult r = run_with(false, SharePolicy::Fifo, {fixed_job("f", 0.001, 8, steps, 0)});
    EXPECT_EQ(r.jobs[0].iterations(), steps);
    EXPECT_EQ(r.jobs[0].step_ends().size() + r.jobs[0].step_samples().size() + r.jobs[0].kernels().size(), 0u);
    EXPECT_DOUBLE_EQ(r.mean_utilization_pct, 100.0);
  }
}

TEST(Share, ALongRunsUtilisationWindowsAreWidenedNotCountless) {
  // 1000 hour-long steps: 3.6 million one-second windows before.
  const ShareResult r = run("V100-PCIE-16GB", SharePolicy::Fifo, {fixed_job("long", 3600, 8, 1000, 0)});
  ASSERT_EQ(r.jobs.front().iterations(), 1000) << r.jobs.front().error;
  EXPECT_LE(r.utilization_pct.size(), static_cast<std::size_t>(kMaxUtilizationWindows));
  EXPECT_GT(r.utilization_window, kSecond);
  EXPECT_EQ(r.utilization_window % kSecond, 0);  // a whole number of the asked window
  EXPECT_EQ(r.utilization_window, utilization_window_for(r.makespan, kSecond));
  EXPECT_GT(r.mean_utilization_pct, 99.0);
  EXPECT_EQ(share_json(r, false)["utilization"]["window_s"], to_seconds(r.utilization_window));
  // A short run keeps the window it asked for.
  EXPECT_EQ(utilization_window_for(10 * kSecond, kSecond), kSecond);
  EXPECT_EQ(utilization_window_for(from_seconds(3.6e6), kSecond), 37 * kSecond);
}

TEST(Reproduction, SalusThreeJobsTimeSharingOneP100) {
  const std::filesystem::path dir = std::filesystem::path(GPEMU_SHARED_DIR) / "reference/published/repro";
  if (!std::filesystem::exists(dir / "salus_jobs.csv")) GTEST_SKIP() << "no " << dir << " (../shared absent)";
  // GPEmu's jobs: ResNet-50 batch 128 on a P100, its measured GPU and copy
  // time per batch, started 30 s apart, one emulated GPU under FIFO.
  std::vector<SharedJobSpec> jobs;
  for (const auto& row : read_csv(dir / "salus_jobs.csv")) {
    const double step = std::stod(row.at("gpu_compute_s_per_batch")) + std::stod(row.at("cpu2gpu_s_per_batch"));
    jobs.push_back(fixed_job("job" + row.at("job"), step, std::stoi(row.at("batch_size")), 300,
                             std::stod(row.at("start_offset_s"))));
  }
  ASSERT_EQ(jobs.size(), 3u);
  const ShareResult r = run("P100", SharePolicy::Fifo, jobs);
  // Median per-step throughput of a job over its steps during which `active` jobs ran.
  auto median_with = [&](std::size_t job, int active) {
    const SharedJobResult& j = r.jobs[job];
    std::vector<double> v;
    const std::vector<Time> ends = j.step_ends();
    const std::vector<std::int64_t> samples = j.step_samples();
    for (std::size_t i = 1; i < ends.size(); ++i) {
      const Time a = ends[i - 1], b = ends[i];
      int running = 0;
      for (const SharedJobResult& o : r.jobs) running += o.arrival <= a && o.end >= b ? 1 : 0;
      if (running == active) v.push_back(static_cast<double>(samples[i]) / to_seconds(b - a));
    }
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  int checked = 0;
  for (const auto& row : read_csv(dir / "salus_throughput.csv")) {
    const std::string point = row.at("point");
    if (point.rfind("throughput@job=", 0) != 0) continue;
    const int job = point[15] - '0';
    const int active = point.back() - '0';
    const double ours = median_with(static_cast<std::size_t>(job - 1), active);
    const double gpemu = std::stod(row.at("value"));
    EXPECT_NEAR(ours / gpemu, 1.0, 0.05) << point << ": ours " << ours << ", GPEmu " << gpemu;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
}  // namespace gpemu
