// The built-in estimate used where nothing was measured, and how close it
// comes to GPEmu's measurements.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

const GpuSpec& v100() { return find_gpu("V100-PCIE-32GB"); }

TEST(BuiltinModels, CoverTheCommonTorchvisionClassifiers) {
  for (std::string_view name :
       {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "alexnet", "vgg11", "vgg16", "mobilenet_v2",
        "densenet121", "googlenet", "squeezenet1_0", "shufflenet_v2_x1_0"})
    EXPECT_NE(find_builtin_model(name), nullptr) << name;
  EXPECT_NE(find_builtin_model(kDefaultModel), nullptr);
  EXPECT_NE(find_builtin_model("ResNet50"), nullptr);
  EXPECT_NE(find_builtin_model("Mobilenet-V2"), nullptr);
  EXPECT_EQ(find_builtin_model("gpt3"), nullptr);
  auto models = builtin_models();
  EXPECT_TRUE(std::is_sorted(models.begin(), models.end(),
                             [](const ModelFacts& a, const ModelFacts& b) { return a.name < b.name; }));
}

TEST(BuiltinModels, CarryTorchvisionFigures) {
  const ModelFacts* r50 = find_builtin_model("resnet50");
  ASSERT_NE(r50, nullptr);
  EXPECT_EQ(r50->parameters, 25557032u);
  EXPECT_EQ(r50->forward_gmacs, 4.089);
}

TEST(DefaultEstimate, IsFlaggedEstimatedWithANote) {
  StepCost c = estimate_step_cost(v100(), "resnet50", 64);
  EXPECT_EQ(c.forward_provenance, Provenance::Estimated);
  EXPECT_EQ(c.backward_provenance, Provenance::Estimated);
  EXPECT_EQ(c.memory_provenance, Provenance::Estimated);
  EXPECT_EQ(c.note.rfind("estimate: no measured profile for V100-PCIE-32GB/resnet50", 0), 0u) << c.note;
  EXPECT_FALSE(c.transfer_pageable.has_value());
  EXPECT_FALSE(c.oom_evidence_batch.has_value());
}

TEST(DefaultEstimate, FollowsTheRooflineFormula) {
  // forward = max(11 ms, 2 x 4.089 GFLOP x b / (14 TFLOP/s x 0.60)); backward = 2x FLOPs + 14 ms.
  StepCost big = estimate_step_cost(v100(), "resnet50", 256);
  EXPECT_EQ(big.forward, from_seconds(2 * 4.089e9 * 256 / (14e12 * 0.60)));
  EXPECT_EQ(big.backward, from_seconds(4 * 4.089e9 * 256 / (14e12 * 0.60)) + 14 * kMillisecond);
  StepCost small = estimate_step_cost(v100(), "resnet50", 1);
  EXPECT_EQ(small.forward, 11 * kMillisecond);  // launch floor
  // A faster card is proportionally faster above the floor.
  StepCost a100 = estimate_step_cost(find_gpu("A100-SXM4-40GB"), "resnet50", 256);
  EXPECT_EQ(a100.forward, from_seconds(2 * 4.089e9 * 256 / (19.5e12 * 0.60)));
}

TEST(DefaultEstimate, MemoryIsParametersInputAndActivations) {
  StepCost c = estimate_step_cost(v100(), "resnet50", 32);
  EXPECT_EQ(c.input_bytes_per_sample, 3u * 224 * 224 * 4);
  EXPECT_EQ(c.persistent_bytes, 12u * 25557032);
  const ModelFacts* f = find_builtin_model("resnet50");
  std::uint64_t expected =
      12u * 25557032 + 32u * 602112 +
      static_cast<std::uint64_t>(std::llround((f->transient_mib + 32 * f->activation_mib_per_sample) * 1048576.0));
  EXPECT_EQ(c.peak_bytes, expected);
}

TEST(DefaultEstimate, RejectsUnknownModelsListingKnownOnesAndBadBatchSizes) {
  try {
    estimate_step_cost(v100(), "gpt3", 8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("gpt3"), std::string::npos) << what;
    EXPECT_NE(what.find("resnet50"), std::string::npos) << what;
    EXPECT_NE(what.find("vgg16"), std::string::npos) << what;
  }
  EXPECT_THROW(estimate_step_cost(v100(), "resnet50", 0), InputError);
}

// ---- against GPEmu's measurements (shared reference data) -----------------

struct Errors {
  double max_forward = 0, max_backward = 0, max_total = 0;
  double rms_forward = 0, rms_backward = 0;
};

Errors compare(const GpuSpec& gpu, const Profile& p) {
  Errors e;
  int n = 0;
  for (std::size_t i = 0; i < p.forward_s.size() && i < p.backward_s.size(); ++i) {
    int b = p.forward_s[i].batch_size;
    StepCost c = estimate_step_cost(gpu, p.model, b);
    double f = to_seconds(c.forward) / p.forward_s[i].value - 1;
    double bw = to_seconds(c.backward) / p.backward_s[i].value - 1;
    double t = to_seconds(c.forward + c.backward) / (p.forward_s[i].value + p.backward_s[i].value) - 1;
    e.max_forward = std::max(e.max_forward, std::abs(f));
    e.max_backward = std::max(e.max_backward, std::abs(bw));
    e.max_total = std::max(e.max_total, std::abs(t));
    e.rms_forward += f * f;
    e.rms_backward += bw * bw;
    ++n;
  }
  e.rms_forward = std::sqrt(e.rms_forward / n);
  e.rms_backward = std::sqrt(e.rms_backward / n);
  return e;
}

