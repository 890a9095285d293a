// GPU decode as DALI's mixed pipeline does it, under the virtual clock: the
// model per card, one batch's GPU work, and the modelled loader's times.
#include <gtest/gtest.h>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/pipeline.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

// Four JPEGs of 110,000 bytes: 187,500 pixels each by the layout rule.
Dataset four_jpegs() {
  Dataset d;
  d.root = "four";
  for (std::uint64_t i = 0; i < 4; ++i)
    d.samples.push_back({.path = "f", .offset = i * 110000, .length = 110000, .format = SampleFormat::Jpeg});
  return d;
}

// A card-free model with round figures: 1 ns a pixel on the SMs or 2 on the
// engine, 1 byte a ns of memory bandwidth.
GpuDecodeModel round_model(bool engine, int depth = 2) {
  GpuDecodeModel m;
  m.gpu = "test";
  m.engine = engine;
  m.sm_ns_per_pixel = 1.0;
  m.engine_ns_per_pixel = 2.0;
  m.memory_bytes_per_s = 1e9;
  m.queue_depth = depth;
  return m;
}

TEST(GpuDecode, TheEngineIsTheJpegDecoderOfA100AndH100Dies) {
  for (const char* gpu : {"a100", "h100", "h200"}) EXPECT_TRUE(gpu_decode_model(find_gpu(gpu)).engine) << gpu;
  for (const char* gpu : {"p100", "v100", "t4", "l4"}) EXPECT_FALSE(gpu_decode_model(find_gpu(gpu)).engine) << gpu;
  // The SMs' rate is GPEmu's measured P100 median (14.9097 ms for 256 images of 187,500 pixels), by bandwidth.
  const GpuDecodeModel p100 = gpu_decode_model(find_gpu("p100"));
  EXPECT_DOUBLE_EQ(p100.sm_ns_per_pixel, 14.9097e6 / (256.0 * 187500.0));
  EXPECT_DOUBLE_EQ(gpu_decode_model(find_gpu("v100")).sm_ns_per_pixel, p100.sm_ns_per_pixel * 732.0 / 900.0);
  // The engine: 5,000 ImageNet images a second.
  EXPECT_DOUBLE_EQ(gpu_decode_model(find_gpu("a100")).engine_ns_per_pixel * 187500.0, 200000.0);
}

TEST(GpuDecode, ABatchCostsItsPixelsAndTheBytesItsResizeMoves) {
  const Dataset d = four_jpegs();
  // Per image: 3 x 50,176 bytes of crop read (8-bit) + 3 x 50,176 x 4 of float output = 752,640 bytes.
  const GpuDecodeCost sms = gpu_decode_cost(round_model(false), d, {0, 1}, ImageTransformOptions{});
  EXPECT_EQ(sms.engine, 0);
  EXPECT_EQ(sms.sm, 2 * 187500 + 2 * 752640);
  // Two decoded float batches of two, and the batch's 8-bit pixels.
  EXPECT_EQ(sms.device_bytes, 2u * 2u * 602112u + 3u * 375000u);
  const GpuDecodeCost engine = gpu_decode_cost(round_model(true), d, {0, 1}, ImageTransformOptions{});
  EXPECT_EQ(engine.engine, 2 * 2 * 187500);
  EXPECT_EQ(engine.sm, 2 * 752640);
}

TEST(GpuDecode, TheHostEntropyDecodesOnlyWithoutAnEngine) {
  LoaderModelOptions m;
  m.decode_per_sample = kMillisecond;  // the CPU loader's crop/resize/normalise: the GPU's now
  m.decode_ns_per_byte = 10;
  const Sample s = four_jpegs().samples[0];
  m.gpu_decode = round_model(false);
  EXPECT_EQ(model_sample_cost(s, true, m).decode, 1'100'000);
  m.gpu_decode = round_model(true);
  EXPECT_EQ(model_sample_cost(s, true, m).decode, 0);
}

struct Delivered {
  Time ready;
  std::uint64_t bytes;
  Duration gpu;
  std::uint64_t device_bytes;
  bool operator==(const Delivered&) const = default;
};

// One worker, batches of two, no read cost, 10 ns a byte of host entropy
// decoding: 2.2 ms of host work a batch.
std::vector<Delivered> deliveries(const GpuDecodeModel& g, Time first_call) {
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 1;
  o.prefetch_factor = 2;
  LoaderModelOptions m;
  m.read_per_sample = 0;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = kMillisecond;
  m.decode_ns_per_byte = 10;
  m.cores = 64;
  m.gpu_decode = g;
  auto clock = make_virtual_clock();
  ModelledLoader loader(*clock, four_jpegs(), o, m);
  loader.begin_epoch(0);
  clock->sleep_until(first_call);
  std::vector<Delivered> out;
  while (auto b = loader.next({})) out.push_back({b->ready, b->bytes, b->gpu_decode, b->pipeline_device_bytes});
  return out;
}

