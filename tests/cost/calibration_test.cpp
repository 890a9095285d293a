// Tests of the calibration (calibration.h): recovering known factors from
// synthetic measurements, model corrections, fallbacks for families without
// measurements, expected errors and the calibration file.
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "cost/calibration_json.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

FamilyFactors volta_truth() {
  FamilyFactors f;
  f.conv_efficiency = 0.9;
  f.conv_bytes_efficiency = 0.2;
  f.matmul_efficiency = 0.7;
  f.memory_efficiency = 0.75;
  f.backward_factor = 1.3;
  f.launch_forward_us = 42;
  f.launch_backward_us = 6;
  f.launch_optimizer_us = 30;
  f.launch_view_us = 3;
  return f;
}

// Times the analytical model gives with `truth`, as measurements.
std::vector<TimeSample> synthetic(const std::string& gpu_name, const FamilyFactors& truth,
                                  const std::vector<std::string>& models,
                                  const std::map<std::string, ModelCorrection>& corr = {}) {
  const GpuSpec& gpu = find_gpu(gpu_name);
  std::vector<TimeSample> out;
  for (const std::string& m : models) {
    const OpProgram prog = OpProgram::compile(zoo::load_model(m));
    const ModelCorrection c = corr.count(m) ? corr.at(m) : ModelCorrection{};
    for (int b : {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256}) {
      const PhaseSeconds s = predict_seconds(prog, b, gpu_peaks(gpu), truth, c);
      out.push_back({gpu.id, m, false, b, s.forward});
      out.push_back({gpu.id, m, true, b, s.backward});
    }
  }
  return out;
}

TEST(Calibration, RecoversSyntheticFactors) {
  const FamilyFactors truth = volta_truth();
  const std::vector<TimeSample> s =
      synthetic("V100-PCIE-32GB", truth, {"resnet50", "vgg11", "mobilenet_v2", "squeezenet1_1", "alexnet"});
  CalibrationOptions o;
  o.model_corrections = false;
  o.factor_prior = 1e-4;
  o.all_rows = true;
  o.max_iterations = 200;
  o.pinned.clear();  // all nine fitted: the fitter itself is under test
  const Calibration c = calibrate(s, o);
  ASSERT_TRUE(c.is_calibrated("Volta"));
  const FamilyFactors& got = c.families.at("Volta");
  for (int i = 0; i < kFamilyFactorCount; ++i)
    EXPECT_NEAR(factor_at(got, i) / factor_at(truth, i), 1.0, 0.02) << family_factor_names()[i];
  const FitQuality q = fit_quality(c, s);
  EXPECT_EQ(q.n, static_cast<int>(s.size()));
  EXPECT_LT(q.median_ape_pct, 0.1);
}

TEST(Calibration, RobustLossKeepsAFewFarOffRowsFromPullingTheFactors) {
  // One model's backward measured twice as slow at every batch size (a kernel choice no
  // other model shares): the pseudo-Huber fit stays near the truth, least
  // squares is pulled towards the outlier.
  const FamilyFactors truth = volta_truth();
  std::vector<TimeSample> s =
      synthetic("V100-PCIE-32GB", truth, {"resnet50", "vgg11", "mobilenet_v2", "squeezenet1_1", "alexnet"});
  for (TimeSample& t : s)
    if (t.model == "alexnet" && t.backward) t.seconds *= 2;
  CalibrationOptions o;
  o.model_corrections = false;
  o.factor_prior = 1e-4;
  o.all_rows = true;
  o.max_iterations = 200;
  o.pinned.clear();
  auto median_ape_of_the_others = [&](double robust_scale) {
    o.robust_scale = robust_scale;
    const Calibration c = calibrate(s, o);
    std::vector<TimeSample> clean;
    for (const TimeSample& t : s)
      if (t.model != "alexnet") clean.push_back(t);
    return fit_quality(c, clean).median_ape_pct;
  };
  const double robust = median_ape_of_the_others(0.05), squares = median_ape_of_the_others(0.0);
  // (1.6% and 3.3% when written.)
  EXPECT_LT(robust, 2.5);
  EXPECT_LT(robust, squares * 0.7) << "robust " << robust << "%, least squares " << squares << "%";
}

