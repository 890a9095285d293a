// `gpemu validate`'s per-op comparison: measured per-op times (Profile::ops)
// summed per phase and kind beside the model's kernels of the same step.
#include <gtest/gtest.h>

#include <sstream>

#include "cost/op_validation.h"
#include "gpemu/calibration.h"
#include "gpemu/cost_model.h"

namespace gpemu {
namespace {

MeasuredOp measured(std::string phase, std::string op, std::string cls, double calls, double seconds, int batch = 4) {
  MeasuredOp m;
  m.batch_size = batch;
  m.phase = std::move(phase);
  m.op = std::move(op);
  m.op_class = std::move(cls);
  m.shapes = "[]";
  m.calls_per_step = calls;
  m.seconds_per_call = seconds;
  return m;
}

OpProgram::Op op(OpProgram::Kind kind, OpProgram::Section section, double flops1, double bytes1) {
  OpProgram::Op o;
  o.kind = kind;
  o.section = section;
  o.flops1 = flops1;
  o.bytes1 = bytes1;
  return o;
}

TEST(OpValidation, SumsMeasuredOpsAndTheModelsKernelsPerPhaseAndKind) {
  using K = OpProgram::Kind;
  using S = OpProgram::Section;
  const OpProgram program("tiny",
                          {op(K::Conv, S::Forward, 1e9, 1e6), op(K::Memory, S::Forward, 0, 4e6),
                           op(K::View, S::Forward, 0, 0), op(K::Conv, S::Forward, 2e9, 1e6)},
                          {op(K::Memory, S::Loss, 0, 1e3), op(K::Conv, S::Backward, 4e9, 2e6),
                           op(K::Memory, S::ZeroGrad, 0, 0), op(K::Memory, S::Optimizer, 0, 8e6)});
  Profile p;
  p.gpu = "H200-SXM-141GB";
  p.model = "tiny";
  p.op_timer = "cuda";
  p.ops = {measured("forward", "aten::conv2d", "conv", 2, 1e-3),
           measured("forward", "aten::relu_", "elementwise", 1, 2e-4),
           measured("forward", "aten::flatten", "view", 1, 1e-6),
           measured("loss", "aten::cross_entropy_loss", "softmax", 1, 5e-5),
           measured("backward", "aten::convolution_backward", "conv", 2, 3e-3),
           measured("optimizer", "aten::add_", "optimizer", 4, 1e-5)};
  GpuPeaks peaks;
  peaks.conv_f32 = peaks.matmul_f32 = 50e12;
  peaks.vector_f32 = 60e12;
  peaks.bandwidth = 4e12;
  const FamilyFactors f;
  ModelCorrection c;
  c.forward_gpu = 1.25;
  const std::vector<OpClassPoint> pts = op_class_points(p, program, peaks, f, c);
  auto find = [&](std::string_view phase, std::string_view kind) -> const OpClassPoint* {
    for (const OpClassPoint& pt : pts)
      if (pt.phase == phase && pt.kind == kind) return &pt;
    return nullptr;
  };
  // Views have no kernel on either side; zero_grad counts with the optimizer.
  for (const OpClassPoint& pt : pts) EXPECT_NE(pt.kind, "") << pt.phase;
  ASSERT_EQ(pts.size(), 5u);
  EXPECT_EQ(pts.front().phase, "forward");
  EXPECT_EQ(pts.back().phase, "optimizer");

  const OpClassPoint* fc = find("forward", "conv");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->batch_size, 4);
  EXPECT_EQ(fc->timer, "cuda");
  EXPECT_DOUBLE_EQ(fc->measured_calls, 2);
  EXPECT_DOUBLE_EQ(fc->measured_s, 2e-3);
  EXPECT_EQ(fc->predicted_ops, 2);
  const double want =
      (op_kernel_seconds(program.forward()[0], 4, peaks, f) + op_kernel_seconds(program.forward()[3], 4, peaks, f)) *
      1.25;
  EXPECT_DOUBLE_EQ(fc->predicted_s, want);
  EXPECT_GT(want, 0);

  const OpClassPoint* fm = find("forward", "memory");
  ASSERT_NE(fm, nullptr);
  EXPECT_DOUBLE_EQ(fm->measured_s, 2e-4);
  EXPECT_EQ(fm->predicted_ops, 1);
  const OpClassPoint* loss = find("loss", "memory");
  ASSERT_NE(loss, nullptr);
  EXPECT_DOUBLE_EQ(loss->measured_s, 5e-5);
  const OpClassPoint* bc = find("backward", "conv");
  ASSERT_NE(bc, nullptr);
  EXPECT_DOUBLE_EQ(bc->measured_s, 6e-3);
  EXPECT_DOUBLE_EQ(bc->predicted_s, op_kernel_seconds(program.backward()[1], 4, peaks, f));
  const OpClassPoint* opt = find("optimizer", "memory");
  ASSERT_NE(opt, nullptr);
  EXPECT_DOUBLE_EQ(opt->measured_calls, 4);
  EXPECT_EQ(opt->predicted_ops, 2);

  std::ostringstream table;
  cost_detail::print_op_classes(pts, table);
  EXPECT_NE(table.str().find("forward   conv"), std::string::npos) << table.str();
  EXPECT_EQ(cost_detail::op_classes_json(pts).size(), 5u);
}

TEST(OpValidation, AProfileWithoutOpsGivesNoPoints) {
  Profile p;
  p.gpu = "H200-SXM-141GB";
  p.model = "tiny";
  const OpProgram program("tiny", {}, {});
  EXPECT_TRUE(op_class_points(p, program, GpuPeaks{}, FamilyFactors{}, ModelCorrection{}).empty());
  std::ostringstream table;
  cost_detail::print_op_classes({}, table);
  EXPECT_EQ(table.str(), "");
}

}  // namespace
}  // namespace gpemu
