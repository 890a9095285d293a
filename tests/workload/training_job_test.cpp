// A training job's iterations on the emulated timeline, exact under the
// virtual clock with variation turned off.
#include <gtest/gtest.h>

#include <cmath>

#include "gpemu/error.h"
#include "gpemu/workload.h"

namespace gpemu {
namespace {

constexpr Duration ms = kMillisecond;
constexpr std::uint64_t MiB = 1ull << 20;

GpuSpec small_gpu(std::uint64_t memory) {
  GpuSpec s;
  s.id = "TEST-GPU";
  s.architecture = "Volta";
  s.memory_bytes = memory;
  s.memory_bandwidth_gbs = 900;
  s.fp32_tflops = 14;
  s.sm_count = 80;
  return s;
}

// Round numbers instead of the built-in estimates.
class FixedCosts : public CostModel {
 public:
  StepCost step_cost(const GpuSpec&, std::string_view, int batch) const override {
    StepCost c;
    c.forward = 10 * ms;
    c.backward = 20 * ms;
    c.input_bytes_per_sample = 1 * MiB;
    c.persistent_bytes = 120 * MiB;
    c.peak_bytes = c.persistent_bytes + batch * c.input_bytes_per_sample + 48 * MiB * batch;
    c.oom_evidence_batch = evidence;
    c.note = "fixed test costs";
    return c;
  }
  std::vector<std::string> models() const override { return {"toy"}; }
  std::string describe() const override { return "fixed"; }
  std::optional<int> evidence;
};

TrainingOptions exact(int batch, int iterations) {
  TrainingOptions o;
  o.model = "toy";
  o.batch_size = batch;
  o.iterations = iterations;
  o.variation.cv = 0;
  o.variation.warmup_factor = 1;
  return o;
}

// Bytes the persistent state of a plan takes in the allocator (rounded blocks).
std::uint64_t persistent_allocated(const StepCost& c, int batch) {
  std::uint64_t sum = 0;
  for (std::uint64_t t : make_memory_plan(c, batch).persistent_tensors) sum += CachingAllocator::round_size(t);
  return sum;
}

struct Job : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
  GpuSpec spec = small_gpu(16ull << 30);
  Device gpu{timeline, spec, DeviceOptions{.context_reserve_bytes = 0}};
  FixedCosts costs;