TEST(Calibration, PinnedFactorsKeepTheirValueAndTheOthersAreFitted) {
  const FamilyFactors truth = volta_truth();
  const std::vector<TimeSample> s = synthetic("V100-PCIE-32GB", truth, {"resnet50", "squeezenet1_1", "mobilenet_v2"});
  CalibrationOptions o;
  o.model_corrections = false;
  o.factor_prior = 1e-4;
  o.max_iterations = 100;
  o.pinned = {{"matmul_efficiency", 0.37}};
  const Calibration c = calibrate(s, o);
  EXPECT_DOUBLE_EQ(c.families.at("Volta").matmul_efficiency, 0.37);
  EXPECT_NEAR(c.families.at("Volta").conv_bytes_efficiency / truth.conv_bytes_efficiency, 1.0, 0.1);
  // The default pins matmuls at the documented first-principles fraction.
  EXPECT_DOUBLE_EQ(CalibrationOptions{}.pinned.at("matmul_efficiency"), kMatmulEfficiency);
  o.pinned = {{"matmul_speed", 0.5}};
  EXPECT_THROW(calibrate(s, o), InputError);
}

TEST(Calibration, LearnsAModelCorrectionSharedAcrossGpus) {
  FamilyFactors pascal = volta_truth();
  pascal.conv_bytes_efficiency = 0.13;
  pascal.launch_forward_us = 40;
  const std::map<std::string, ModelCorrection> corr = {{"vgg11", {0.8, 1.0, 1.25, 1.0}}};
  std::vector<TimeSample> s = synthetic("V100-PCIE-32GB", volta_truth(), {"resnet18", "vgg11", "alexnet"}, corr);
  const std::vector<TimeSample> p = synthetic("P100-PCIE-16GB", pascal, {"resnet18", "vgg11", "alexnet"}, corr);
  s.insert(s.end(), p.begin(), p.end());
  CalibrationOptions o;
  o.correction_prior = 0.01;
  o.factor_prior = 1e-3;
  o.rounds = 4;
  o.max_iterations = 100;
  // The factors are known here: only corrections are learnt.
  o.fixed = {{"Volta", volta_truth()}, {"Pascal", pascal}};
  const Calibration c = calibrate(s, o);
  EXPECT_NEAR(c.correction("vgg11").forward_gpu, 0.8, 0.01);
  EXPECT_NEAR(c.correction("vgg11").backward_gpu, 1.25, 0.015);
  EXPECT_NEAR(c.correction("resnet18").forward_gpu, 1.0, 0.01);
  EXPECT_TRUE(c.has_correction("VGG11"));
  EXPECT_FALSE(c.has_correction("resnet50"));
  EXPECT_EQ(c.correction("resnet50"), ModelCorrection{});
}

TEST(Calibration, FamiliesWithoutMeasurementsBorrowFactors) {
  Calibration c;
  FamilyFactors volta = volta_truth(), ampere = volta_truth();
  ampere.conv_efficiency = 0.4;
  c.families = {{"Volta", volta}, {"Ampere", ampere}};
  c.calibrated_families = {"Ampere", "Volta"};
  c.fallback = FallbackRule::Nearest;
  Calibration g = c;
  c.finish();
  EXPECT_EQ(c.families.at("Turing"), volta);
  EXPECT_EQ(c.families.at("Hopper"), ampere);
  EXPECT_EQ(c.families.at("Blackwell"), ampere);
  EXPECT_NE(c.origin_of("Hopper").find("Ampere"), std::string::npos);
  for (const std::string& fam : catalog_families()) EXPECT_TRUE(c.families.count(fam)) << fam;
  g.fallback = FallbackRule::GeometricMean;
  g.finish();
  EXPECT_NEAR(g.families.at("Turing").conv_efficiency, std::sqrt(0.9 * 0.4), 1e-12);
  EXPECT_NEAR(g.families.at("Turing").launch_view_us, 3, 1e-12);
  // An unknown family gets the built-in defaults.
  GpuSpec odd = find_gpu("v100");
  odd.architecture = "Imaginary";
  EXPECT_EQ(g.factors(odd), FamilyFactors{});
}