TEST(GpuDecode, TheLoaderRunsTheGpuStageAfterTheHostsInBatchOrder) {
  const Duration sm = 2 * 187500 + 2 * 752640;  // 1,880,280 ns a batch
  const std::uint64_t device = 2u * 2u * 602112u + 3u * 375000u;
  // Host 2.2 ms a batch; the GPU stage follows each batch's host part.
  EXPECT_EQ(deliveries(round_model(false), 0),
            (std::vector<Delivered>{{2'200'000 + sm, 220000, sm, device}, {4'400'000 + sm, 220000, sm, device}}));
  // With the engine the host does no decoding: the GPU stage is the bottleneck (750 us + 1,505,280 ns a batch).
  const Duration engine = 750000 + 2 * 752640;
  EXPECT_EQ(deliveries(round_model(true), 0),
            (std::vector<Delivered>{{engine, 220000, 2 * 752640, device}, {2 * engine, 220000, 2 * 752640, device}}));
  // One output buffer: batch 1's GPU stage waits for batch 0's delivery (at 10 ms, when the consumer first asks).
  EXPECT_EQ(deliveries(round_model(true, 1), 10'000'000)[1].ready, 10'000'000 + engine);
  EXPECT_EQ(deliveries(round_model(true, 2), 10'000'000)[1].ready, 2 * engine);
}

// Real clock: 300 tiny JPEGs read by the real loader with GPU decode. The
// workers deliver the files' bytes and count their real pixels (from the
// headers); the batch's GPU work is the model's for those pixels.
TEST(GpuDecodeReal, WorkersDeliverTheFilesAndTheirPixels) {
  testing::TempDir dir;
  generate_image_dataset(dir.path(), 3, 300, 7, 3.0);
  const Dataset d = open_image_folder(dir.path());
  ASSERT_EQ(d.size(), 300u);
  JpegDecoder decoder;
  for (const char* gpu : {"p100", "a100"}) {
    LoaderOptions o;
    o.batch_size = 64;
    o.num_workers = 2;
    o.gpu_decode = gpu_decode_model(find_gpu(gpu));
    auto clock = make_real_clock();
    PipelineSource source(*clock, d, o);
    source.begin_epoch(0);
    std::size_t samples = 0;
    while (auto b = source.next({})) {
      const auto& batch = *std::static_pointer_cast<Batch>(b->keep_alive);
      EXPECT_EQ(batch.layout, BatchLayout::Bytes);
      double pixels = 0, crop = 0;
      std::uint64_t bytes = 0;
      for (std::size_t k = 0; k < batch.sample_indices.size(); ++k) {
        const Sample& s = d.samples[batch.sample_indices[k]];
        const auto file = testing::read_bytes(s.path);
        const JpegInfo info = decoder.read_info(file);
        pixels += static_cast<double>(info.width) * info.height;
        crop += std::min(static_cast<double>(info.width) * info.height, 224.0 * 224.0);
        bytes += s.length;
        // The delivered record is the file itself.
        const auto record =
            batch.bytes().subspan(batch.byte_offsets[k], batch.byte_offsets[k + 1] - batch.byte_offsets[k]);
        ASSERT_EQ(record.size(), file.size());
        EXPECT_TRUE(std::equal(record.begin(), record.end(), file.begin()));
      }
      EXPECT_EQ(b->bytes, bytes);
      EXPECT_DOUBLE_EQ(batch.gpu_jpeg_pixels, pixels);
      EXPECT_DOUBLE_EQ(batch.gpu_crop_pixels, crop);
      const GpuDecodeCost c = gpu_decode_cost(*o.gpu_decode, pixels, crop, batch.size(), o.transform);
      EXPECT_EQ(b->gpu_decode, c.sm) << gpu;
      EXPECT_EQ(b->pipeline_device_bytes, c.device_bytes);
      EXPECT_GT(b->decode, 0) << "the host's parse (and entropy decoding) is timed";
      if (c.engine > 0) {
        EXPECT_GE(b->ready, c.engine);  // after the engine's turn
      }
      samples += batch.size();
    }
    EXPECT_EQ(samples, 300u);
    EXPECT_NE(source.describe().find(std::string("GPU decode (DALI-style) on ") + o.gpu_decode->gpu),
              std::string::npos);
  }
}

TEST(GpuDecodeReal, ACorruptJpegIsTheSamplesError) {
  testing::TempDir dir;
  generate_image_dataset(dir.path(), 1, 4, 3, 3.0);
  Dataset d = open_image_folder(dir.path());
  testing::write_bytes(d.samples[2].path, std::vector<std::byte>(64, std::byte{0x42}));
  d = open_image_folder(dir.path());
  LoaderOptions o;
  o.batch_size = 4;
  o.gpu_decode = gpu_decode_model(find_gpu("p100"));
  DataLoader loader(d, o);
  loader.begin_epoch(0);
  try {
    loader.next();
    FAIL() << "a corrupt JPEG was parsed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(d.samples[2].path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpemu::pipeline
