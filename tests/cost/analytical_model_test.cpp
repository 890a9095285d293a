// Tests of the analytical time model (analytical_model.h): roofline terms of
// single ops on known GPUs, the precision rules, the host/GPU pipeline, the
// compiled program of a zoo model, and the layered default cost model.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

using Op = OpProgram::Op;
using Kind = OpProgram::Kind;
using Section = OpProgram::Section;

FamilyFactors round_factors() {
  FamilyFactors f;
  f.conv_efficiency = 0.5;
  f.conv_bytes_efficiency = 0.25;
  f.matmul_efficiency = 0.8;
  f.memory_efficiency = 0.6;
  f.backward_factor = 2.0;
  f.launch_forward_us = 50;
  f.launch_backward_us = 10;
  f.launch_optimizer_us = 20;
  f.launch_view_us = 5;
  return f;
}

TEST(AnalyticalModel, ConvIsComputeTermPlusBytesTermOnV100) {
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  EXPECT_DOUBLE_EQ(p.conv_f32, 14e12);  // no TF32 before Ampere
  EXPECT_DOUBLE_EQ(p.bandwidth, 900e9);
  Op conv{Kind::Conv, Section::Forward, OpProgram::Math::F32, 0, 2e12, 0, 9e9};
  // 2e12 / (14e12 x 0.5) + 9e9 / (900e9 x 0.25) at batch 1; both terms scale with the batch.
  EXPECT_NEAR(op_gpu_seconds(conv, 1, p, round_factors()), 2.0 / 7.0 + 0.04, 1e-12);
  EXPECT_NEAR(op_gpu_seconds(conv, 3, p, round_factors()), 3 * (2.0 / 7.0 + 0.04), 1e-12);
}

TEST(AnalyticalModel, MatmulAndMemoryOpsTakeTheLargerRooflineTerm) {
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  const FamilyFactors f = round_factors();
  Op mm{Kind::Matmul, Section::Forward, OpProgram::Math::F32, 1.12e12, 0, 1e6, 0};
  EXPECT_NEAR(op_gpu_seconds(mm, 1, p, f), 1.12e12 / (14e12 * 0.8), 1e-12);  // compute-bound: 0.1 s
  Op mm_mem{Kind::Matmul, Section::Forward, OpProgram::Math::F32, 1e6, 0, 54e9, 0};
  EXPECT_NEAR(op_gpu_seconds(mm_mem, 1, p, f), 54e9 / (900e9 * 0.6), 1e-12);  // memory-bound: 0.1 s
  Op relu{Kind::Memory, Section::Forward, OpProgram::Math::F32, 0, 1e8, 0, 1.08e9};
  EXPECT_NEAR(op_gpu_seconds(relu, 1, p, f), 1.08e9 / (900e9 * 0.6), 1e-15);  // 2 ms
  Op view{Kind::View, Section::Forward, OpProgram::Math::F32, 0, 0, 0, 0};
  EXPECT_EQ(op_gpu_seconds(view, 1, p, f), 0);
}

TEST(AnalyticalModel, Tf32ForConvolutionsNotForMatmulsByDefault) {
  const GpuSpec& a100 = find_gpu("A100-SXM4-40GB");
  const GpuPeaks d = gpu_peaks(a100);
  EXPECT_DOUBLE_EQ(d.conv_f32, 156e12);     // cudnn.allow_tf32 = True
  EXPECT_DOUBLE_EQ(d.matmul_f32, 19.5e12);  // cuda.matmul.allow_tf32 = False since 1.12
  AnalyticalOptions o;
  o.tf32_matmul = true;
  o.tf32_conv = false;
  const GpuPeaks t = gpu_peaks(a100, o);
  EXPECT_DOUBLE_EQ(t.conv_f32, 19.5e12);
  EXPECT_DOUBLE_EQ(t.matmul_f32, 156e12);
  EXPECT_DOUBLE_EQ(d.f16, 312e12);
  // AMP ops use the tensor-core rate, a half convolution at the GEMM
  // efficiency (no Winograd on tensor cores).
  Op conv16{Kind::Conv, Section::Forward, OpProgram::Math::F16, 0, 312e12, 0, 0};
  FamilyFactors f = round_factors();
  EXPECT_NEAR(op_gpu_seconds(conv16, 1, d, f), 1.0 / 0.8, 1e-12);
}

