// A preprocessing service (tf.data service's dispatcher and remote workers)
// for the modelled loader, under the virtual clock: which batches are remote,
// the workers' part, the client's NIC and the client's part, to the
// nanosecond.
#include <gtest/gtest.h>

#include "gpemu/clock.h"
#include "gpemu/pipeline.h"
#include "gpemu/prep_service.h"

namespace gpemu::pipeline {
namespace {

// Eight JPEGs of 1,536 bytes. Per sample 1 ms to read and 3 ms to decode;
// outputs of 8 x 8 (768 bytes of floats); batches of two; one client worker
// on cores of its own: a batch made locally costs 8 ms.
Dataset eight_jpegs() {
  Dataset d;
  d.root = "eight";
  for (std::uint64_t i = 0; i < 8; ++i)
    d.samples.push_back({.path = "f", .offset = i * 1536, .length = 1536, .format = SampleFormat::Jpeg});
  return d;
}

LoaderOptions client() {
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 1;
  o.prefetch_factor = 2;
  o.transform.height = o.transform.width = 8;
  return o;
}

LoaderModelOptions costs() {
  LoaderModelOptions m;
  m.read_per_sample = kMillisecond;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = 3 * kMillisecond;
  m.decode_ns_per_byte = 0;
  m.cores = 64;
  return m;
}

// Two workers of two CPUs; a batch's 1,536 output bytes take 1 ms to
// serialise on one core, 1.536 ms over the NIC (after 0.5 ms of latency)
// and 0.5 ms to take in on the client.
PrepServiceOptions service(PrepOffload offload) {
  PrepServiceOptions p;
  p.workers = 2;
  p.cpus_per_worker = 2;
  p.offload = offload;
  p.nic_bytes_per_s = 1e6;
  p.latency = 500 * kMicrosecond;
  p.serialize_bytes_per_s = 1.536e6;
  p.deserialize_bytes_per_s = 3.072e6;
  p.worker_buffer = 2;
  return p;
}

// Each batch's ready time; the consumer asks for the next batch `step` after the previous one returned.
std::vector<Time> readies(LoaderModelOptions m, Duration step = 0, LoaderStats* stats = nullptr) {
  auto clock = make_virtual_clock();
  ModelledLoader loader(*clock, eight_jpegs(), client(), m);
  loader.begin_epoch(0);
  std::vector<Time> out;
  while (auto b = loader.next({})) {
    out.push_back(b->ready);
    clock->sleep_until(clock->now() + step);
  }
  if (stats) *stats = loader.stats();
  return out;
}

TEST(PrepService, WithoutWorkersOrOffloadTheClientMakesEveryBatch) {
  const std::vector<Time> local = {8'000'000, 16'000'000, 24'000'000, 32'000'000};
  EXPECT_EQ(readies(costs()), local);
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::None);
  EXPECT_EQ(readies(m), local);
  m.prep_service = service(PrepOffload::All);
  m.prep_service->workers = 0;
  EXPECT_EQ(readies(m), local);
  m.prep_service = service(PrepOffload::All);
  m.prep_service->local_share = 1;
  EXPECT_EQ(readies(m), local);
}

TEST(PrepService, OffloadAllWorkersBatchTheNicCarriesTheClientTakesIn) {
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::All);
  LoaderStats stats;
  // A worker's batch: (8 ms of its pipeline + 1 ms serialising) / 2 CPUs = 4.5 ms. Batches 0 and 2 on
  // worker 0, 1 and 3 on worker 1. Over the NIC one at a time, 0.5 ms + 1.536 ms each: 6.536, 8.072,
  // 11.036 and 12.572 ms; then 0.5 ms to take each in on the client.
  EXPECT_EQ(readies(m, 0, &stats), (std::vector<Time>{7'036'000, 8'572'000, 11'536'000, 13'072'000}));
  EXPECT_EQ(stats.network_bytes, 4u * 1536u);
  EXPECT_EQ(stats.batches, 4u);
}

TEST(PrepService, OffloadReadShipsTheFilesAndTheClientDecodes) {
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::Read);
  LoaderStats stats;
  // Workers: (2 ms of reads + 2 ms serialising 3,072 bytes) / 2 = 2 ms a batch; the NIC 3.072 ms a batch
  // (5.572, 8.644, ...); the client 6 ms of decoding + 1 ms taking the bytes in: client-bound at 7 ms.
  EXPECT_EQ(readies(m, 0, &stats), (std::vector<Time>{12'572'000, 19'572'000, 26'572'000, 33'572'000}));
  EXPECT_EQ(stats.network_bytes, 4u * 3072u);
}