TEST(Calibration, TrendRuleInterpolatesBetweenTheCalibratedGpusInFp32Peak) {
  // Anchors: P100 (9.3 TFLOP/s, 732 GB/s) and V100-PCIE-32GB (14.0, 900).
  Calibration c;
  FamilyFactors pascal = volta_truth(), volta = volta_truth();
  pascal.conv_bytes_efficiency = 0.1;
  pascal.backward_factor = 1.2;
  pascal.launch_forward_us = 40;
  volta.conv_bytes_efficiency = 0.2;
  volta.launch_forward_us = 50;
  c.families = {{"Pascal", pascal}, {"Volta", volta}};
  c.calibrated_families = {"Pascal", "Volta"};
  c.calibrated_gpus = {{"Pascal", {"P100-PCIE-16GB"}}, {"Volta", {"V100-PCIE-32GB"}}};
  c.fallback = FallbackRule::Trend;
  c.finish();
  // T4 (Turing, 8.1 TFLOP/s) lies below the span: no trend entry, its family's geometric mean.
  EXPECT_FALSE(c.gpu_factors.count("T4"));
  EXPECT_NEAR(c.factors(find_gpu("T4")).launch_forward_us, std::sqrt(40.0 * 50.0), 1e-9);
  // RTX6000 (Turing, 16.3) lies above it: the same.
  EXPECT_FALSE(c.gpu_factors.count("RTX6000"));
  // A calibrated family's GPUs keep their family's factors.
  EXPECT_EQ(c.factors(find_gpu("V100-SXM2-16GB")), volta);
  EXPECT_FALSE(c.gpu_factors.count("V100-SXM2-16GB"));
  // Move the anchors so that T4 lies inside: P100 -> M40 (7.0 TFLOP/s, 288 GB/s).
  c.families = {{"Maxwell", pascal}, {"Volta", volta}};
  c.calibrated_families = {"Maxwell", "Volta"};
  c.calibrated_gpus = {{"Maxwell", {"M40"}}, {"Volta", {"V100-PCIE-32GB"}}};
  c.finish();
  ASSERT_TRUE(c.gpu_factors.count("T4"));
  const double t = (std::log(8.1) - std::log(7.0)) / (std::log(14.0) - std::log(7.0));
  const FamilyFactors t4 = c.factors(find_gpu("T4"));
  // GPU-side factors: geometric interpolation of the factor itself.
  EXPECT_NEAR(t4.backward_factor, std::exp(std::log(1.2) + t * (std::log(volta.backward_factor) - std::log(1.2))),
              1e-9);
  // Host-side factors: the family's fallback, the geometric mean.
  EXPECT_NEAR(t4.launch_forward_us, std::sqrt(40.0 * 50.0), 1e-9);
  // The conv bytes term: interpolate effective GB/s (0.1 x 288 -> 0.2 x 900), then divide by T4's 320 GB/s.
  const double gbs = std::exp(std::log(28.8) + t * (std::log(180.0) - std::log(28.8)));
  EXPECT_NEAR(t4.conv_bytes_efficiency, gbs / 320.0, 1e-9);
  EXPECT_NE(c.origin_of(find_gpu("T4")).find("M40"), std::string::npos);
  // Survives a JSON round trip (the anchors are stored, the per-GPU factors re-derived).
  const Calibration back = calibration_from_json(calibration_json(c));
  EXPECT_EQ(back.fallback, FallbackRule::Trend);
  EXPECT_NEAR(back.factors(find_gpu("T4")).conv_bytes_efficiency, t4.conv_bytes_efficiency, 1e-12);
}

