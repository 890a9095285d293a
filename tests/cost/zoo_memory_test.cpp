// Tests of the model-zoo memory replay (zoo_memory.h): plan consistency,
// OOM and max batch, the cost-model integration, and the comparison with
// GPEmu's measured peak memory (skipped without ../shared).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::zoo {
namespace {

namespace fs = std::filesystem;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::uint64_t kGiB = 1ull << 30;

// The phase of the op a release belongs to (ops.size(): the step's end).
Phase phase_of_free(const std::vector<OpCost>& ops, int op) {
  return op >= 0 && op < static_cast<int>(ops.size()) ? ops[op].phase : Phase::Optimizer;
}

TEST(ZooMemoryPlan, EventsBalanceWithinAnIteration) {
  const ModelGraph& g = load_model("resnet18");
  for (bool keep : {true, false}) {
    ReplayOptions o;
    o.keep_grads = keep;
    const ZooMemoryPlan p = zoo_memory_plan(g, Shape{16, 0}, o);
    std::vector<int> live(p.slot_bytes.size(), 0);
    for (const auto& e : p.steady_iteration) {
      live[e.slot] += e.alloc ? 1 : -1;
      EXPECT_GE(live[e.slot], 0);
      EXPECT_GE(e.op, -1);
      EXPECT_LE(e.op, p.op_count);
    }
    for (int v : live) EXPECT_EQ(v, 0);  // a steady iteration leaves nothing behind
    int first_net = 0;
    for (const auto& e : p.first_iteration) first_net += e.alloc ? 1 : -1;
    // The first iteration leaves the kept grads and the momentum buffers.
    EXPECT_EQ(first_net, keep ? 62 + 62 : 62);
    EXPECT_EQ(p.input_bytes, 16u * (3 * 224 * 224 * 4 + 8));
  }
}

TEST(ZooMemoryReplay, PersistentStateIsWeightsGradsAndOptimizerState) {
  const ModelGraph& g = load_model("resnet50");
  const std::uint64_t p = g.params();
  ReplayOptions sgd;
  const MemoryReplay r = replay_memory(g, Shape{8, 0}, CachingAllocator::kUnlimited, sgd);
  ASSERT_TRUE(r.fits);
  // weights + grads + momentum (12 B/param) + BN buffers, allocator rounding on top
  EXPECT_GT(r.persistent_bytes, 12 * p);
  EXPECT_LT(r.persistent_bytes, 12 * p * 1.03);
  EXPECT_GT(r.peak_allocated_bytes, r.persistent_bytes + r.input_bytes);
  EXPECT_GE(r.peak_reserved_bytes, r.peak_allocated_bytes);
  EXPECT_EQ(r.peak_iteration, 1);  // steady state is the heavier one
  ReplayOptions adam = sgd;
  adam.optimizer = Optimizer::Adam;
  const MemoryReplay ra = replay_memory(g, Shape{8, 0}, CachingAllocator::kUnlimited, adam);
  EXPECT_GT(ra.persistent_bytes, 16 * p);
  EXPECT_LT(ra.persistent_bytes, 16 * p * 1.04);
  ReplayOptions none = sgd;
  none.keep_grads = false;
  const MemoryReplay rn = replay_memory(g, Shape{8, 0}, CachingAllocator::kUnlimited, none);
  EXPECT_LT(rn.persistent_bytes, 8 * p * 1.03);
  EXPECT_LT(rn.peak_allocated_bytes, r.peak_allocated_bytes);
}

TEST(ZooMemoryReplay, PeakGrowsWithBatchAndAmpSavesActivations) {
  const ModelGraph& g = load_model("resnet50");
  const auto at = [&](std::int64_t b, Precision p) {
    ReplayOptions o;
    o.precision = p;
    return replay_memory(g, Shape{b, 0}, CachingAllocator::kUnlimited, o).peak_allocated_bytes;
  };
  EXPECT_LT(at(16, Precision::FP32), at(32, Precision::FP32));
  EXPECT_LT(at(64, Precision::AMP_FP16), at(64, Precision::FP32));
  EXPECT_LE(at(64, Precision::AMP_BF16), at(64, Precision::AMP_FP16));
}

TEST(ZooMemoryReplay, SequenceModelsUseTheSequenceLength) {
  const ModelGraph& g = load_model("bert_base");
  const auto a = replay_memory(g, Shape{8, 128}, CachingAllocator::kUnlimited);
  const auto b = replay_memory(g, Shape{8, 512}, CachingAllocator::kUnlimited);
  ASSERT_TRUE(a.fits && b.fits);
  EXPECT_EQ(a.shape.seq_len, 128);
  EXPECT_GT(b.peak_allocated_bytes - b.persistent_bytes, 4 * (a.peak_allocated_bytes - a.persistent_bytes));
}

TEST(ZooMemoryReplay, OutOfMemoryReadsLikePyTorch) {
  const ModelGraph& g = load_model("resnet50");
  const MemoryReplay r = replay_memory(g, Shape{256, 0}, 4 * kGiB);
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.oom_message.find("CUDA out of memory"), std::string::npos) << r.oom_message;
  EXPECT_GE(r.oom_iteration, 0);
  EXPECT_LE(r.peak_reserved_bytes, 4 * kGiB);
  EXPECT_THROW(replay_memory(g, Shape{-1, 0}, 4 * kGiB), InputError);
}

