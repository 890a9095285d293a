#include "workload/backward_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

constexpr Duration kMinKernel = 2 * kMicrosecond;

// Roofline time of one op on this GPU, in seconds (views cost nothing).
double op_seconds(const zoo::OpCost& op, const GpuSpec& gpu) {
  if (op.op_class == zoo::OpClass::View) return 0;
  const double flops = gpu.fp32_tflops > 0 ? op.flops / (gpu.fp32_tflops * 1e12) : 0;
  const double bytes =
      gpu.memory_bandwidth_gbs > 0 ? (op.bytes_read + op.bytes_written) / (gpu.memory_bandwidth_gbs * 1e9) : 0;
  return std::max({flops, bytes, to_seconds(kMinKernel)});
}

std::uint64_t parameter_count(std::string_view model, const StepCost& cost) {
  if (const ModelFacts* f = find_builtin_model(model)) return f->parameters;
  return cost.persistent_bytes / 12;  // weights, gradients, momentum: 4 bytes each
}

BackwardPlan even_plan(const GpuSpec& gpu, std::string_view model, const StepCost& cost, int chunks) {
  BackwardPlan p;
  const std::uint64_t params = parameter_count(model, cost);
  const double opt_s =
      gpu.memory_bandwidth_gbs > 0 ? 20.0 * static_cast<double>(params) / (gpu.memory_bandwidth_gbs * 1e9) : 0.0;
  const double backward_s = to_seconds(cost.backward);
  p.optimizer_share = backward_s > 0 ? std::min(0.25, (opt_s + 1e-3) / backward_s) : 0.25;
  const std::uint64_t grad_bytes = 4 * params;
  for (int k = 0; k < chunks; ++k) {
    BackwardChunk c;
    c.share = (1.0 - p.optimizer_share) / chunks;
    c.gradients.push_back(k);
    p.chunks.push_back(std::move(c));
    // Even bytes; the remainder goes to the last gradient.
    p.gradient_bytes.push_back(grad_bytes / chunks + (k == chunks - 1 ? grad_bytes % chunks : 0));
  }
  p.source = fmt::format("{} even chunks (no zoo graph for {}): {} parameters, optimizer step {:.1f}% of backward",
                         chunks, model, params, 100 * p.optimizer_share);
  return p;
}

}  // namespace