TEST(AnalyticalModel, HalfConvolutionIsARooflineNotTheFp32Sum) {
  // The FP32 conv form (calibrated FLOP term + bytes term at
  // conv_bytes_efficiency) is fitted on FP32 CUDA-core convolutions; a half
  // convolution on tensor cores takes the larger of its FLOP time at the GEMM
  // efficiency and its bytes at the memory efficiency, like a matmul.
  const GpuPeaks p = gpu_peaks(find_gpu("A100-SXM4-40GB"));
  const FamilyFactors f = round_factors();
  Op compute{Kind::Conv, Section::Forward, OpProgram::Math::F16, 0, 249.6e12, 0, 1e9};
  EXPECT_NEAR(op_gpu_seconds(compute, 1, p, f), 249.6e12 / (312e12 * 0.8), 1e-12);  // 1 s: FLOP-bound
  Op memory{Kind::Conv, Section::Forward, OpProgram::Math::F16, 0, 1e12, 0, 1555e9 * 0.6};
  EXPECT_NEAR(op_gpu_seconds(memory, 2, p, f), 2.0, 1e-12);  // bytes-bound: 1 s per sample
  Op bf16 = compute;
  bf16.math = OpProgram::Math::BF16;
  EXPECT_NEAR(op_gpu_seconds(bf16, 1, p, f), 1.0, 1e-12);  // A100: BF16 peak = FP16 peak
  // The pipelined phase charges the same kernel time.
  const OpProgram prog("half", {compute, memory}, {});
  FamilyFactors quiet = f;
  quiet.launch_forward_us = 0;
  EXPECT_NEAR(predict_phase_seconds(prog, false, 1, p, quiet), 2.0, 1e-9);
}

TEST(AnalyticalModel, ThreeDConvolutionDoesEveryDirectMultiply) {
  // conv_efficiency above 1 is Winograd on 2-D 3x3 convolutions; a 3-D
  // convolution (direct_conv) runs its FLOP term at most at the GEMM
  // efficiency; its bytes term is the FP32 form's.
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  FamilyFactors f = round_factors();
  f.conv_efficiency = 2.5;
  Op conv2d{Kind::Conv, Section::Forward, OpProgram::Math::F32, 0, 14e12, 0, 225e9};
  Op conv3d = conv2d;
  conv3d.direct_conv = true;
  EXPECT_NEAR(op_gpu_seconds(conv2d, 1, p, f), 1 / 2.5 + 1, 1e-12);
  EXPECT_NEAR(op_gpu_seconds(conv3d, 1, p, f), 1 / 0.8 + 1, 1e-12);
  EXPECT_DOUBLE_EQ(conv_flop_efficiency(conv3d, f), 0.8);
  f.conv_efficiency = 0.5;  // below the GEMM's: the cap does not raise it
  EXPECT_DOUBLE_EQ(conv_flop_efficiency(conv3d, f), 0.5);
  // The zoo's 3D U-Net marks its convolutions (class conv3d), ResNet-50's are 2-D.
  int direct = 0, convs = 0;
  const OpProgram unet = OpProgram::compile(zoo::load_model("unet3d"));
  const OpProgram resnet = OpProgram::compile(zoo::load_model("resnet50"));
  for (const Op& op : unet.forward())
    if (op.kind == Kind::Conv) ++convs, direct += op.direct_conv;
  EXPECT_GT(convs, 0);
  EXPECT_EQ(direct, convs);
  for (const Op& op : resnet.forward()) EXPECT_FALSE(op.direct_conv);
}