TEST(ZooMemoryReplay, MaxBatchIsTheLargestThatFits) {
  const ModelGraph& g = load_model("resnet18");
  const std::uint64_t cap = 6 * kGiB;
  const std::int64_t m = max_batch(cap, g, Shape{});
  ASSERT_GT(m, 1);
  EXPECT_TRUE(replay_memory(g, Shape{m, 0}, cap).fits);
  EXPECT_FALSE(replay_memory(g, Shape{m + 1, 0}, cap).fits);
  EXPECT_EQ(max_batch(64ull << 20, g, Shape{}), 0);  // not even the weights fit
  EXPECT_EQ(max_batch(cap, g, Shape{}, {}, 16), 16);
  // bigger card, bigger batch
  EXPECT_GT(max_batch(2 * cap, g, Shape{}), m);
}

TEST(ZooMemoryReplay, UntilSteadyReplaysUntilTheAllocatorRepeats) {
  const ModelGraph& g = load_model("resnet18");
  ReplayOptions steady;
  steady.until_steady = true;
  const MemoryReplay two = replay_memory(g, Shape{32, 0}, CachingAllocator::kUnlimited);
  const MemoryReplay r = replay_memory(g, Shape{32, 0}, CachingAllocator::kUnlimited, steady);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(two.iterations_replayed, 2);
  EXPECT_GE(r.iterations_replayed, 2);
  EXPECT_LE(r.iterations_replayed, steady.max_iterations);
  // The last iteration reserved nothing new, so one more changes nothing.
  ReplayOptions more = steady;
  more.until_steady = false;
  more.iterations = r.iterations_replayed + 1;
  const MemoryReplay longer = replay_memory(g, Shape{32, 0}, CachingAllocator::kUnlimited, more);
  EXPECT_EQ(longer.peak_reserved_bytes, r.peak_reserved_bytes);
  EXPECT_EQ(longer.peak_allocated_bytes, r.peak_allocated_bytes);
  EXPECT_EQ(r.peak_allocated_bytes, two.peak_allocated_bytes);  // every steady iteration allocates the same
  // At most max_iterations.
  ReplayOptions capped = steady;
  capped.max_iterations = 1;
  EXPECT_EQ(replay_memory(g, Shape{32, 0}, CachingAllocator::kUnlimited, capped).iterations_replayed, 2);
  capped.max_iterations = 0;
  EXPECT_THROW(replay_memory(g, Shape{32, 0}, CachingAllocator::kUnlimited, capped), InputError);
}

