// Tests of the host side of a step (host.h) and of the pipelined step
// (cost_model.h: StepSync::Pipelined, predict_step): host profiles as files
// and by name, sync points, the launch queue, foreach optimizers, the
// tensor-core convolution form, the --torch presets, and the fit of a family
// and its host on measured step times (cost/step_times.h).
#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cost/step_times.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/host.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

namespace fs = std::filesystem;
using Op = OpProgram::Op;
using Kind = OpProgram::Kind;
using Section = OpProgram::Section;

// Peaks with round numbers: 1 TFLOP/s everywhere, 1 TB/s.
GpuPeaks round_peaks() {
  GpuPeaks p;
  p.conv_f32 = p.matmul_f32 = p.f16 = p.bf16 = p.vector_f32 = 1e12;
  p.bandwidth = 1e12;
  return p;
}

FamilyFactors unit_factors() {
  FamilyFactors f;
  f.matmul_efficiency = f.memory_efficiency = 1;
  f.backward_factor = 1;
  f.launch_forward_us = f.launch_backward_us = f.launch_optimizer_us = f.launch_view_us = 0;
  return f;
}

Op memory_op(Section s, double bytes) {
  Op op;
  op.kind = Kind::Memory;
  op.section = s;
  op.bytes0 = bytes;
  return op;
}

HostProfile host_of(double forward_us, double backward_us, double sync_us = 0, int depth = 1024) {
  HostProfile h;
  h.name = "test";
  h.forward_us = forward_us;
  h.backward_us = backward_us;
  h.optimizer_us = h.foreach_us = backward_us;
  h.view_us = 0;
  h.sync_us = sync_us;
  h.launch_queue_depth = depth;
  return h;
}

TEST(PipelinedStep, AHostBoundStepCostsTheHostsTimeAndAGpuBoundOneTheKernels) {
  // Two forward kernels of 1 ms each (1 GB at 1 TB/s), one backward kernel of 1 ms.
  OpProgram p("t", {memory_op(Section::Forward, 1e9), memory_op(Section::Forward, 1e9)},
              {memory_op(Section::Backward, 1e9)});
  p.set_issue(StepSync::Pipelined, host_of(5000, 5000));  // 5 ms per launch: host-bound
  EXPECT_NEAR(predict_step(p, 1, round_peaks(), unit_factors()).step, 15e-3, 1e-12);
  p.set_issue(StepSync::Pipelined, host_of(10, 10));  // GPU-bound: 3 ms of kernels back to back
  const StepBreakdown b = predict_step(p, 1, round_peaks(), unit_factors());
  EXPECT_NEAR(b.step, 3e-3, 1e-12);
  EXPECT_NEAR(b.gpu.forward, 2e-3, 1e-12);
  EXPECT_NEAR(b.host.forward, 20e-6, 1e-12);
  EXPECT_EQ(b.syncs, 0);
  // The phases split the step in proportion to what bounds each.
  EXPECT_NEAR(b.phase.forward + b.phase.backward, b.step, 1e-15);
  EXPECT_NEAR(b.phase.forward, 2e-3, 1e-9);
}

TEST(PipelinedStep, ASyncPointMakesTheHostWaitForTheGpuEveryStep) {
  // Forward: one 4 ms kernel; backward: the unscale kernel (a sync point,
  // found_inf.item()), then a 4 ms kernel. The host needs 1 ms per launch.
  Op unscale = memory_op(Section::Optimizer, 0);
  unscale.sync_after = true;
  OpProgram p("t", {memory_op(Section::Forward, 4e9)}, {unscale, memory_op(Section::Optimizer, 4e9)});
  p.set_issue(StepSync::Pipelined, host_of(1000, 1000, /*sync_us=*/500));
  const StepBreakdown b = predict_step(p, 1, round_peaks(), unit_factors());
  // Per step: the host waits for the forward kernel (and the unscale), pays
  // the read-back, then issues the update (1 ms) and the next forward (1 ms)
  // while the GPU runs the update; the GPU idles 0.5 ms + 1 ms after each sync.
  EXPECT_EQ(b.syncs, 1);
  EXPECT_NEAR(b.step, 9.5e-3, 1e-9);
  // Without the sync the host runs ahead and the step is the GPU's 8 ms.
  unscale.sync_after = false;
  OpProgram q("t", {memory_op(Section::Forward, 4e9)}, {unscale, memory_op(Section::Optimizer, 4e9)});
  q.set_issue(StepSync::Pipelined, host_of(1000, 1000, 500));
  EXPECT_NEAR(predict_step(q, 1, round_peaks(), unit_factors()).step, 8e-3, 1e-9);
}

