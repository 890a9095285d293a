// The session's storage for the jobs' data (SessionSpec::data_storage): the
// jobs' modelled loaders read their samples from each node's disk, or one
// shared store, each job an even share of it while it runs. Every time is
// checked against a hand computation under the virtual clock.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/session.h"

namespace gpemu {
namespace {

constexpr Time ms = kMillisecond;
constexpr std::size_t kSamples = 16, kBatch = 4;

// A disk of one head: 1 ms a request + 100,000 bytes a millisecond, so a
// sample of 100,000 bytes (a file of its own: a request each) takes 2 ms
// alone. Shared by two jobs, each sees its head at half the pace
// (pipeline::shared_by): 4 ms a sample.
pipeline::StorageDevice disk() {
  pipeline::StorageDevice d;
  d.name = "test disk";
  d.latency = ms;
  d.bytes_per_s = 1e8;
  d.parallelism = 1;
  return d;
}

// One epoch of 16 samples in batches of 4 from a modelled loader of one
// worker that spends no CPU time (no decode, reads of no cost but the
// disk's), and 1 us of GPU time a step: bound by its reads, one after
// another, so batch b is ready 4 x (b + 1) reads after the epoch starts.
SessionJob data_job(std::string name) {
  SessionJob j;
  j.name = std::move(name);
  JobSpec& s = j.job;
  s.cluster.gpu = &find_gpu("A100-SXM4-40GB");
  s.batch_size = static_cast<int>(kBatch);
  s.compute.step_time = StepTime::Fixed;
  s.compute.fixed_train = TimeSpec::constant(1e-6);
  s.compute.copy_batch = false;
  s.compute.use_allocator = false;
  s.data.source = DataSource::Modelled;
  for (std::size_t i = 0; i < kSamples; ++i) {
    pipeline::Sample sample;
    sample.path = "data/" + std::to_string(i) + ".jpg";
    sample.length = 100000;
    sample.format = pipeline::SampleFormat::Jpeg;
    s.data.dataset.samples.push_back(sample);
  }
  s.data.dataset.root = "data";
  s.data.loader.num_workers = 1;
  s.data.loader.prefetch_factor = 2;
  pipeline::LoaderModelOptions& m = s.data.model;
  m.read_per_sample = 0;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = 0;
  m.decode_ns_per_byte = 0;
  m.cores = 64;
  s.record.steps = true;
  return j;
}

// Each batch's ready time from its epoch's start.
std::vector<Duration> ready_times(const RunRecord& r) {
  std::vector<Duration> out;
  for (const StepRecord& s : r.steps) out.push_back(s.ready - r.epochs.at(0).start);
  return out;
}

// Batch b ready after 4 (b + 1) reads of `read` each.
std::vector<Duration> by_hand(Duration read) {
  std::vector<Duration> out;
  for (std::size_t b = 0; b < kSamples / kBatch; ++b) out.push_back(static_cast<Duration>(kBatch * (b + 1)) * read);
  return out;
}

struct SessionStorageTest : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  // Exclusive GPUs (one job each, as `gpemu train`'s), placed first-fit.
  SessionSpec spec(int nodes, int gpus_per_node) {
    SessionSpec s;
    s.gpu = &find_gpu("A100-SXM4-40GB");
    s.nodes = nodes;
    s.gpus_per_node = gpus_per_node;
    s.exclusive = true;
    s.placement = placement_policy("first-fit");
    s.cpu_cores_per_node = 64;
    s.data_storage = disk();
    return s;
  }
  std::vector<RunRecord> run(const SessionSpec& s, std::vector<SessionJob> jobs) {
    Session session(*clock, *costs, s);
    for (SessionJob& j : jobs) session.add_job(std::move(j));
    session.run();
    std::vector<RunRecord> out;
    for (std::size_t i = 0; i < session.jobs(); ++i) {
      JobOutcome o = session.take_outcome(static_cast<JobId>(i));
      EXPECT_EQ(o.error, "") << o.name;
      out.push_back(*o.record);
    }
    return out;
  }
};

// A job alone on a session whose node has the disk runs exactly as it runs
// alone with that disk as its own storage (run_alone, `gpemu train
// --storage`): the same steps, reads, epoch and end, to the nanosecond.
TEST_F(SessionStorageTest, AJobAloneReadsTheSessionsDiskAsItsOwn) {
  SessionJob own = data_job("own");
  own.job.data.model.storage = disk();
  const RunRecord today = run_alone(*clock, *costs, own.job);
  clock = make_virtual_clock();
  SessionJob job = data_job("on the session");
  SessionSpec s = session_for(job.job);
  s.data_storage = disk();
  const RunRecord on_session = run(s, {job}).at(0);
  EXPECT_EQ(ready_times(today), by_hand(2 * ms));
  EXPECT_EQ(ready_times(on_session), by_hand(2 * ms));
  ASSERT_EQ(on_session.epochs.size(), 1u);
  EXPECT_EQ(on_session.epochs[0].start, today.epochs[0].start);
  EXPECT_EQ(on_session.epochs[0].end, today.epochs[0].end);
  EXPECT_EQ(on_session.ranks.at(0).iterations, today.ranks.at(0).iterations);
  EXPECT_EQ(on_session.ranks.at(0).iterations, 4);
  EXPECT_EQ(on_session.ranks.at(0).train.end, today.ranks.at(0).train.end);
  EXPECT_EQ(on_session.loader_stats.at(0).storage_requests, kSamples);
  EXPECT_EQ(on_session.loader_stats.at(0).storage_requests, today.loader_stats.at(0).storage_requests);
  EXPECT_EQ(on_session.loader_stats.at(0).storage_bytes, today.loader_stats.at(0).storage_bytes);
}

// Two such jobs on two GPUs of one node read its disk at half the pace each:
// every batch is ready twice as late, 4 ms a read, and the epoch ends 32 ms
// (16 reads x 2 ms) later than alone.
TEST_F(SessionStorageTest, TwoJobsOnOneNodesDiskEachReadAtHalfThePace) {
  const std::vector<RunRecord> alone = run(spec(1, 2), {data_job("a")});
  clock = make_virtual_clock();
  const std::vector<RunRecord> two = run(spec(1, 2), {data_job("a"), data_job("b")});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(ready_times(alone[0]), by_hand(2 * ms));
  for (const RunRecord& r : two) {
    EXPECT_EQ(ready_times(r), by_hand(4 * ms));
    EXPECT_EQ(r.epochs.at(0).end - r.epochs[0].start,
              alone[0].epochs.at(0).end - alone[0].epochs[0].start + static_cast<Duration>(kSamples) * 2 * ms);
    EXPECT_EQ(r.loader_stats.at(0).storage_requests, kSamples);
  }
}

// A job that starts after the other has ended reads the disk alone again:
// a job counts from its start to its end.
TEST_F(SessionStorageTest, AJobAfterAnotherHasEndedReadsTheDiskAlone) {
  std::vector<SessionJob> jobs = {data_job("a"), data_job("b")};
  jobs[1].after = 0;
  const std::vector<RunRecord> r = run(spec(1, 2), std::move(jobs));
  EXPECT_EQ(ready_times(r.at(0)), by_hand(2 * ms));
  EXPECT_EQ(ready_times(r.at(1)), by_hand(2 * ms));
}

// On two nodes each job reads its own node's disk and neither slows the
// other; with one store that both nodes read (data_storage_shared) they
// share it as on one node.
TEST_F(SessionStorageTest, NodesWithDisksOfTheirOwnDoNotSlowEachOtherAndAStoreTheyShareDoes) {
  const std::vector<RunRecord> own = run(spec(2, 1), {data_job("a"), data_job("b")});
  for (const RunRecord& r : own) EXPECT_EQ(ready_times(r), by_hand(2 * ms));
  clock = make_virtual_clock();
  SessionSpec shared = spec(2, 1);
  shared.data_storage_shared = true;
  const std::vector<RunRecord> both = run(shared, {data_job("a"), data_job("b")});
  for (const RunRecord& r : both) EXPECT_EQ(ready_times(r), by_hand(4 * ms));
}

// A job whose batches need no reads (in-memory batches) takes no share:
// the data job beside it reads the disk alone.
TEST_F(SessionStorageTest, AJobWithoutALoaderTakesNoShare) {
  SessionJob synthetic = data_job("synthetic");
  synthetic.job.data.source = DataSource::Synthetic;
  synthetic.job.data.synthetic_batches = 4;
  const std::vector<RunRecord> r = run(spec(1, 2), {data_job("a"), synthetic});
  EXPECT_EQ(ready_times(r.at(0)), by_hand(2 * ms));
}

TEST_F(SessionStorageTest, AnImpossibleDiskIsRefusedNamingIt) {
  SessionSpec s = spec(1, 1);
  s.data_storage->bytes_per_s = 0;
  try {
    Session session(*clock, *costs, s);
    ADD_FAILURE() << "accepted a disk of no bandwidth";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("session: data storage"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpemu
