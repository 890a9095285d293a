// The modelled loader's timeline path (LoaderModelOptions::preprocess,
// storage_link: DLIO's modelled loading): each batch an operation on the
// timeline, its bytes over a link the ranks' loaders share max-min, around a
// source that delivers the data; times checked by hand under the virtual clock.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/pipeline.h"
#include "gpemu/timeline.h"

namespace gpemu::pipeline {
namespace {

// 8 samples of 10,000 bytes.
std::shared_ptr<const Dataset> samples() {
  auto d = std::make_shared<Dataset>();
  d->root = "test";
  for (int i = 0; i < 8; ++i) d->samples.push_back({.path = "f" + std::to_string(i), .length = 10000});
  return d;
}

LoaderOptions options(int rank, int world) {
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 1;
  o.prefetch_factor = 1;
  o.shuffle = false;
  o.rank = rank;
  o.world_size = world;
  return o;
}

// DLIO's model: 5 ms of preprocessing a sample, no read or decode cost, then
// the batch's bytes over the storage link.
LoaderModelOptions dlio_model(const Link& storage) {
  LoaderModelOptions m;
  m.read_per_sample = 0;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = 0;
  m.decode_ns_per_byte = 0;
  m.preprocess = TimeSpec::constant(0.005);
  m.storage_link = &storage;
  return m;
}

// When each of `world` ranks' loaders delivered its batches (a host thread
// each, consuming at once).
std::vector<std::vector<Time>> deliveries(int world, bool inner) {
  auto clock = make_virtual_clock();
  Timeline tl(*clock);
  const Link& storage = tl.add_link("storage", 1e6, true);  // 1 MB/s
  const auto data = samples();
  std::vector<std::vector<Time>> out(static_cast<std::size_t>(world));
  std::vector<std::function<void()>> bodies;
  for (int r = 0; r < world; ++r) {
    bodies.push_back([&, r] {
      const LoaderOptions o = options(r, world);
      std::unique_ptr<BatchSource> source;
      if (inner)
        source = std::make_unique<SyntheticSource>(*clock, Sampler(data->size(), sampler_options(o)), 2, 10000,
                                                   HostMemoryKind::Pinned);
      ModelledLoader loader(*clock, data, o, dlio_model(storage), &tl, std::move(source));
      if (inner) {
        EXPECT_NE(loader.describe().find("modelled preprocessing/storage"), std::string::npos) << loader.describe();
      }
      loader.begin_epoch(0);
      auto sleep = [&](Time t) { clock->sleep_until(t); };
      while (auto b = loader.next(sleep)) {
        EXPECT_EQ(b->samples, 2);
        out[static_cast<std::size_t>(r)].push_back(b->ready);
      }
    });
  }
  clock->run_concurrently(std::move(bodies));
  return out;
}

// Alone, a batch takes 2 x 5 ms of preprocessing, then 20,000 bytes at 1 MB/s
// (20 ms); its worker starts the next once it is delivered (prefetch 1, one
// worker). Two ranks' batches cross the storage together at 0.5 MB/s each
// (40 ms), so each batch ends 10 + 40 ms after its dispatch.
TEST(ModelledLoaderTimeline, BatchesArePreprocessedThenCrossAStorageLinkTheRanksShare) {
  for (const bool inner : {false, true}) {
    const auto one = deliveries(1, inner);
    ASSERT_EQ(one[0].size(), 4u);  // 8 samples, batch 2
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(one[0][i], static_cast<Time>(i + 1) * 30 * kMillisecond) << i;
    const auto two = deliveries(2, inner);
    for (const auto& rank : two) {
      ASSERT_EQ(rank.size(), 2u);  // 4 samples a rank
      EXPECT_EQ(rank[0], 50 * kMillisecond);
      EXPECT_EQ(rank[1], 100 * kMillisecond);
    }
  }
}

}  // namespace
}  // namespace gpemu::pipeline