TEST(PipelinedStep, AFullLaunchQueueHoldsTheHostBack) {
  // Forward: ten 1 ms kernels issued in 1 us each; backward: ten empty kernels
  // whose issue takes the host 1 ms each. With CUDA's deep queue the host
  // issues the backward while the GPU runs the forward (10 ms a step); with a
  // queue of one kernel it waits for each forward kernel first (19 ms).
  std::vector<Op> fwd(10, memory_op(Section::Forward, 1e9)), bwd(10, memory_op(Section::Backward, 0));
  OpProgram deep("t", fwd, bwd);
  deep.set_issue(StepSync::Pipelined, host_of(1, 1000, 0, 1024));
  OpProgram shallow("t", fwd, bwd);
  shallow.set_issue(StepSync::Pipelined, host_of(1, 1000, 0, 1));
  EXPECT_NEAR(predict_step(deep, 1, round_peaks(), unit_factors()).step, 10.01e-3, 1e-9);
  EXPECT_NEAR(predict_step(shallow, 1, round_peaks(), unit_factors()).step, 19.001e-3, 1e-9);
}

TEST(PipelinedStep, PhasesAreGPEmusSynchronisedForwardPlusBackward) {
  OpProgram p("t", {memory_op(Section::Forward, 1e9)}, {memory_op(Section::Backward, 1e9)});
  p.set_issue(StepSync::Phases, host_of(2000, 2000));
  const StepBreakdown b = predict_step(p, 1, round_peaks(), unit_factors());
  // Each phase: the launch (2 ms), then its kernel (1 ms).
  EXPECT_NEAR(b.step, 6e-3, 1e-12);
  const PhaseSeconds s = predict_seconds(p, 1, round_peaks(), unit_factors());
  EXPECT_NEAR(s.forward + s.backward, b.step, 1e-12);
}

TEST(HostProfile, AProgramsHostReplacesTheFamilysLaunchTimes) {
  OpProgram p("t", {memory_op(Section::Forward, 0)}, {});
  FamilyFactors f = unit_factors();
  f.launch_forward_us = 100;
  EXPECT_NEAR(predict_phase_seconds(p, false, 1, round_peaks(), f), 100e-6, 1e-12);
  p.set_issue(StepSync::Phases, host_of(7, 7));
  EXPECT_NEAR(predict_phase_seconds(p, false, 1, round_peaks(), f), 7e-6, 1e-12);
  EXPECT_EQ(with_host(f, host_of(7, 3)).launch_backward_us, 3);
}