// Without keep_output the forward results that only the script holds die at
// their last forward use: BERT's MLM logits (B x S x vocab, FP32), which the
// zoo's loop keeps to the end of the step and `model(...).loss` drops once
// the loss is computed; autograd's saved tensors stay (a backward op reads them).
TEST(ZooMemoryPlan, WithoutKeepOutputTheLogitsDieAtTheLoss) {
  const ModelGraph& g = load_model("bert_base");
  const Shape shape{2, 128};
  const std::vector<TensorLife> tensors = g.tensors(shape);
  const std::vector<OpCost> ops = g.ops(shape);
  ReplayOptions kept, dropped;
  dropped.keep_output = false;
  const ZooMemoryPlan a = zoo_memory_plan(g, shape, kept), b = zoo_memory_plan(g, shape, dropped);
  ASSERT_EQ(a.steady_iteration.size(), b.steady_iteration.size());
  auto frees = [](const ZooMemoryPlan& p) {
    std::map<int, int> f;
    for (const MemoryEvent& e : p.steady_iteration)
      if (!e.alloc) f[e.slot] = e.op;
    return f;
  };
  const std::map<int, int> fa = frees(a), fb = frees(b);
  std::uint64_t largest = 0;
  for (const auto& [slot, op] : fb) {
    if (op == fa.at(slot)) continue;
    const TensorLife& t = tensors.at(a.slot_tensor.at(slot));
    EXPECT_EQ(t.role, Role::Act);
    EXPECT_EQ(ops.at(op).phase, Phase::Forward);                 // now dies in the forward
    EXPECT_NE(phase_of_free(ops, fa.at(slot)), Phase::Forward);  // was kept past it
    largest = std::max(largest, t.bytes);
  }
  EXPECT_EQ(largest, 2ull * 128 * 30522 * 4);  // the logits
  const MemoryReplay ra = replay_memory(g, shape, CachingAllocator::kUnlimited, kept);
  const MemoryReplay rb = replay_memory(g, shape, CachingAllocator::kUnlimited, dropped);
  EXPECT_LT(rb.peak_allocated_bytes + largest / 2, ra.peak_allocated_bytes);
  // A CNN's output is its B x 1000 logits: the peak hardly moves.
  const ModelGraph& r = load_model("resnet18");
  const MemoryReplay ca = replay_memory(r, Shape{32, 0}, CachingAllocator::kUnlimited, kept);
  const MemoryReplay cb = replay_memory(r, Shape{32, 0}, CachingAllocator::kUnlimited, dropped);
  EXPECT_LE(cb.peak_allocated_bytes, ca.peak_allocated_bytes);
  EXPECT_LE(ca.peak_allocated_bytes - cb.peak_allocated_bytes, 2ull << 20);
}

TEST(ZooMemoryReplay, LaterIterationsCanNeedMoreThanTheFirstTwo) {
  // densenet121 at batch 116 (GPEmu's P100 boundary): two iterations fit in
  // 14,900 MiB, but the allocator's layout keeps changing and the fifth
  // iteration runs out. The steady replay says so.
  const ModelGraph& g = load_model("densenet121");
  ReplayOptions o;
  o.legacy_inplace_hardtanh = true;
  o.warm_start = true;
  const std::uint64_t cap = 14900ull << 20;
  ReplayOptions steady = o;
  steady.until_steady = true;
  const MemoryReplay two = replay_memory(g, Shape{116, 0}, cap, o);
  const MemoryReplay settled = replay_memory(g, Shape{116, 0}, cap, steady);
  EXPECT_TRUE(two.fits);
  EXPECT_FALSE(settled.fits) << settled.iterations_replayed;
  EXPECT_GE(settled.oom_iteration, 2);
}

TEST(ZooMemoryReplay, WarmStartMakesGradsAndMomentumFirst) {
  const ModelGraph& g = load_model("resnet50");
  ReplayOptions warm;
  warm.warm_start = true;
  const MemoryReplay cold = replay_memory(g, Shape{16, 0}, CachingAllocator::kUnlimited);
  const MemoryReplay w = replay_memory(g, Shape{16, 0}, CachingAllocator::kUnlimited, warm);
  ASSERT_TRUE(w.fits);
  // The same tensors live at the end and at the peak; the grads and momentum
  // sit together after the weights instead of in segments the first batch's
  // activations made, so only the allocator's block rounding differs.
  EXPECT_NEAR(static_cast<double>(w.persistent_bytes), static_cast<double>(cold.persistent_bytes),
              0.01 * cold.persistent_bytes);
  EXPECT_NEAR(static_cast<double>(w.peak_allocated_bytes), static_cast<double>(cold.peak_allocated_bytes),
              0.005 * cold.peak_allocated_bytes);
  EXPECT_EQ(w.peak_iteration, 0);  // every iteration is a steady one
  // Without kept grads only the momentum is made up front.
  ReplayOptions none = warm;
  none.keep_grads = false;
  ReplayOptions none_cold;
  none_cold.keep_grads = false;
  EXPECT_NEAR(static_cast<double>(replay_memory(g, Shape{16, 0}, CachingAllocator::kUnlimited, none).persistent_bytes),
              static_cast<double>(
                  replay_memory(g, Shape{16, 0}, CachingAllocator::kUnlimited, none_cold).persistent_bytes),
              0.01 * cold.persistent_bytes);
}