TEST(Calibration, ExpectedErrorSaysWhichValidationItComesFrom) {
  Calibration c;
  c.families = {{"Volta", volta_truth()}};
  c.calibrated_families = {"Volta"};
  c.models["resnet50"] = ModelCorrection{};
  c.in_sample["Volta"] = {4, 5, 3};
  c.models_left_out["cnn"] = {8, 9, 7};
  c.gpu_left_out_overall = PhaseErrors{12, 14, 11};
  c.finish();
  auto in = c.expected_error(find_gpu("V100-PCIE-32GB"), "resnet50");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->pct, (PhaseErrors{4, 5, 3}));
  EXPECT_NE(in->basis.find("in-sample"), std::string::npos);
  auto new_model = c.expected_error(find_gpu("V100-PCIE-32GB"), "vit_b_16", "transformer");
  ASSERT_TRUE(new_model);
  EXPECT_EQ(new_model->pct, (PhaseErrors{8, 9, 7}));
  EXPECT_NE(new_model->basis.find("no transformer model was measured"), std::string::npos) << new_model->basis;
  auto new_gpu = c.expected_error(find_gpu("H100-SXM5-80GB"), "resnet50");
  ASSERT_TRUE(new_gpu);
  EXPECT_EQ(new_gpu->pct, (PhaseErrors{12, 14, 11}));
  auto both = c.expected_error(find_gpu("H100-SXM5-80GB"), "densenet121");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->pct, (PhaseErrors{12, 14, 11}));  // the larger of the two
  EXPECT_FALSE(default_calibration().expected_error(find_gpu("v100"), "resnet50"));
}

TEST(Calibration, PublishedStepTimesWidenTheErrorOfKindsOfProgramsTheProfilesDoNotCover) {
  Calibration c;
  c.families = {{"Volta", volta_truth()}};
  c.calibrated_families = {"Volta"};
  c.models["resnet50"] = ModelCorrection{};
  c.in_sample["Volta"] = {4, 5, 3};
  c.program_errors = {{"cnn x amp", {7, 30, 20}},
                      {"cnn x fp32", {3, 2, 1}},
                      {"transformer x tf32", {7, 15, 6}},
                      {"unet x fp32", {2, 57, 53}}};
  c.finish();
  const GpuSpec& v100 = find_gpu("V100-PCIE-32GB");
  // Without a precision: the profiles' figures alone.
  EXPECT_EQ(c.expected_error(v100, "resnet50")->pct, (PhaseErrors{4, 5, 3}));
  // A kind with its own rows: at least their 80th percentile.
  auto amp = c.expected_error(v100, "resnet50", "cnn", "amp");
  ASSERT_TRUE(amp);
  EXPECT_EQ(amp->pct, (PhaseErrors{30, 30, 30}));
  EXPECT_NE(amp->basis.find("published step times of cnn x amp programs: 30% covers 80% of 7 rows"), std::string::npos)
      << amp->basis;
  EXPECT_NE(amp->basis.find("in-sample"), std::string::npos) << amp->basis;
  // Never below what the profiles say.
  EXPECT_EQ(c.expected_error(v100, "resnet50", "cnn", "fp32")->pct, (PhaseErrors{4, 5, 3}));
  // A kind absent, or with too few rows: the widest kind with enough rows (cnn x amp, not unet x fp32).
  auto bf16 = c.expected_error(v100, "resnet50", "cnn", "bf16");
  ASSERT_TRUE(bf16);
  EXPECT_EQ(bf16->pct, (PhaseErrors{30, 30, 30}));
  EXPECT_NE(bf16->basis.find("cnn x bf16 programs are not in the published step times"), std::string::npos)
      << bf16->basis;
  auto unet = c.expected_error(v100, "unet3d", "unet", "fp32");
  ASSERT_TRUE(unet);
  EXPECT_NE(unet->basis.find("are too few"), std::string::npos) << unet->basis;
  ASSERT_NE(c.widest_program_kind(), nullptr);
  EXPECT_EQ(c.widest_program_kind()->first, "cnn x amp");
  // Program evidence alone (no profile validation) still states an error.
  Calibration only;
  only.program_errors = c.program_errors;
  EXPECT_EQ(only.expected_error(find_gpu("H100-SXM5-80GB"), "bert_base", "transformer", "tf32")->pct,
            (PhaseErrors{15, 15, 15}));
}