TEST(AnalyticalModel, Mi300xUsesTheUnpackedVectorRateForNonMatrixWork) {
  const GpuPeaks p = gpu_peaks(find_gpu("MI300X"));
  EXPECT_DOUBLE_EQ(p.vector_f32, 163.4e12 / 2);
  EXPECT_DOUBLE_EQ(p.conv_f32, 163.4e12);  // no TF32 by default on ROCm
  EXPECT_DOUBLE_EQ(gpu_peaks(find_gpu("V100-PCIE-32GB")).vector_f32, 14e12);
}

TEST(AnalyticalModel, LaunchBoundPhaseCostsTheHostsTime) {
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  std::vector<Op> tiny(10, Op{Kind::Memory, Section::Forward, OpProgram::Math::F32, 0, 0, 900, 0});
  const OpProgram prog("tiny", tiny, {});
  FamilyFactors f = round_factors();
  f.memory_efficiency = 1.0;  // 900 B at 900 GB/s: 1 ns per op
  // The host issues an op every 50 us; the GPU finishes each 1 ns later.
  EXPECT_NEAR(predict_phase_seconds(prog, false, 1, p, f), 10 * 50e-6 + 1e-9, 1e-15);
}

TEST(AnalyticalModel, GpuBoundPhaseCostsTheKernelsTimeAfterTheFirstLaunch) {
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  FamilyFactors f = round_factors();
  f.memory_efficiency = 1.0;
  std::vector<Op> big(4, Op{Kind::Memory, Section::Backward, OpProgram::Math::F32, 0, 0, 9e6, 0});  // 10 us each
  big.push_back(Op{Kind::View, Section::Backward});
  const OpProgram prog("big", {}, big);
  // Backward kernels: 10 us x backward_factor 2 = 20 us each; launches 10 us.
  // Op 0 starts at 10 us; the GPU is busy until 10 + 4 x 20 = 90 us; the view
  // is issued at 45 us, before that.
  EXPECT_NEAR(predict_phase_seconds(prog, true, 1, p, f), 90e-6, 1e-15);
  ModelCorrection c;
  c.backward_gpu = 0.5;  // 10 us kernels: 10 + 40 = 50 us, still after the view (45 us)
  EXPECT_NEAR(predict_phase_seconds(prog, true, 1, p, f, c), 50e-6, 1e-15);
  c.backward_host = 2;  // launches every 20 us: the last kernel runs 80-90 us, the view is issued at 90 us
  EXPECT_NEAR(predict_phase_seconds(prog, true, 1, p, f, c), 90e-6, 1e-15);
  // Several batch sizes in one pass agree with one at a time.
  const std::vector<double> b = {1, 7, 64};
  std::vector<double> out(3);
  predict_phase_seconds(prog, true, b, p, f, c, out);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(out[i], predict_phase_seconds(prog, true, b[i], p, f, c));
}

TEST(AnalyticalModel, ResNet50FirstConvolutionOnV100) {
  const OpProgram prog = OpProgram::compile(zoo::load_model("resnet50"));
  // conv1: 64 x 3 x 7 x 7 weights, 112 x 112 outputs per image, no bias:
  // 2 x 112 x 112 x 9408 FLOPs per image.
  const Op& conv1 = prog.forward().front();
  ASSERT_EQ(conv1.kind, Kind::Conv);
  EXPECT_DOUBLE_EQ(conv1.flops1, 2.0 * 112 * 112 * 9408);
  EXPECT_DOUBLE_EQ(conv1.flops0, 0);
  // Bytes: input image, weights, output, per batch: 3x224x224 + 64x112x112 floats.
  EXPECT_DOUBLE_EQ(conv1.bytes1, 4.0 * (3 * 224 * 224 + 64 * 112 * 112));
  EXPECT_DOUBLE_EQ(conv1.bytes0, 4.0 * 9408);
  const GpuPeaks p = gpu_peaks(find_gpu("V100-PCIE-32GB"));
  const double expected = 32 * 2.0 * 112 * 112 * 9408 / (14e12 * 0.5) +
                          (4.0 * 9408 + 32 * 4.0 * (3 * 224 * 224 + 64 * 112 * 112)) / (900e9 * 0.25);
  EXPECT_NEAR(op_gpu_seconds(conv1, 32, p, round_factors()), expected, expected * 1e-12);
}