TEST(ZooMemoryOom, CapacityIsReportedMemoryLessContextOverTheMargin) {
  const GpuSpec& v100 = find_gpu("V100-PCIE-32GB");
  const std::uint64_t raw = v100.reported_memory() - Device::default_context_reserve(v100);
  EXPECT_EQ(v100.reported_memory(), 32510ull << 20);  // "31.75 GiB total capacity"
  EXPECT_EQ(oom_capacity(v100, 0), raw);
  EXPECT_NEAR(static_cast<double>(oom_capacity(v100)), raw / (1 + kDefaultWorkspaceMargin), 1.0);
  EXPECT_LT(oom_capacity(v100, 0.10), oom_capacity(v100));
  EXPECT_THROW(oom_capacity(v100, -0.01), InputError);
  EXPECT_THROW(oom_capacity(v100, std::nan("")), InputError);
  // Every catalogued card, measured by GPEmu or not, gets a capacity below
  // its chips' size and above 85% of it (ECC takes 1/16 on GDDR cards).
  for (const GpuSpec& gpu : gpu_catalog()) {
    EXPECT_LT(gpu.reported_memory(), gpu.memory_bytes) << gpu.id;
    EXPECT_GT(oom_capacity(gpu), gpu.memory_bytes * 0.85) << gpu.id;
  }
  EXPECT_TRUE(oom_replay_options({}).until_steady);
}

TEST(ZooMemoryCost, FillsEstimatedMemoryOnly) {
  StepCost c;
  c.memory_provenance = Provenance::Estimated;
  ASSERT_TRUE(apply_zoo_memory(c, "ResNet50", 32));
  const MemoryReplay r = replay_memory(load_model("resnet50"), Shape{32, 0}, CachingAllocator::kUnlimited);
  EXPECT_EQ(c.peak_bytes, r.peak_allocated_bytes);
  EXPECT_EQ(c.persistent_bytes, r.persistent_bytes);
  EXPECT_EQ(c.peak_reserved_bytes, r.peak_reserved_bytes);
  EXPECT_EQ(c.input_bytes_per_sample, 3u * 224 * 224 * 4 + 8);
  EXPECT_NE(c.note.find("model-zoo"), std::string::npos);
  const std::string note = c.note;
  ASSERT_TRUE(apply_zoo_memory(c, "resnet50", 32));  // idempotent
  EXPECT_EQ(c.note, note);
  ReplayOptions amp;
  amp.precision = Precision::AMP_FP16;
  ASSERT_TRUE(apply_zoo_memory(c, "resnet50", 32, amp));  // replaces the sentence
  EXPECT_EQ(c.note.find("(fp32"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("(amp"), std::string::npos) << c.note;

  StepCost measured;
  measured.memory_provenance = Provenance::Measured;
  measured.peak_bytes = 123;
  EXPECT_FALSE(apply_zoo_memory(measured, "resnet50", 32));
  EXPECT_EQ(measured.peak_bytes, 123u);
  StepCost unknown;
  EXPECT_FALSE(apply_zoo_memory(unknown, "not_in_the_zoo", 32));
}

TEST(ZooMemoryCost, WrapsACostModel) {
  auto costs = with_zoo_memory(make_cost_model(std::nullopt));
  const GpuSpec& v100 = find_gpu("V100-PCIE-32GB");
  const StepCost c = costs->step_cost(v100, "resnet50", 64);
  const MemoryReplay r = replay_memory(load_model("resnet50"), Shape{64, 0}, CachingAllocator::kUnlimited);
  EXPECT_EQ(c.peak_bytes, r.peak_allocated_bytes);
  EXPECT_EQ(c.memory_provenance, Provenance::Estimated);
  EXPECT_GT(c.forward, 0);
  EXPECT_NE(costs->describe().find("model zoo"), std::string::npos);
}

// ---- comparison with GPEmu's measured peak memory ---------------------------

std::map<int, double> read_peaks(const fs::path& csv) {
  std::map<int, double> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // batch_size,peak,persistent
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string b, p;
    if (!std::getline(ss, b, ',') || !std::getline(ss, p, ',')) continue;
    out[static_cast<int>(std::stod(b))] = std::stod(p);
  }
  return out;
}

