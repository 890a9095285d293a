// Per-op times measured by `gpemu profile` (torch.profiler) beside the
// analytical model's per-op predictions of the same step, per phase and kind
// (docs/profiles.md, "Per-op GPU times").
#include "cost/op_validation.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpemu/zoo.h"

namespace gpemu {

namespace {

std::string_view phase_of(OpProgram::Section s) {
  switch (s) {
    case OpProgram::Section::Forward: return "forward";
    case OpProgram::Section::Loss: return "loss";
    case OpProgram::Section::Backward: return "backward";
    case OpProgram::Section::ZeroGrad:
    case OpProgram::Section::Optimizer: return "optimizer";
  }
  return "forward";
}

// The model's kind of a measured op's class: "" for a view (no kernel).
std::string_view kind_of(const MeasuredOp& m) {
  const std::optional<zoo::OpClass> c = zoo::parse_op_class(m.op_class);
  if (!c || *c == zoo::OpClass::View) return "";
  if (m.phase == "optimizer") return "memory";
  if (*c == zoo::OpClass::Conv || *c == zoo::OpClass::Conv3d) return "conv";
  if (*c == zoo::OpClass::Matmul) return "matmul";
  return "memory";
}

std::string_view kind_of(OpProgram::Kind k) {
  switch (k) {
    case OpProgram::Kind::Conv: return "conv";
    case OpProgram::Kind::Matmul: return "matmul";
    case OpProgram::Kind::Memory: return "memory";
    case OpProgram::Kind::View: return "";
  }
  return "";
}

int phase_rank(std::string_view p) { return p == "forward" ? 0 : p == "loss" ? 1 : p == "backward" ? 2 : 3; }

}  // namespace

std::vector<OpClassPoint> op_class_points(const Profile& profile, const OpProgram& program, const GpuPeaks& peaks,
                                          const FamilyFactors& f, const ModelCorrection& correction) {
  // (batch, phase rank, kind) -> point, so the points come out in step order.
  std::map<std::tuple<int, int, std::string>, OpClassPoint> at;
  auto point = [&](int batch, std::string_view phase, std::string_view kind) -> OpClassPoint& {
    OpClassPoint& pt = at[{batch, phase_rank(phase), std::string(kind)}];
    if (pt.model.empty()) {
      pt.gpu = profile.gpu;
      pt.model = profile.model;
      pt.batch_size = batch;
      pt.phase = phase;
      pt.kind = kind;
      pt.timer = profile.op_timer;
    }
    return pt;
  };
  std::map<int, bool> batches;
  for (const MeasuredOp& m : profile.ops) {
    batches[m.batch_size] = true;
    const std::string_view kind = kind_of(m);
    if (kind.empty()) continue;
    OpClassPoint& pt = point(m.batch_size, m.phase, kind);
    pt.measured_calls += m.calls_per_step;
    pt.measured_s += m.calls_per_step * m.seconds_per_call;
  }
  for (const auto& [batch, unused] : batches) {
    for (const bool backward : {false, true}) {
      const double scale = backward ? correction.backward_gpu : correction.forward_gpu;
      for (const OpProgram::Op& op : backward ? program.backward() : program.forward()) {
        const std::string_view kind = kind_of(op.kind);
        if (kind.empty()) continue;
        OpClassPoint& pt = point(batch, phase_of(op.section), kind);
        ++pt.predicted_ops;
        pt.predicted_s += op_kernel_seconds(op, batch, peaks, f) * scale;
      }
    }
  }
  std::vector<OpClassPoint> out;
  for (auto& [key, pt] : at) out.push_back(std::move(pt));
  return out;
}

namespace cost_detail {

void print_op_classes(const std::vector<OpClassPoint>& points, std::ostream& out) {
  if (points.empty()) return;
  out << "\nper-op times by phase and kind (measured: torch.profiler in gpemu profile, calls x time per call per "
         "step; predicted: the model's kernels, op_kernel_seconds)\n";
  out << fmt::format("  {:<16} {:<14} {:>5}  {:<9} {:<6}  {:>12} {:>7}  {:>12} {:>5}  {:>7}\n", "gpu", "model", "batch",
                     "phase", "kind", "measured ms", "calls", "predicted ms", "ops", "ratio");
  bool cpu = false;
  for (const OpClassPoint& p : points) {
    cpu = cpu || p.timer == "cpu";
    out << fmt::format("  {:<16} {:<14} {:>5}  {:<9} {:<6}  {:>12.4f} {:>7g}  {:>12.4f} {:>5}  {:>7}{}\n", p.gpu,
                       p.model, p.batch_size, p.phase, p.kind, p.measured_s * 1e3, p.measured_calls,
                       p.predicted_s * 1e3, p.predicted_ops,
                       p.measured_s > 0 && p.predicted_s > 0 ? fmt::format("{:.2f}", p.predicted_s / p.measured_s)
                                                             : std::string("-"),
                       p.timer == "cpu" ? "  (CPU time)" : "");
  }
  if (cpu) out << "  (CPU time: the profile was measured on the CPU, a test of the profiler; no GPU's kernel times)\n";
}

nlohmann::json op_classes_json(const std::vector<OpClassPoint>& points) {
  nlohmann::json a = nlohmann::json::array();
  for (const OpClassPoint& p : points)
    a.push_back({{"gpu", p.gpu},
                 {"model", p.model},
                 {"batch_size", p.batch_size},
                 {"phase", p.phase},
                 {"kind", p.kind},
                 {"timer", p.timer},
                 {"measured_calls", p.measured_calls},
                 {"measured_s", p.measured_s},
                 {"predicted_ops", p.predicted_ops},
                 {"predicted_s", p.predicted_s}});
  return a;
}

}  // namespace cost_detail
}  // namespace gpemu
