// The job (job.h): its spec validation, step programs, and that its memory is
// the model zoo's replay that `gpemu predict` makes (peaks and the OOM batch).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include <csignal>
#include "common/interrupt.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/spec_error.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

JobSpec synthetic_spec(const GpuSpec& gpu, const std::string& model, int batch, std::int64_t steps) {
  JobSpec s;
  s.cluster.gpu = &gpu;
  s.batch_size = batch;
  s.compute.model.name = model;
  s.data.source = DataSource::Synthetic;
  s.data.synthetic_batches = steps;
  return s;
}

std::string validation_message(const JobSpec& s) {
  try {
    validate(s);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JobSpec, ValidationNamesTheBadField) {
  const GpuSpec& v100 = find_gpu("v100");
  JobSpec ok = synthetic_spec(v100, "resnet18", 8, 2);
  EXPECT_EQ(validation_message(ok), "");
  JobSpec s = ok;
  s.cluster.gpu = nullptr;
  EXPECT_NE(validation_message(s).find("cluster.gpu"), std::string::npos);
  s = ok;
  s.batch_size = 0;
  EXPECT_NE(validation_message(s).find("batch_size 0"), std::string::npos);
  s = ok;
  s.cluster.gpus = 0;
  EXPECT_NE(validation_message(s).find("cluster.gpus 0"), std::string::npos);
  s = ok;
  s.data.source = DataSource::Custom;
  EXPECT_NE(validation_message(s).find("data.custom"), std::string::npos);
  s = ok;
  s.schedule.checkpoints.push_back({1, 1, false});
  EXPECT_NE(validation_message(s).find("schedule.checkpoint"), std::string::npos);
}

// The engine's rules name the spec's fields (a SpecError), never a front end's
// flag: each front end words them its own way (issue 29).
TEST(JobSpec, TheRulesNameTheSpecsFieldsNotAFlag) {
  const GpuSpec& v100 = find_gpu("v100");
  const JobSpec ok = synthetic_spec(v100, "resnet18", 8, 2);
  const auto spec_error = [](const JobSpec& s) -> SpecError {
    try {
      validate(s);
    } catch (const SpecError& e) {
      return e;
    }
    return SpecError("(none)", "", "validate() accepted it");
  };
  JobSpec s = ok;
  s.cluster.gpus = 0;
  EXPECT_EQ(spec_error(s).field(), "cluster.gpus");
  EXPECT_EQ(spec_error(s).value(), "0");
  EXPECT_STREQ(spec_error(s).what(), "job: cluster.gpus 0 is impossible: it must be at least 1");
  s = ok;
  s.cluster.gpus = 2;
  s.compute.time_divisor = 2;
  EXPECT_EQ(spec_error(s).field(), "compute.time_divisor");
  EXPECT_STREQ(spec_error(s).what(),
               "job: compute.time_divisor 2 is impossible: GPEmu's one process standing for 2 GPUs (one per node) "
               "excludes cluster.gpus 2 on 1 node(s): give one GPU per node (or compute.time_divisor 1 for 2 "
               "data-parallel ranks with all-reduce)");
  // A front end's words, in one place: the fields it has a word for, the spec's name for the rest.
  const auto flags = [](std::string_view f) { return f == "compute.time_divisor" ? std::string("--gpemu-gpus") : ""; };
  EXPECT_EQ(spec_error(s).worded(flags).substr(0, 60), "--gpemu-gpus 2 is impossible: GPEmu's one process standing f");
  EXPECT_NE(spec_error(s).worded(flags).find("excludes cluster.gpus 2"), std::string::npos);
  s = ok;
  s.cluster.buckets.bucket_cap_bytes = 0;
  EXPECT_STREQ(spec_error(s).what(), "job: cluster.buckets.bucket_cap_bytes 0 is impossible: it must be positive");
  s = ok;
  s.cluster.gpus = 16;
  EXPECT_STREQ(spec_error(s).what(),
               "job: cluster.gpus 16 is impossible: a node holds at most 8 GPUs and there is 1 node; give "
               "cluster.nodes 2 or more (and cluster.network 25gbe|100gbe|400gbe|FILE) so that each node holds at "
               "most 8");
  const std::function<void(JobSpec&)> breaks[] = {
      [](JobSpec& b) { b.batch_size = 0; },          [](JobSpec& b) { b.schedule.epochs = 0; },
      [](JobSpec& b) { b.cluster.nodes = 0; },       [](JobSpec& b) { b.compute.model.seq_len = -1; },
      [](JobSpec& b) { b.data.io_depth = -1; },      [](JobSpec& b) { b.cluster.gpu = nullptr; },
      [](JobSpec& b) { b.compute.model.name = ""; },
  };
  for (const auto& make_bad : breaks) {
    JobSpec bad = ok;
    make_bad(bad);
    EXPECT_NE(spec_error(bad).field(), "(none)");
    const std::string what = spec_error(bad).what();
    EXPECT_EQ(what.rfind("job: ", 0), 0U) << what;
    EXPECT_EQ(what.find("--"), std::string::npos) << what;  // no flag
  }
}

TEST(JobSpec, MoreGpusThanANodeHoldsAreRefusedSayingWhichNodesToGive) {
  const GpuSpec& a100 = find_gpu("a100");
  JobSpec s = synthetic_spec(a100, "resnet18", 8, 2);
  s.cluster.gpus = 16;
  const std::string one_node = validation_message(s);
  EXPECT_NE(one_node.find("cluster.gpus 16"), std::string::npos) << one_node;
  EXPECT_NE(one_node.find("cluster.nodes 2"), std::string::npos) << one_node;
  s.cluster.nodes = 2;  // no network given
  EXPECT_NE(validation_message(s).find("cluster.network"), std::string::npos);
  s.cluster.network = network_preset("100gbe");
  EXPECT_EQ(validation_message(s), "");
  s.cluster.nodes = 3;
  EXPECT_NE(validation_message(s).find("over cluster.nodes 3"), std::string::npos);
  s.cluster.nodes = 0;
  EXPECT_NE(validation_message(s).find("cluster.nodes 0"), std::string::npos);
  // Ranks that move no bytes (a DLIO step) are independent devices, any number.
  JobSpec d = synthetic_spec(a100, "resnet18", 8, 2);
  d.compute.step_time = StepTime::Fixed;
  d.compute.copy_batch = false;
  d.compute.all_reduce = false;
  d.cluster.gpus = 64;
  EXPECT_EQ(validation_message(d), "");
}

// Two nodes of two GPUs: the job builds a Cluster, DDP's all-reduce crosses
// the network (a slower network, a longer step), and the record says so.
TEST(Job, SeveralNodesAllReduceOverTheNetwork) {
  const GpuSpec& a100 = find_gpu("a100");
  const auto costs = make_cost_model(std::nullopt);
  auto run = [&](const char* network) {
    JobSpec s = synthetic_spec(a100, "resnet18", 8, 2);
    s.cluster.gpus = 4;
    s.cluster.nodes = 2;
    s.cluster.network = network_preset(network);
    s.compute.variation.cv = 0;
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    EXPECT_NE(job.cluster(), nullptr);
    EXPECT_EQ(job.node(), nullptr);
    EXPECT_EQ(&job.device(3), &job.cluster()->device(3));
    return job.run();
  };
  const RunRecord slow = run("25gbe"), fast = run("400gbe");
  EXPECT_EQ(slow.nodes, 2);
  EXPECT_EQ(slow.network, "25gbe");
  EXPECT_GT(slow.all_reduces, 0u);
  ASSERT_EQ(slow.steps.size(), 8u);
  for (const StepRecord& st : slow.steps) EXPECT_GE(st.all_reduce_end, st.backward_end);
  EXPECT_GT(summarize(slow).elapsed, summarize(fast).elapsed);
}

TEST(StepProgram, ATrainingStepAndADlioStepDifferOnlyInTheirPrograms) {
  const GpuSpec& v100 = find_gpu("v100");
  JobSpec s = synthetic_spec(v100, "resnet18", 8, 2);
  EXPECT_EQ(step_program(s, RunPhase::Train), (std::vector<StepOp>{StepOp::CopyBatch, StepOp::Forward, StepOp::Backward,
                                                                   StepOp::OptimizerStep, StepOp::LossItem}));
  s.cluster.gpus = 2;
  EXPECT_EQ(step_program(s, RunPhase::Train),
            (std::vector<StepOp>{StepOp::CopyBatch, StepOp::Forward, StepOp::Backward, StepOp::AllReduceWait,
                                 StepOp::OptimizerStep, StepOp::LossItem}));
  EXPECT_EQ(step_program(s, RunPhase::Eval),
            (std::vector<StepOp>{StepOp::CopyBatch, StepOp::Forward, StepOp::LossItem}));
  s.compute.sync = SyncMode::AtEnd;
  EXPECT_EQ(step_program(s, RunPhase::Eval), (std::vector<StepOp>{StepOp::CopyBatch, StepOp::Forward}));
  s.compute.step_time = StepTime::Fixed;
  EXPECT_EQ(step_program(s, RunPhase::Train),
            (std::vector<StepOp>{StepOp::Compute, StepOp::Synchronize, StepOp::ReleaseBatch}));
}

TEST(Job, AFixedStepTimeGivesExactTimesUnderTheVirtualClock) {
  const GpuSpec& a100 = find_gpu("a100");
  JobSpec s = synthetic_spec(a100, "resnet18", 4, 5);
  s.compute.step_time = StepTime::Fixed;
  s.compute.fixed_train = TimeSpec::constant(0.010);
  s.compute.copy_batch = false;
  s.compute.use_allocator = false;
  s.compute.all_reduce = false;
  s.cluster.gpus = 3;
  s.schedule.epochs = 2;
  auto clock = make_virtual_clock();
  const auto costs = make_cost_model(std::nullopt);
  Job job(*clock, *costs, s);
  EXPECT_EQ(job.planned_iterations(), 10);
  const RunRecord rec = job.run();
  const RunSummary r = summarize(rec);
  EXPECT_EQ(r.iterations, 10);
  EXPECT_EQ(r.samples, 3 * 10 * 4);
  EXPECT_EQ(r.elapsed, 10 * 10 * kMillisecond);
  EXPECT_DOUBLE_EQ(r.gpu_util_pct, 100.0);
  EXPECT_EQ(r.peak_allocated_bytes, 0u);
  ASSERT_EQ(rec.steps.size(), 30u);
  for (const StepRecord& st : rec.steps) {
    EXPECT_EQ(st.compute, 10 * kMillisecond);
    EXPECT_EQ(st.host_done - st.delivered, 10 * kMillisecond);
  }
}

// A host that never waits (SyncMode::AtEnd) runs at most 1,024 steps ahead of
// its GPU, as CUDA's finite launch queue blocks a real host's launches: its
// unfinished steps stay bounded however long the run. Before, all 3,000
// steps were issued at time 0.
TEST(Job, AHostThatNeverWaitsRunsAtMostOneThousandStepsAhead) {
  const GpuSpec& a100 = find_gpu("a100");
  JobSpec s = synthetic_spec(a100, "resnet18", 4, 3000);
  s.compute.copy_batch = false;
  s.compute.use_allocator = false;
  s.compute.sync = SyncMode::AtEnd;
  s.compute.variation.cv = 0;
  auto clock = make_virtual_clock();
  const auto costs = make_cost_model(std::nullopt);
  Job job(*clock, *costs, s);
  const RunRecord rec = job.run();
  ASSERT_EQ(rec.steps.size(), 3000u);
  for (std::size_t i = 0; i < 1024; ++i) ASSERT_EQ(rec.steps[i].next_called, rec.start) << i;
  for (std::size_t i = 1024; i < 3000; ++i) {
    // Step i is asked for once step i - 1024 has ended on the GPU, which
    // never waits for the host: each step starts as the one before ends.
    ASSERT_EQ(rec.steps[i].next_called, rec.steps[i - 1024].step_end) << i;
    ASSERT_GT(rec.steps[i].next_called, rec.steps[i - 1].next_called) << i;
  }
  for (std::size_t i = 1; i < 3000; ++i) ASSERT_EQ(rec.steps[i].gpu_idle_since, rec.steps[i - 1].step_end) << i;
  EXPECT_EQ(summarize(rec).elapsed, rec.steps.back().step_end - rec.start);
}

// A record that keeps no steps (RecordSpec) holds as many elements after
// 10^5 steps as after 10^3, its summary is the same as a record that keeps
// them all, and its sink hears every step and kernel.
TEST(Job, ARecordWithoutStepsDoesNotGrowWithStepsAndSumsTheSame) {
  const GpuSpec& a100 = find_gpu("a100");
  const auto costs = make_cost_model(std::nullopt);
  struct Count final : RecordSink {
    std::int64_t steps = 0, kernels = 0;
    Duration compute = 0;
    void on_step(const StepRecord& s) override { ++steps, compute += s.compute; }
    void on_kernel(int, const KernelSpan&) override { ++kernels; }
  };
  auto run = [&](std::int64_t steps, bool keep, Count* sink) {
    JobSpec s = synthetic_spec(a100, "resnet18", 4, steps);
    s.compute.step_time = StepTime::Fixed;
    s.compute.fixed_train = TimeSpec::constant(0.010);
    s.compute.copy_batch = s.compute.use_allocator = s.compute.all_reduce = false;
    s.record.steps = s.record.kernels = keep;
    s.record.sink = sink;
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    return job.run();
  };
  auto stored = [](const RunRecord& r) {
    std::size_t n = r.steps.size() + r.epochs.size() + r.checkpoints.size() + r.loader_stats.size();
    for (const RankRecord& rr : r.ranks) n += rr.compute_intervals.size();
    return n;
  };
  Count sink;
  const RunRecord big = run(100'000, false, &sink);
  EXPECT_EQ(stored(big), stored(run(1'000, false, nullptr)));
  EXPECT_EQ(sink.steps, 100'000);
  EXPECT_EQ(sink.kernels, 100'000);
  EXPECT_EQ(sink.compute, 100'000 * 10 * kMillisecond);
  const RunRecord kept = run(1'000, true, nullptr);
  EXPECT_EQ(stored(kept), stored(run(1'000, false, nullptr)) + 2'000);  // its steps and kernels
  // The same figures either way.
  const RunSummary a = summarize(kept), b = summarize(run(1'000, false, nullptr));
  EXPECT_EQ(a.elapsed, b.elapsed);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.gpu_util_pct, b.gpu_util_pct);
  EXPECT_EQ(a.data_stall_pct, b.data_stall_pct);
  EXPECT_EQ(big.ranks.front().train.steps, 100'000);
  EXPECT_EQ(summarize(big).elapsed, 100'000 * 10 * kMillisecond);
}

// GPEmu's "N GPUs" (ComputeSpec::time_divisor): one rank whose batches'
// compute and H2D copy take 1/N of their time.
TEST(Job, GpemuCompatibleNGpusDivideEachBatchsTimeByN) {
  const GpuSpec& v100 = find_gpu("v100");
  const auto costs = make_cost_model(std::nullopt);
  const StepCost c = costs->step_cost(v100, "resnet18", 256);
  Duration h2d[2] = {0, 0};
  for (const int n : {1, 8}) {
    JobSpec s = synthetic_spec(v100, "resnet18", 256, 3);
    s.compute.variation.cv = 0;
    s.compute.variation.warmup_factor = 1;
    s.compute.use_allocator = false;
    s.compute.time_divisor = n;
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    const RunRecord rec = job.run();
    ASSERT_EQ(rec.steps.size(), 3u);
    for (const StepRecord& st : rec.steps) EXPECT_EQ(st.compute, c.forward / n + c.backward / n) << n;
    h2d[n == 8] = rec.steps[1].h2d_end - rec.steps[1].h2d_start;
  }
  // The copy moves 1/8 of the batch's bytes; its fixed latency is not divided.
  EXPECT_LT(h2d[1], h2d[0] / 4);
  EXPECT_GT(h2d[1], h2d[0] / 9);

  JobSpec two = synthetic_spec(v100, "resnet18", 256, 3);
  two.cluster.gpus = 2;
  two.compute.time_divisor = 8;
  EXPECT_NE(validation_message(two).find("compute.time_divisor 8"), std::string::npos) << validation_message(two);
  two.cluster.gpus = 1;
  two.compute.time_divisor = 0;
  EXPECT_NE(validation_message(two).find("compute.time_divisor 0"), std::string::npos) << validation_message(two);
}

// The job's peaks equal the zoo replay predict makes, and it runs out of
// memory at the first batch predict's --max-batch says does not fit.
TEST(Job, MemoryIsThePredictReplayAndOomComesAtTheSameBatch) {
  const GpuSpec& v100 = find_gpu("v100");
  const zoo::ModelGraph* g = zoo::find_model("resnet50");
  ASSERT_NE(g, nullptr);
  const auto costs = make_cost_model(std::nullopt);
  const std::uint64_t capacity = zoo::oom_capacity(v100);
  const zoo::ReplayOptions opts = zoo::oom_replay_options(zoo::ReplayOptions{});
  {
    JobSpec s = synthetic_spec(v100, "resnet50", 128, 6);
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    const RunSummary r = summarize(job.run());
    const zoo::MemoryReplay want = zoo::replay_memory(*g, zoo::Shape{128, 0}, capacity, opts);
    ASSERT_TRUE(want.fits);
    EXPECT_EQ(r.peak_allocated_bytes, want.peak_allocated_bytes);
    EXPECT_EQ(r.peak_reserved_bytes, want.peak_reserved_bytes);
    EXPECT_NE(r.memory_plan.find("model zoo"), std::string::npos);
  }
  const std::int64_t best = zoo::max_batch(capacity, *g, zoo::Shape{1, 0}, opts);
  ASSERT_GT(best, 1);
  for (const std::int64_t batch : {best, best + 1}) {
    JobSpec s = synthetic_spec(v100, "resnet50", static_cast<int>(batch), 6);
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    if (batch == best) {
      EXPECT_NO_THROW(job.run()) << batch;
    } else {
      EXPECT_THROW(job.run(), OutOfMemoryError) << batch;
    }
  }
}

TEST(Job, CheckpointsSplitAnEpochAndAreRecorded) {
  const GpuSpec& a100 = find_gpu("a100");
  JobSpec s = synthetic_spec(a100, "resnet18", 2, 4);
  s.compute.step_time = StepTime::Fixed;
  s.compute.fixed_train = TimeSpec::constant(0.001);
  s.compute.copy_batch = s.compute.use_allocator = s.compute.all_reduce = false;
  s.schedule.checkpoints = {{1, 2, false}, {1, 4, true}};
  int calls = 0;
  s.schedule.checkpoint = [&](const CheckpointCall& c) {
    ++calls;
    c.sleep_until(c.clock->now() + 5 * kMillisecond);  // the checkpoint's I/O takes 5 ms
    CheckpointIo io;
    io.written = true;
    io.bytes_written = 100;
    return io;
  };
  auto clock = make_virtual_clock();
  const auto costs = make_cost_model(std::nullopt);
  Job job(*clock, *costs, s);
  const RunRecord rec = job.run();
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(rec.checkpoints.size(), 2u);
  EXPECT_EQ(rec.checkpoints[0].step, 2u);
  EXPECT_EQ(rec.checkpoints[0].start, 2 * kMillisecond);
  EXPECT_EQ(rec.checkpoints[0].end, 7 * kMillisecond);
  EXPECT_EQ(rec.checkpoints[1].start, 9 * kMillisecond);
  ASSERT_EQ(rec.steps.size(), 4u);
  EXPECT_EQ(rec.steps[2].next_called, 7 * kMillisecond);  // after the checkpoint
}

}  // namespace
}  // namespace gpemu

namespace gpemu {
namespace {

// Raises SIGINT's flag from GPU `gpu`'s step callback: a deterministic point,
// as a signal arriving there would.
struct InterruptAt : JobObserver {
  int gpu, epoch;
  std::uint64_t step;
  InterruptAt(int g, int e, std::uint64_t s) : gpu(g), epoch(e), step(s) {}
  void on_step(const StepEvent& ev) override {
    if (ev.gpu == gpu && ev.epoch == epoch && ev.step == step) request_interrupt(SIGINT);
  }
};

// Faults in running jobs (issue 10): SIGINT during a 2-GPU run with DDP
// all-reduce returns the finished epochs, and the summary's time covers the
// steps of the epoch that was cut short (it covered only finished epochs, so
// samples/s counted the cut epoch's samples over the finished epochs' time).
TEST(Job, TwoGpusInterruptedMidEpochKeepTheFinishedEpochs) {
  const GpuSpec& v100 = find_gpu("v100");
  JobSpec s = synthetic_spec(v100, "resnet18", 8, 4);
  s.cluster.gpus = 2;
  s.schedule.epochs = 3;
  s.schedule.keep_partial = true;
  auto clock = make_virtual_clock();
  const auto costs = make_cost_model(std::nullopt);
  Job job(*clock, *costs, s);
  InterruptAt at(1, 2, 2);
  const RunRecord rec = job.run(&at);
  clear_interrupt();
  ASSERT_TRUE(rec.stopped);
  try {
    std::rethrow_exception(rec.stopped);
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_status(), 130);
  } catch (...) {
    ADD_FAILURE() << "stopped by something other than the interrupt";
  }
  const RunSummary r = summarize(rec);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.epochs[0].samples, 2 * 4 * 8);
  ASSERT_EQ(r.per_gpu.size(), 2u);
  EXPECT_EQ(r.per_gpu[0].iterations, r.per_gpu[1].iterations) << "the GPUs stop at the same step";
  EXPECT_GT(r.iterations, 4);
  EXPECT_LT(r.iterations, 12);
  Time last = rec.start;
  for (const StepRecord& st : rec.steps) last = std::max(last, st.step_end);
  EXPECT_GE(r.elapsed, last - rec.start);
  EXPECT_GT(r.elapsed, r.epochs[0].end - r.epochs[0].start);
  EXPECT_EQ(r.samples, 2 * r.iterations * 8);
}

}  // namespace
}  // namespace gpemu