// compute_last_measured_batch.csv: gpu,model,phase,last_measured_batch_size
std::map<std::pair<std::string, std::string>, int> read_last_measured(const fs::path& csv) {
  std::map<std::pair<std::string, std::string>, int> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string gpu, model, phase, b;
    if (!std::getline(ss, gpu, ',') || !std::getline(ss, model, ',') || !std::getline(ss, phase, ',') ||
        !std::getline(ss, b, ','))
      continue;
    auto [it, fresh] = out.try_emplace({gpu, model}, std::stoi(b));
    if (!fresh) it->second = std::min(it->second, std::stoi(b));
  }
  return out;
}

struct Comparison {
  int rows = 0;
  double max_abs = 0, sum_abs = 0;
  std::string worst;
};

// Replays every model GPEmu measured on `gpu` at batch 32/64/128 and compares
// the replay's peak allocated with the measured peak; prints the table.
Comparison compare(const fs::path& profiles, const std::string& gpu, const ReplayOptions& options) {
  const auto last = read_last_measured(profiles / "compute_last_measured_batch.csv");
  Comparison c;
  std::printf("%s  (keep_grads=%d, legacy_inplace_hardtanh=%d)\n", gpu.c_str(), options.keep_grads,
              options.legacy_inplace_hardtanh);
  std::printf("%-20s %6s %11s %11s %8s %12s\n", "model", "batch", "measured", "replayed", "error", "reserved");
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(profiles / "memory" / gpu)) models.push_back(e.path());
  std::sort(models.begin(), models.end());
  for (const auto& dir : models) {
    const std::string model = dir.filename().string();
    const ModelGraph* g = find_model(model);
    if (!g) continue;
    const auto peaks = read_peaks(dir / "memory.csv");
    const auto lm = last.find({gpu, model});
    for (int b : {32, 64, 128}) {
      auto it = peaks.find(b);
      if (it == peaks.end() || (lm != last.end() && b > lm->second)) continue;  // not measured
      const MemoryReplay r = replay_memory(*g, Shape{b, 0}, CachingAllocator::kUnlimited, options);
      const double got = r.peak_allocated_bytes / kMiB;
      const double err = (got - it->second) / it->second;
      std::printf("%-20s %6d %11.1f %11.1f %+7.1f%% %12.1f\n", model.c_str(), b, it->second, got, 100 * err,
                  r.peak_reserved_bytes / kMiB);
      ++c.rows;
      c.sum_abs += std::abs(err);
      if (std::abs(err) > c.max_abs) {
        c.max_abs = std::abs(err);
        c.worst = fmt::format("{} b{}", model, b);
      }
    }
  }
  std::printf("%d rows: mean |error| %.2f%%, max %.2f%% (%s)\n\n", c.rows, 100 * c.sum_abs / std::max(1, c.rows),
              100 * c.max_abs, c.worst.c_str());
  return c;
}

fs::path shared_profiles_dir() {
  const fs::path p = fs::path(GPEMU_SHARED_DIR) / "reference" / "gpemu-profiles";
  return fs::is_directory(p / "memory") ? p : fs::path();
}

TEST(ZooMemoryReference, MatchesGPEmuMeasuredPeaksOnV100) {
  const fs::path profiles = shared_profiles_dir();
  if (profiles.empty()) GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR;
  // GPEmu's V100/P100/M40 tables come from a PyTorch older than 1.10
  // (docs/zoo-memory.md): grads kept by zero_grad(), hardtanh_ saving its result.
  ReplayOptions era;
  era.legacy_inplace_hardtanh = true;
  const Comparison c = compare(profiles, "Tesla_V100-PCIE-32GB", era);
  ASSERT_GE(c.rows, 60);
  EXPECT_LT(c.max_abs, 0.10) << c.worst;
  EXPECT_LT(c.sum_abs / c.rows, 0.02);
}