BackwardPlan plan_backward(const GpuSpec& gpu, std::string_view model, const StepCost& cost, int batch_size,
                           int even_chunks, int max_chunks) {
  if (even_chunks < 1 || max_chunks < 1)
    throw InputError(fmt::format("backward chunks {} / {}: both must be at least 1", even_chunks, max_chunks));
  const zoo::ModelGraph* graph = nullptr;
  try {
    graph = zoo::find_model(model);
  } catch (const std::exception&) {
    graph = nullptr;  // a malformed zoo file: fall back to even chunks
  }
  if (!graph) return even_plan(gpu, model, cost, even_chunks);

  const zoo::Shape shape{batch_size, 0};
  const std::vector<zoo::OpCost> ops = graph->ops(shape);
  const auto ranges = graph->phase_ranges();
  const auto [b0, b1] = ranges[static_cast<int>(zoo::Phase::Backward)];
  const auto [o0, o1] = ranges[static_cast<int>(zoo::Phase::Optimizer)];
  std::vector<zoo::ParamGrad> grads = graph->param_grads(shape);
  std::erase_if(grads, [](const zoo::ParamGrad& g) { return g.grad_tensor < 0 || g.grad_bytes == 0; });
  if (grads.empty() || b1 <= b0) return even_plan(gpu, model, cost, even_chunks);
  std::stable_sort(grads.begin(), grads.end(),
                   [](const zoo::ParamGrad& a, const zoo::ParamGrad& b) { return a.grad_ready_op < b.grad_ready_op; });

  // Work of the backward ops up to each ready point.
  double opt_work = 0;
  for (int i = o0; i < o1; ++i) opt_work += op_seconds(ops[i], gpu);
  struct Point {
    int op;  // last backward op of the chunk
    std::vector<int> gradients;
  };
  std::vector<Point> points;
  for (std::size_t g = 0; g < grads.size(); ++g) {
    const int op = std::clamp(grads[g].grad_ready_op, b0, b1 - 1);
    if (points.empty() || points.back().op != op) points.push_back({op, {}});
    points.back().gradients.push_back(static_cast<int>(g));
  }
  points.back().op = b1 - 1;  // what follows the last gradient belongs to the last chunk
  std::vector<double> work(points.size(), 0.0);
  {
    std::size_t k = 0;
    for (int i = b0; i < b1; ++i) {
      while (k + 1 < points.size() && i > points[k].op) ++k;
      work[k] += op_seconds(ops[i], gpu);
    }
  }
  // Merge down to max_chunks chunks of about equal work.
  const double bwd_work = std::accumulate(work.begin(), work.end(), 0.0);
  const double total = bwd_work + opt_work;
  BackwardPlan p;
  if (total <= 0) return even_plan(gpu, model, cost, even_chunks);
  const std::size_t target = std::min<std::size_t>(points.size(), static_cast<std::size_t>(max_chunks));
  double done = 0;
  BackwardChunk open;
  double open_work = 0;
  for (std::size_t k = 0; k < points.size(); ++k) {
    open_work += work[k];
    done += work[k];
    open.gradients.insert(open.gradients.end(), points[k].gradients.begin(), points[k].gradients.end());
    const std::size_t left_points = points.size() - k - 1;
    const std::size_t left_chunks = target - p.chunks.size() - 1;
    const bool boundary = points.size() <= target || left_points <= left_chunks ||
                          done >= bwd_work * static_cast<double>(p.chunks.size() + 1) / static_cast<double>(target);
    if (k + 1 == points.size() || (boundary && left_chunks > 0)) {
      open.share = open_work / total;
      p.chunks.push_back(std::move(open));
      open = BackwardChunk{};
      open_work = 0;
    }
  }
  p.optimizer_share = opt_work / total;
  for (const auto& g : grads) p.gradient_bytes.push_back(g.grad_bytes);
  const std::uint64_t bytes = std::accumulate(p.gradient_bytes.begin(), p.gradient_bytes.end(), std::uint64_t{0});
  p.source = fmt::format(
      "zoo graph of {}: {} parameter gradients ({:.1f} MiB) in {} backward chunks by roofline work of the ops, "
      "optimizer step {:.1f}% of backward",
      graph->name(), grads.size(), static_cast<double>(bytes) / (1 << 20), p.chunks.size(), 100 * p.optimizer_share);
  return p;
}

std::vector<Duration> split_backward(const BackwardPlan& plan, Duration backward) {
  std::vector<Duration> out;
  out.reserve(plan.chunks.size() + 1);
  Duration used = 0;
  double cum = 0;
  for (const BackwardChunk& c : plan.chunks) {
    // Cumulative rounding: the pieces add up exactly.
    cum += c.share;
    const Duration upto = std::clamp<Duration>(std::llround(cum * static_cast<double>(backward)), used, backward);
    out.push_back(upto - used);
    used = upto;
  }
  out.push_back(backward - used);
  return out;
}

std::vector<std::size_t> bucket_chunk_ends(const BackwardPlan& plan, std::span<const GradientBucket> buckets) {
  std::vector<bool> closes(plan.gradient_bytes.size(), false);  // the last gradient of a bucket
  for (const GradientBucket& b : buckets)
    if (!b.gradients.empty()) {
      const int last = *std::max_element(b.gradients.begin(), b.gradients.end());
      if (last >= 0 && static_cast<std::size_t>(last) < closes.size()) closes[static_cast<std::size_t>(last)] = true;
    }
  std::vector<std::size_t> ends;
  for (std::size_t k = 0; k < plan.chunks.size(); ++k) {
    const auto& g = plan.chunks[k].gradients;
    const bool completes = std::any_of(g.begin(), g.end(), [&](int id) {
      return id >= 0 && static_cast<std::size_t>(id) < closes.size() && closes[static_cast<std::size_t>(id)];
    });
    if (completes || k + 1 == plan.chunks.size()) ends.push_back(k + 1);
  }
  return ends;
}

}  // namespace gpemu