  Duration h2d(std::uint64_t bytes, HostMemoryKind k) const {
    const PcieModel& p = gpu.pcie();
    return p.latency(k) + static_cast<Duration>(std::ceil(static_cast<double>(bytes) / p.gbs(k) - 1e-9));
  }
};

TEST_F(Job, EachIterationIsCopyThenForwardThenBackwardThenLossReadBack) {
  TrainingJob job(gpu, costs, exact(4, 1));
  IterationTiming t = job.step();
  const Duration copy = h2d(4 * MiB, HostMemoryKind::Pinned);
  EXPECT_EQ(t.start, 0);
  EXPECT_EQ(t.h2d_end, copy);
  EXPECT_EQ(t.forward_end, copy + 10 * ms);
  EXPECT_EQ(t.backward_end, copy + 30 * ms);
  // loss.item(): the host waited for a 4-byte pageable D2H after backward.
  EXPECT_EQ(clock->now(), copy + 30 * ms + h2d(4, HostMemoryKind::Pageable));
}

TEST_F(Job, SyncAtEndLetsTheHostRunAheadOfTheGpu) {
  TrainingOptions o = exact(4, 3);
  o.sync = SyncMode::AtEnd;
  TrainingJob job(gpu, costs, o);
  job.step();
  job.step();
  job.step();
  EXPECT_EQ(clock->now(), 0);  // nothing blocked the host
  TrainingResult r = job.summarize();
  EXPECT_EQ(r.elapsed, 3 * (h2d(4 * MiB, HostMemoryKind::Pinned) + 30 * ms));
  EXPECT_EQ(clock->now(), r.elapsed);
}

TEST_F(Job, PageableInputCopiesBlockTheHost) {
  TrainingOptions o = exact(4, 1);
  o.host_memory = HostMemoryKind::Pageable;
  o.sync = SyncMode::AtEnd;
  TrainingJob job(gpu, costs, o);
  job.step();
  EXPECT_EQ(clock->now(), h2d(4 * MiB, HostMemoryKind::Pageable));
}

TEST_F(Job, SummaryCountsSamplesThroughputAndBusyShare) {
  TrainingJob job(gpu, costs, exact(8, 10));
  TrainingResult r = job.run();
  const Duration per_it = h2d(8 * MiB, HostMemoryKind::Pinned) + 30 * ms + h2d(4, HostMemoryKind::Pageable);
  EXPECT_EQ(r.iterations, 10);
  EXPECT_EQ(r.samples, 80);
  EXPECT_EQ(r.elapsed, 10 * per_it);
  EXPECT_DOUBLE_EQ(r.samples_per_s, 80 / to_seconds(10 * per_it));
  EXPECT_DOUBLE_EQ(r.gpu_busy_pct, 100.0 * (300.0 * ms) / static_cast<double>(10 * per_it));
  EXPECT_EQ(r.forward_total, 100 * ms);
  EXPECT_EQ(r.backward_total, 200 * ms);
  EXPECT_EQ(r.h2d_total, 10 * h2d(8 * MiB, HostMemoryKind::Pinned));
}

TEST_F(Job, MemoryGoesThroughTheCachingAllocatorAndIsReturned) {
  {
    TrainingJob job(gpu, costs, exact(8, 3));
    TrainingResult r = job.run();
    const std::uint64_t peak = 120 * MiB + 8 * MiB + 48 * MiB * 8;
    EXPECT_GE(r.peak_allocated_bytes, peak);
    EXPECT_LT(r.peak_allocated_bytes, peak + 200 * 512);  // only 512-byte rounding on top
    EXPECT_GE(r.peak_reserved_bytes, r.peak_allocated_bytes);
    // Only the persistent state stays allocated between iterations.
    EXPECT_EQ(gpu.allocator().stats().allocated_bytes, persistent_allocated(costs.step_cost(spec, "toy", 8), 8));
  }
  EXPECT_EQ(gpu.allocator().stats().allocated_bytes, 0u);
}

TEST(JobMemory, ABatchThatDoesNotFitRaisesCudaStyleOutOfMemory) {
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  GpuSpec spec = small_gpu(2ull << 30);
  Device gpu(timeline, spec, DeviceOptions{.context_reserve_bytes = 0});
  FixedCosts costs;
  TrainingJob ok(gpu, costs, exact(16, 1));
  EXPECT_NO_THROW(ok.step());
  TrainingJob too_big(gpu, costs, exact(64, 1));  // 120 + 64 + 3072 MiB > 2 GiB
  try {
    too_big.step();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA out of memory. Tried to allocate"), std::string::npos);
  }
  // Nothing leaked from the failed iteration.
  EXPECT_EQ(gpu.allocator().stats().allocated_bytes,
            persistent_allocated(costs.step_cost(spec, "toy", 16), 16) + persistent_allocated(costs.step_cost(spec, "toy", 64), 64));
}

TEST(JobMemory, CheckMemoryAgreesWithTheAllocatorAndHonoursMeasuredEvidence) {
  FixedCosts costs;
  const GpuSpec spec = small_gpu(2ull << 30);
  MemoryCheck fits = check_memory(costs.step_cost(spec, "toy", 16), 16, 2ull << 30);
  EXPECT_TRUE(fits.fits);
  MemoryCheck no = check_memory(costs.step_cost(spec, "toy", 64), 64, 2ull << 30);
  EXPECT_FALSE(no.fits);
  EXPECT_NE(no.reason.find("CUDA out of memory"), std::string::npos);
  costs.evidence = 12;
  MemoryCheck measured = check_memory(costs.step_cost(spec, "toy", 16), 16, 2ull << 30);
  EXPECT_FALSE(measured.fits);
  EXPECT_NE(measured.reason.find("ran out of memory on the real card"), std::string::npos);
}

TEST(JobOptions, ImpossibleValuesAreInputErrors) {
  EXPECT_THROW(parse_sync_mode("sometimes"), InputError);
  EXPECT_THROW(make_memory_plan(StepCost{}, 0), InputError);
}

}  // namespace
}  // namespace gpemu