TEST(ZooMemoryReference, MatchesGPEmuMeasuredPeaksOnA100) {
  const fs::path profiles = shared_profiles_dir();
  if (profiles.empty()) GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR;
  // The A100 tables come from a PyTorch >= 1.10: the default replay.
  const Comparison c = compare(profiles, "NVIDIA_A100-SXM4-40GB", ReplayOptions{});
  ASSERT_GE(c.rows, 60);
  EXPECT_LT(c.max_abs, 0.10) << c.worst;
  EXPECT_LT(c.sum_abs / c.rows, 0.02);
}

TEST(ZooMemoryReference, DefaultReplayOnV100ForTheRecord) {
  const fs::path profiles = shared_profiles_dir();
  if (profiles.empty()) GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR;
  // Without the legacy hardtanh rule mobilenet_v2 is ~43% over on V100 (it
  // matches the A100 table instead); everything else stays within 10%.
  const Comparison c = compare(profiles, "Tesla_V100-PCIE-32GB", ReplayOptions{});
  EXPECT_NE(c.worst.find("mobilenet_v2"), std::string::npos);
}

}  // namespace
}  // namespace gpemu::zoo

namespace gpemu::zoo {
namespace {

// GPEmu's timing tables stop at the last batch that ran on the card
// (compute_last_measured_batch.csv); below 256 that is an OOM point. Compare
// it with max_batch on oom_capacity (reported memory, context, workspace /
// fragmentation margin), replayed to the allocator's steady state from a warm
// start, as GPEmu's profiler ran (docs/zoo-memory.md, "Out-of-memory points").
TEST(ZooMemoryReference, MaxBatchAgainstGPEmuOomPoints) {
  const fs::path profiles = shared_profiles_dir();
  if (profiles.empty()) GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR;
  const auto last = read_last_measured(profiles / "compute_last_measured_batch.csv");
  std::printf("%-22s %-20s %9s %9s %8s\n", "gpu", "model", "last fit", "max_batch", "error");
  int rows = 0, exact = 0, within2 = 0;
  double sum = 0;
  for (const auto& [key, batch] : last) {
    const auto& [gpu_name, model] = key;
    if (batch >= 256) continue;  // no OOM seen
    const ModelGraph* g = find_model(model);
    if (!g) continue;
    // GPEmu's V100/P100/M40 ran a PyTorch older than 1.10 (hardtanh_ saved its result).
    ReplayOptions o = oom_replay_options({});
    o.legacy_inplace_hardtanh = gpu_name.find("A100") == std::string::npos;
    o.warm_start = true;
    const std::int64_t m = max_batch(oom_capacity(find_gpu(gpu_name)), *g, Shape{}, o, 256);
    const double err = (static_cast<double>(m) - batch) / batch;
    std::printf("%-22s %-20s %9d %9lld %+7.1f%%\n", gpu_name.c_str(), model.c_str(), batch, static_cast<long long>(m),
                100 * err);
    ++rows;
    sum += std::abs(err);
    exact += m == batch;
    within2 += std::abs(m - batch) <= 2;
  }
  std::printf("%d OOM points: exact %d, within 2 batches %d, mean |error| %.1f%%\n", rows, exact, within2,
              100 * sum / std::max(rows, 1));
  EXPECT_GE(rows, 40);
  // docs/zoo-memory.md: 15 of 43 exact, 33 within 2 batches, mean |error|
  // 1.8% (VGG without batch norm on P100/M40 the worst: the card ran out 5-20%
  // before any other model says it should). Before the margin, the reported
  // memory and the steady replay: 0 exact, mean +8.5%, never below.
  EXPECT_GE(exact, rows * 3 / 10);
  EXPECT_GE(within2, rows * 7 / 10);
  EXPECT_LT(sum / rows, 0.03);
}

}  // namespace
}  // namespace gpemu::zoo