// The documented band (docs/cost-model.md): ResNet-50 on V100, every measured
// batch size 1..256.
TEST(DefaultEstimate, ResNet50OnV100LiesWithinTheDocumentedBandOfTheMeasuredProfile) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  ProfileDatabase db = ProfileDatabase::load(shared);
  const Profile* p = db.find("V100-PCIE-32GB", "resnet50");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->forward_s.size(), 256u);
  Errors e = compare(v100(), *p);
  std::printf(
      "[ estimate ] resnet50/V100 vs measured, batch 1..256: forward max %.1f%% rms %.1f%%, "
      "backward max %.1f%% rms %.1f%%, forward+backward max %.1f%%\n",
      100 * e.max_forward, 100 * e.rms_forward, 100 * e.max_backward, 100 * e.rms_backward, 100 * e.max_total);
  EXPECT_LE(e.max_forward, 0.15);
  EXPECT_LE(e.max_backward, 0.22);
  EXPECT_LE(e.max_total, 0.12);
  EXPECT_LE(e.rms_forward, 0.06);
  EXPECT_LE(e.rms_backward, 0.06);

  // Memory: the fitted line against the measured peak, batch 16 and up.
  for (const ProfilePoint& q : p->peak_allocated_mib) {
    if (q.batch_size < 16) continue;
    StepCost c = estimate_step_cost(v100(), "resnet50", q.batch_size);
    EXPECT_NEAR(static_cast<double>(c.peak_bytes) / 1048576.0, q.value, 0.03 * q.value) << q.batch_size;
  }
}

// The per-model rms errors of the one-efficiency roofline on V100, as
// docs/cost-model.md's table states them (rounded to whole percent).
std::map<std::string, std::pair<int, int>> documented_v100_rms() {
  std::ifstream doc(std::filesystem::path(GPEMU_SOURCE_DIR) / "docs" / "cost-model.md");
  std::map<std::string, std::pair<int, int>> out;
  std::string line;
  bool in_table = false;
  while (std::getline(doc, line)) {
    if (line.starts_with("| model | fwd rms | bwd rms |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    for (std::size_t i = 0; i + 2 < cells.size(); i += 4)
      if (!cells[i].empty() && cells[i + 1].ends_with('%'))
        out[cells[i]] = {std::stoi(cells[i + 1]), std::stoi(cells[i + 2])};
  }
  return out;
}

// How far the one-efficiency roofline is from every model measured on V100:
// the figures docs/cost-model.md quotes, to the percent.
TEST(DefaultEstimate, ErrorForEveryModelOnV100IsTheDocumentedOne) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  ProfileDatabase db = ProfileDatabase::load(shared);
  const auto documented = documented_v100_rms();
  ASSERT_GE(documented.size(), 20u) << "docs/cost-model.md's per-model table was not found";
  int compared = 0;
  for (const Profile& p : db.profiles()) {
    if (p.gpu != "V100-PCIE-32GB" || !find_builtin_model(p.model)) continue;
    const Errors e = compare(v100(), p);
    const auto it = documented.find(p.model);
    if (it == documented.end()) {
      ADD_FAILURE() << p.model << " is measured on V100 but missing from docs/cost-model.md: fwd rms "
                    << 100 * e.rms_forward << "%, bwd rms " << 100 * e.rms_backward << "%";
      continue;
    }
    EXPECT_NEAR(100 * e.rms_forward, it->second.first, 0.5 + 1e-9) << p.model << " forward rms";
    EXPECT_NEAR(100 * e.rms_backward, it->second.second, 0.5 + 1e-9) << p.model << " backward rms";
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(documented.size()));
}

// Reproduces the activation-memory fit in builtin_models.cpp from GPEmu's V100
// memory tables, and prints replacement rows when the table has drifted.
TEST(BuiltinModels, MemoryFitReproducesTheTable) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  ProfileDatabase db = ProfileDatabase::load(shared);
  int checked = 0;
  for (const ModelFacts& m : builtin_models()) {
    const Profile* p = db.find("V100-PCIE-32GB", m.name);
    if (!p) continue;
    // Least squares y = c0 + c1 b over the measured rows (the reader already
    // dropped rows at or past the OOM batch).
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const ProfilePoint& q : p->peak_allocated_mib) {
      double b = q.batch_size;
      double y = q.value - (12.0 * m.parameters + b * 602112.0) / 1048576.0;
      n += 1;
      sx += b;
      sy += y;
      sxx += b * b;
      sxy += b * y;
    }
    double c1 = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    double c0 = (sy - c1 * sx) / n;
    bool same = std::abs(c0 - m.transient_mib) <= 0.0006 && std::abs(c1 - m.activation_mib_per_sample) <= 0.0006;
    EXPECT_TRUE(same) << "replace the row with: {\"" << m.name << "\", " << m.forward_gmacs << ", " << m.parameters
                      << ", " << std::fixed << std::setprecision(3) << c0 << ", " << c1 << "},";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(builtin_models().size()));
}

}  // namespace
}  // namespace gpemu