TEST(HostProfile, FilesRoundTripAndBadOnesAreRefusedByName) {
  const fs::path dir = fs::temp_directory_path() / ("gpemu-host-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  HostProfile h = host_of(12.5, 4.25, 18);
  h.description = "a test host";
  write_host_profile(h, dir / "h.json");
  EXPECT_EQ(read_host_profile(dir / "h.json"), h);
  EXPECT_EQ(find_host((dir / "h.json").string()), h);
  auto refused = [&](const std::string& text, const std::string& says) {
    std::ofstream(dir / "bad.json") << text;
    try {
      read_host_profile(dir / "bad.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  };
  refused("{\"forward_us\": 1}", "'backward_us' is missing");
  refused(R"({"forward_us": -1, "backward_us": 1, "optimizer_us": 1, "view_us": 1, "sync_us": 1})",
          "'forward_us' is -1");
  refused(
      R"({"forward_us": 1, "backward_us": 1, "optimizer_us": 1, "view_us": 1, "sync_us": 1, "launch_queue_depth": 0})",
      "'launch_queue_depth' is 0");
  refused("[1, 2]", "expected a JSON object");
  refused("{", "not valid JSON");
  refused(R"({"format": "other", "forward_us": 1})", "'format' must be");
  try {
    find_host("no-such-host");
    ADD_FAILURE() << "an unknown host name was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--host 'no-such-host'"), std::string::npos) << what;
    EXPECT_NE(what.find("gpemu-2022-volta"), std::string::npos) << what;  // the accepted names are listed
  }
  fs::remove_all(dir);
}

TEST(HostProfile, GPEmusHostsAreTheCalibratedFamiliesLaunchTimes) {
  const auto cal = load_default_calibration();
  const auto v = cal->host("gpemu-2022-volta");
  ASSERT_TRUE(v.has_value());
  const FamilyFactors& volta = cal->families.at("Volta");
  EXPECT_EQ(v->forward_us, volta.launch_forward_us);
  EXPECT_EQ(v->optimizer_us, volta.launch_optimizer_us);
  ASSERT_TRUE(cal->host("default").has_value());
  EXPECT_EQ(cal->host("default")->name, std::string(kDefaultHost));
  EXPECT_FALSE(cal->host("gpemu-2022-hopper").has_value());  // Hopper was never profiled by GPEmu
}

TEST(ForeachOptimizer, EachStepOfTheUpdateIsOneCallOverEveryParameter) {
  const zoo::ModelGraph& g = zoo::load_model("resnet18");
  AnalyticalOptions o;
  o.legacy_zero_grad = false;
  const OpProgram loop = OpProgram::compile(g, o);
  ProgramVariant v;
  v.foreach_optimizer = true;
  const OpProgram foreach = OpProgram::compile(g, to_analytical_options(v, o));
  auto optimizer = [](const OpProgram& p, double& bytes) {
    int n = 0;
    bytes = 0;
    for (const Op& op : p.backward())
      if (op.section == Section::Optimizer && op.kind != Kind::View) {
        ++n;
        bytes += op.bytes0 + op.bytes1;
      }
    return n;
  };
  double loop_bytes = 0, foreach_bytes = 0;
  const int loop_kernels = optimizer(loop, loop_bytes), foreach_calls = optimizer(foreach, foreach_bytes);
  const int params = static_cast<int>(g.param_grads(zoo::Shape{1, 0}, zoo::Precision::FP32).size());
  // SGD with momentum: the same sequence of kernels for each parameter, one
  // call per kernel of the sequence, the same bytes.
  EXPECT_EQ(loop_kernels % params, 0);
  EXPECT_EQ(foreach_calls, loop_kernels / params);
  EXPECT_NEAR(foreach_bytes, loop_bytes, 1e-6 * loop_bytes);
}

TEST(TensorCoreForm, ConvolutionsAreARooflineAndDepthwiseTf32OnesKeepTheFp32Form) {
  const GpuPeaks p = gpu_peaks(find_gpu("H200-SXM-141GB"));  // TF32 on for cuDNN by default
  FamilyFactors f = unit_factors();
  f.memory_efficiency = 0.5;
  f.conv_efficiency = 2;
  f.conv_bytes_efficiency = 0.2;
  f.tensor_core_conv_efficiency = 0.5;
  Op conv{Kind::Conv, Section::Forward, OpProgram::Math::F32, 0, 4.945e12, 0, 1e9};     // 4945 FLOPs per byte
  EXPECT_NEAR(op_gpu_seconds(conv, 1, p, f), 4.945e12 / (494.5e12 * 0.5), 1e-12);       // FLOP-bound: 20 ms
  Op depthwise{Kind::Conv, Section::Forward, OpProgram::Math::F32, 0, 2.25e9, 0, 1e9};  // 2.25 FLOPs per byte
  EXPECT_NEAR(op_gpu_seconds(depthwise, 1, p, f), 2.25e9 / (494.5e12 * 2) + 1e9 / (4800e9 * 0.2), 1e-12);
  f.tensor_core_conv_efficiency = 0;  // the GPEmu-profile families' form: the FP32 sum for TF32
  EXPECT_NEAR(op_gpu_seconds(conv, 1, p, f), 4.945e12 / (494.5e12 * 2) + 1e9 / (4800e9 * 0.2), 1e-12);
  f.kernel_overhead_us = 3;  // every kernel, whatever its form
  EXPECT_NEAR(op_gpu_seconds(conv, 1, p, f), 4.945e12 / (494.5e12 * 2) + 1e9 / (4800e9 * 0.2) + 3e-6, 1e-12);
}

TEST(TensorCoreForm, ALiveOpIsToldDepthwiseByItsOwnFlopsPerByte) {
  // gpemu torch's live ops have their FLOPs and bytes at batch 0 only (no slope).
  const GpuPeaks p = gpu_peaks(find_gpu("H200-SXM-141GB"));
  FamilyFactors f = unit_factors();
  f.memory_efficiency = 0.5;
  f.conv_efficiency = 2;
  f.conv_bytes_efficiency = 0.2;
  f.tensor_core_conv_efficiency = 0.5;
  Op conv{Kind::Conv, Section::Forward, OpProgram::Math::F32, 4.945e12, 0, 1e9, 0};
  EXPECT_NEAR(op_gpu_seconds(conv, 0, p, f), 4.945e12 / (494.5e12 * 0.5), 1e-12);
  Op depthwise{Kind::Conv, Section::Forward, OpProgram::Math::F32, 2.25e9, 0, 1e9, 0};
  EXPECT_NEAR(op_gpu_seconds(depthwise, 0, p, f), 2.25e9 / (494.5e12 * 2) + 1e9 / (4800e9 * 0.2), 1e-12);
}

TEST(TorchPreset, TwoSetsPyTorch2sDefaultsAndEachFlagStillOverrides) {
  const TorchPreset one = torch_preset("1"), two = torch_preset("2.11");
  EXPECT_EQ(one.sync, StepSync::Phases);
  EXPECT_FALSE(one.zero_grad_to_none || one.foreach_optimizer || one.default_host);
  EXPECT_EQ(two.sync, StepSync::Pipelined);
  EXPECT_TRUE(two.zero_grad_to_none && two.foreach_optimizer && two.multihead_sdpa && two.default_host);
  ProgramVariantNames unset;
  unset.attention.clear();
  unset.foreach.clear();
  const ProgramVariantNames vit = with_torch_defaults(unset, two, "vit_b_16");
  EXPECT_EQ(vit.attention, "fused");
  EXPECT_EQ(vit.foreach, "on");
  EXPECT_EQ(with_torch_defaults(unset, two, "resnet50").attention, "eager");
  EXPECT_EQ(with_torch_defaults(unset, one, "vit_b_16").attention, "eager");
  ProgramVariantNames given = unset;
  given.attention = "eager";
  given.foreach = "off";
  EXPECT_EQ(with_torch_defaults(given, two, "vit_b_16").attention, "eager");
  EXPECT_EQ(with_torch_defaults(given, two, "vit_b_16").foreach, "off");
  unset.fused = "optimizer";  // a fused optimizer is not also foreach
  EXPECT_EQ(with_torch_defaults(unset, two, "resnet50").foreach, "off");
  try {
    torch_preset("3");
    ADD_FAILURE() << "--torch 3 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--torch '3'"), std::string::npos) << e.what();
  }
}