TEST(PrepService, OffloadDecodeLeavesTheBatchingToTheClient) {
  LoaderModelOptions m = costs();
  m.collate_per_batch = kMillisecond;
  // all: the worker's batch is (8 + 1 collate + 1 serialise) / 2 = 5 ms; NIC to 7.036; the client 0.5 ms.
  m.prep_service = service(PrepOffload::All);
  EXPECT_EQ(readies(m).front(), 7'536'000);
  // decode: (8 + 1) / 2 = 4.5 ms; NIC to 6.536; the client collates (1 ms) and takes in (0.5 ms).
  m.prep_service = service(PrepOffload::Decode);
  EXPECT_EQ(readies(m).front(), 8'036'000);
}

TEST(PrepService, AWorkerHoldsAtMostItsBufferOfBatchesTheClientHasNotTaken) {
  // One worker; the consumer takes a batch every 20 ms.
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::All);
  m.prep_service->workers = 1;
  m.prep_service->worker_buffer = 1;
  // Batch 1 starts when batch 0 is delivered (7.036 ms), batch 2 when batch 1 is (27.036 ms): 4.5 ms of
  // work, 0.5 + 1.536 on the NIC, 0.5 on the client.
  EXPECT_EQ(readies(m, 20 * kMillisecond), (std::vector<Time>{7'036'000, 14'072'000, 34'072'000, 54'072'000}));
  // Two batches ahead: batches 1 and 2 start as soon as the worker is free (4.5 and 9 ms), batch 3 once
  // batch 1 is delivered (27.036 ms).
  m.prep_service->worker_buffer = 2;
  EXPECT_EQ(readies(m, 20 * kMillisecond), (std::vector<Time>{7'036'000, 11'536'000, 16'036'000, 34'072'000}));
}

TEST(PrepService, ALocalShareOfTheBatchesRunsWholeOnTheClientFirstComeFirstServed) {
  EXPECT_EQ(prep_local_batches(468, 0.25), 117u);
  EXPECT_EQ(prep_local_batches(3, 0.5), 2u);  // rounded
  EXPECT_EQ(prep_local_batches(4, 0.0), 0u);
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::All);
  m.prep_service->local_share = 0.5;
  LoaderStats stats;
  // Two batches each way; whole batches from the service take no loader worker. Batch 0: the service has it
  // at 7.036 ms, the client would at 8: the service's. Batch 1: the service's second worker at 8.572 (its NIC
  // turn after batch 0's), the client's at 8: the client's. Batch 2: the service's (8.572 against 16), whose
  // quota is then spent; batch 3 the client's, 8 ms after its batch 1.
  EXPECT_EQ(readies(m, 0, &stats), (std::vector<Time>{7'036'000, 8'000'000, 8'572'000, 16'000'000}));
  EXPECT_EQ(stats.network_bytes, 2u * 1536u);
  // One worker of one CPU (9 ms a batch, at the client at 11.036 ms, then 20.036): the client has batch 0
  // sooner (8 ms), the service batch 1 (11.536 against 16), the client batch 2 (16 against 20.536), and
  // batch 3 is the service's, the client's quota spent.
  m.prep_service->workers = 1;
  m.prep_service->cpus_per_worker = 1;
  EXPECT_EQ(readies(m, 0, &stats), (std::vector<Time>{8'000'000, 11'536'000, 16'000'000, 20'536'000}));
  EXPECT_EQ(stats.network_bytes, 2u * 1536u);
}

TEST(PrepService, BadOptionsAreNamed) {
  const auto message = [](PrepServiceOptions p) {
    try {
      validate(p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  PrepServiceOptions p = service(PrepOffload::All);
  p.workers = -1;
  EXPECT_NE(message(p).find("-1 workers"), std::string::npos) << message(p);
  p = service(PrepOffload::All);
  p.cpus_per_worker = 0;
  EXPECT_NE(message(p).find("0 CPUs a worker"), std::string::npos) << message(p);
  p = service(PrepOffload::All);
  p.local_share = 1.5;
  EXPECT_NE(message(p).find("local share of 1.5"), std::string::npos) << message(p);
  p = service(PrepOffload::All);
  p.nic_bytes_per_s = 0;
  EXPECT_NE(message(p).find("NIC rate"), std::string::npos) << message(p);
  p = service(PrepOffload::All);
  p.worker_buffer = 0;
  EXPECT_NE(message(p).find("worker buffer of 0"), std::string::npos) << message(p);
  EXPECT_EQ(parse_prep_offload("decode"), PrepOffload::Decode);
  try {
    parse_prep_offload("half", "--prep-offload");
    FAIL() << "accepted 'half'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --prep-offload 'half': accepted none, read"), std::string::npos)
        << e.what();
  }
  // The workers read from memory: a modelled storage device is refused.
  LoaderModelOptions m = costs();
  m.prep_service = service(PrepOffload::All);
  m.storage = StorageDevice{.name = "disk", .latency = 0, .bytes_per_s = 1e9};
  auto clock = make_virtual_clock();
  EXPECT_THROW(ModelledLoader(*clock, eight_jpegs(), client(), m), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