TEST(AnalyticalModel, ProgramSplitsPhasesAsGPEmuMeasuredThem) {
  const zoo::ModelGraph& g = zoo::load_model("resnet50");
  const OpProgram legacy = OpProgram::compile(g);
  AnalyticalOptions none;
  none.legacy_zero_grad = false;
  const OpProgram modern = OpProgram::compile(g, none);
  // GPEmu's forward ends before the loss; the loss opens backward.
  for (const Op& op : legacy.forward()) EXPECT_EQ(op.section, Section::Forward);
  EXPECT_EQ(legacy.backward().front().section, Section::Loss);
  const auto count = [](const OpProgram& p, Section s) {
    int n = 0;
    for (const Op& op : p.backward()) n += op.section == s;
    return n;
  };
  const int params = static_cast<int>(g.param_grads(zoo::Shape{1}).size());
  EXPECT_EQ(params, 161);
  EXPECT_EQ(count(legacy, Section::ZeroGrad), params);
  EXPECT_EQ(count(modern, Section::ZeroGrad), 0);
  EXPECT_EQ(count(legacy, Section::Backward), count(modern, Section::Backward) + params);
  EXPECT_EQ(count(legacy, Section::Optimizer), 3 * params);  // SGD with momentum: mul_, add_, add_
  EXPECT_EQ(legacy.forward().size() + legacy.backward().size(),
            static_cast<std::size_t>(g.op_count()) + 2 * static_cast<std::size_t>(params));
}

TEST(AnalyticalModel, ModelsWithSequencesCompile) {
  for (const char* m : {"bert_base", "gpt2_small", "dlrm_mlperf", "unet3d"}) {
    const OpProgram p = OpProgram::compile(zoo::load_model(m));
    EXPECT_FALSE(p.forward().empty()) << m;
    EXPECT_FALSE(p.backward().empty()) << m;
  }
}

TEST(AnalyticalModel, CostModelPredictsEveryZooModelOnEveryCatalogGpu) {
  const AnalyticalCostModel model(std::make_shared<const Calibration>(default_calibration()));
  for (const char* m : {"resnet50", "vit_b_16", "bert_base"})
    for (const GpuSpec& gpu : gpu_catalog()) {
      const StepCost c = model.step_cost(gpu, m, 8);
      EXPECT_GT(c.forward, 0) << m << " " << gpu.id;
      EXPECT_GT(c.backward, c.forward / 2) << m << " " << gpu.id;
      EXPECT_EQ(c.forward_provenance, Provenance::Estimated);
      EXPECT_GT(c.peak_bytes, c.persistent_bytes) << m;
      EXPECT_NE(c.note.find("analytical model"), std::string::npos) << c.note;
    }
  // Faster cards are faster at a large batch.
  EXPECT_LT(model.step_cost(find_gpu("H100-SXM5-80GB"), "resnet50", 128).backward,
            model.step_cost(find_gpu("V100-PCIE-32GB"), "resnet50", 128).backward);
  EXPECT_THROW(model.step_cost(find_gpu("v100"), "resnet50", 0), InputError);
  EXPECT_THROW(model.step_cost(find_gpu("v100"), "no_such_net", 8), InputError);
}

TEST(AnalyticalModel, DefaultCostModelUsesTheAnalyticalModelForZooModels) {
  const auto costs = make_cost_model(std::nullopt);
  const StepCost c = costs->step_cost(find_gpu("H100-SXM5-80GB"), "resnet50", 64);
  EXPECT_NE(c.note.find("analytical model"), std::string::npos) << c.note;
  EXPECT_NE(costs->describe().find("analytical"), std::string::npos);
  EXPECT_NE(costs->describe().find("built-in estimates"), std::string::npos);
  const auto names = costs->models();
  EXPECT_NE(std::find(names.begin(), names.end(), "bert_base"), names.end());
  EXPECT_THROW(costs->step_cost(find_gpu("v100"), "no_such_net", 8), InputError);
}

}  // namespace
}  // namespace gpemu