// Issue 9: a card whose die was never measured is never in-sample, even when
// its architecture family was calibrated on another die (A10 is GA102, the
// profiles' A100 is GA100); V100-SXM2 shares V100-PCIE's GV100.
TEST(Calibration, ACardOfAnUnmeasuredDieIsNotInSample) {
  const auto c = load_default_calibration();
  if (c->calibrated_gpus.empty()) GTEST_SKIP() << "the calibration in use lists no calibrated GPUs";
  EXPECT_EQ(find_gpu("A10").chip, "GA102");
  EXPECT_EQ(find_gpu("A100-SXM4-80GB").chip, "GA100");
  EXPECT_FALSE(c->measured_die(find_gpu("A10")));
  EXPECT_TRUE(c->measured_die(find_gpu("A100-SXM4-80GB")));
  EXPECT_TRUE(c->measured_die(find_gpu("V100-SXM2-16GB")));
  const auto a10 = c->expected_error(find_gpu("A10"), "resnet50", "cnn");
  const auto a100 = c->expected_error(find_gpu("A100-SXM4-80GB"), "resnet50", "cnn");
  ASSERT_TRUE(a10 && a100);
  EXPECT_EQ(a10->basis.find("in-sample"), std::string::npos) << a10->basis;
  EXPECT_NE(a10->basis.find("GA102"), std::string::npos) << a10->basis;
  EXPECT_NE(a100->basis.find("in-sample"), std::string::npos) << a100->basis;
  EXPECT_GE(a10->pct.iteration, a100->pct.iteration);
  for (const GpuSpec& g : gpu_catalog()) EXPECT_FALSE(g.chip.empty()) << g.id;
}

TEST(Calibration, EvidencePrecisionIsWhatTheCardRuns) {
  AnalyticalOptions o;  // FP32, cuDNN TF32 convolutions on, TF32 matmuls off (PyTorch's defaults)
  const GpuSpec& a100 = find_gpu("A100-SXM4-80GB");
  const GpuSpec& v100 = find_gpu("V100-PCIE-32GB");
  EXPECT_EQ(evidence_precision(o, a100, "cnn"), "tf32");  // its convolutions
  EXPECT_EQ(evidence_precision(o, a100, "transformer"), "fp32");
  EXPECT_EQ(evidence_precision(o, v100, "cnn"), "fp32");  // no TF32 on Volta
  o.tf32_matmul = true;
  EXPECT_EQ(evidence_precision(o, a100, "transformer"), "tf32");
  o.precision = zoo::Precision::AMP_FP16;
  EXPECT_EQ(evidence_precision(o, a100, "transformer"), "amp");
  o.precision = zoo::Precision::AMP_BF16;
  EXPECT_EQ(evidence_precision(o, a100, "cnn"), "bf16");
  EXPECT_EQ(evidence_kind("cnn", "bf16"), "cnn x bf16");
}

TEST(Calibration, CoveringQuantileCoversAtLeastItsShare) {
  EXPECT_EQ(covering_quantile({}, 0.8), 0);
  EXPECT_EQ(covering_quantile({5}, 0.8), 5);
  EXPECT_EQ(covering_quantile({1, 2, 3, 4, 5}, 0.8), 4);        // 4 of 5 at or below
  EXPECT_EQ(covering_quantile({9, 1, 2, 3, 4, 5, 6}, 0.8), 6);  // ceil(5.6) = 6 of 7
  EXPECT_EQ(covering_quantile({3, 1, 2}, 0.8), 3);
}