TEST(StepTimeFit, TooFewRowsOrNoHostAreRefusedSayingWhy) {
  const auto cal = load_default_calibration();
  try {
    fit_step_times(*cal, {});
    ADD_FAILURE() << "no rows were fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no step-time row can be fitted"), std::string::npos) << e.what();
  }
  StepTimeRow row;
  row.gpu = "H200";
  row.model = "resnet50";
  row.precision = "amp";
  row.batch_size = 64;
  row.task = "classification";
  row.optimizer = "sgd";
  row.matmul_precision = row.conv_precision = "fp16";
  row.amp = "autocast";
  row.memory_format = "channels_last";
  row.attention = row.mlm_positions = "n/a";
  row.fused_ops = "some";
  row.includes_h2d = "no";
  row.includes_loss_and_optimizer = "yes";
  row.published_iteration_ms = 20;
  row.source = "gpemu reference measurement (test)";
  try {
    fit_step_times(*cal, {row, row, row});
    ADD_FAILURE() << "three rows of one model were fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no factor is fitted to one row"), std::string::npos) << e.what();
  }
}

TEST(StepTimeFit, RecoversTheHostAndTheFamilyThatMadeSyntheticRows) {
  // Rows made by the model itself with known Hopper factors and host: the fit
  // finds times within 1 % of them again, each row left out too.
  Calibration truth = *load_default_calibration();
  FamilyFactors& h = truth.families.at("Hopper");
  h.memory_efficiency = 0.5;
  h.tensor_core_conv_efficiency = 0.6;
  h.tf32_conv_efficiency = 0.4;  // TF32 convolutions apart from half precision's
  h.kernel_overhead_us = 2;
  HostProfile host = truth.host("default").value();
  host.forward_us = 30;
  host.backward_us = 8;
  host.foreach_us = 25;
  host.view_us = 5;
  truth.hosts[std::string(kDefaultHost)] = host;
  std::vector<StepTimeRow> rows;
  int line = 2;
  for (const char* model : {"resnet18", "resnet50", "mobilenet_v2", "vgg11"})
    for (int batch : {32, 256, 0}) {
      // batch 0: the model's TF32 row (NCHW, batch 128)
      const bool tf32 = batch == 0;
      if (tf32) batch = 128;
      StepTimeRow r;
      r.line = line++;
      r.gpu = "H200";
      r.model = model;
      r.precision = tf32 ? "tf32" : "amp";
      r.batch_size = batch;
      r.task = "classification";
      r.optimizer = "sgd";
      r.matmul_precision = r.conv_precision = tf32 ? "tf32" : "fp16";
      r.amp = tf32 ? "none" : "autocast";
      r.memory_format = tf32 ? "nchw" : "channels_last";
      r.attention = r.mlm_positions = "n/a";
      r.fused_ops = "some";
      r.includes_h2d = "no";
      r.includes_loss_and_optimizer = "yes";
      r.source = "gpemu reference measurement (synthetic)";
      r.published_iteration_ms = predict_row_ms(row_program(r), batch, truth);
      rows.push_back(r);
    }
  StepTimeFitOptions o;
  o.prior = 1e-4;
  o.robust_scale = 0;
  const StepTimeFit fit = fit_step_times(*load_default_calibration(), rows, o);
  EXPECT_EQ(fit.family, "Hopper");
  EXPECT_EQ(fit.host, std::string(kDefaultHost));
  EXPECT_LT(fit.in_sample_median_pct, 1.0);
  EXPECT_LT(fit.leave_one_out_median_pct, 2.0);
  EXPECT_TRUE(fit.calibration.is_calibrated("Hopper"));
  // The TF32 rows decide TF32's own efficiency; the half-precision rows theirs.
  EXPECT_NEAR(fit.calibration.families.at("Hopper").tf32_conv_efficiency, 0.4, 0.02);
  EXPECT_NEAR(fit.calibration.families.at("Hopper").tensor_core_conv_efficiency, 0.6, 0.03);
  EXPECT_TRUE(fit.calibration.hosts.count(std::string(kDefaultHost)));
  // Not an anchor of the fallback rules: Ada keeps the profiled families' mean.
  EXPECT_EQ(fit.calibration.families.at("Ada"), load_default_calibration()->families.at("Ada"));
}

}  // namespace
}  // namespace gpemu