TEST(Calibration, FileRoundTripsAndRejectsMalformedInput) {
  Calibration c;
  c.families = {{"Volta", volta_truth()}};
  c.calibrated_families = {"Volta"};
  c.origin["Volta"] = "calibrated on V100-PCIE-32GB";
  c.models["resnet50"] = {0.9, 1.1, 1.2, 0.8};
  c.in_sample["Volta"] = {4, 5, 3};
  c.gpu_left_out_overall = PhaseErrors{12, 14, 11};
  c.program_errors = {{"transformer x amp", {9, 21.5, 12.25}}};
  c.program_errors_source = "test step times";
  c.source = "test";
  c.rows = 7;
  c.finish();
  TempDir dir;
  c.save(dir.path() / "cal.json");
  const Calibration r = Calibration::load(dir.path() / "cal.json");
  EXPECT_EQ(r.families, c.families);
  EXPECT_EQ(r.models.at("resnet50"), c.models.at("resnet50"));
  EXPECT_EQ(r.in_sample, c.in_sample);
  EXPECT_EQ(r.gpu_left_out_overall, c.gpu_left_out_overall);
  EXPECT_EQ(r.calibrated_families, c.calibrated_families);
  EXPECT_EQ(r.source, "test");
  EXPECT_EQ(r.rows, 7);
  EXPECT_EQ(r.program_errors, c.program_errors);
  EXPECT_EQ(r.program_errors_source, "test step times");
  dir.write(
      "rows.json",
      R"({"format": "gpemu-calibration/1", "expected_error_pct": {"programs": {"cnn x amp": {"rows": 2.5, "p80": 1, "median": 1}}}})");
  EXPECT_THROW(Calibration::load(dir.path() / "rows.json"), InputError);
  dir.write(
      "neg.json",
      R"({"format": "gpemu-calibration/1", "expected_error_pct": {"programs": {"cnn x amp": {"rows": 3, "p80": -1, "median": 1}}}})");
  EXPECT_THROW(Calibration::load(dir.path() / "neg.json"), InputError);

  dir.write("bad.json", R"({"format": "gpemu-calibration/1", "families": {"Volta": {"conv_efficiency": -1}}})");
  EXPECT_THROW(Calibration::load(dir.path() / "bad.json"), InputError);
  dir.write("wrong.json", R"({"format": "something-else"})");
  EXPECT_THROW(Calibration::load(dir.path() / "wrong.json"), InputError);
  dir.write("broken.json", "{");
  EXPECT_THROW(Calibration::load(dir.path() / "broken.json"), InputError);
  dir.write("huge.json", R"({"format": "gpemu-calibration/1", "families": {"Volta": {"conv_efficiency": 1e770}}})");
  EXPECT_THROW(Calibration::load(dir.path() / "huge.json"), InputError);  // a number past a double's range
  EXPECT_THROW(Calibration::load(dir.path() / "absent.json"), InputError);
}

TEST(Calibration, TheCommittedCalibrationLoadsAndCoversEveryFamily) {
  const std::filesystem::path p = std::filesystem::path(GPEMU_SOURCE_DIR) / "data" / "calibration.json";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " absent: the defaults apply";
  const Calibration c = Calibration::load(p);
  for (const std::string& fam : catalog_families()) EXPECT_TRUE(c.families.count(fam)) << fam;
  EXPECT_FALSE(c.calibrated_families.empty());
  EXPECT_TRUE(c.gpu_left_out_overall.has_value());
  auto e = c.expected_error(find_gpu("H100-SXM5-80GB"), "resnet50");
  ASSERT_TRUE(e);
  EXPECT_GT(e->pct.iteration, 0);
}

}  // namespace
}  // namespace gpemu
