// The analytical model's op program (cost_model.h's OpProgram): a zoo graph
// compiled into the ops a step issues, with its variant's changes (fused or
// foreach optimizer kernels, micro-steps) and its issue mode.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpemu/calibration.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

bool is_loss_kind(std::string_view k) {
  return k == "_log_softmax" || k.starts_with("nll_loss") || k.starts_with("binary_cross_entropy") || k == "mse_loss" ||
         k == "l1_loss" || k == "smooth_l1_loss" || k == "cross_entropy_loss";
}

OpProgram::Kind kind_of(zoo::OpClass c) {
  switch (c) {
    case zoo::OpClass::Conv:
    case zoo::OpClass::Conv3d: return OpProgram::Kind::Conv;
    case zoo::OpClass::Matmul: return OpProgram::Kind::Matmul;
    case zoo::OpClass::View: return OpProgram::Kind::View;
    default: return OpProgram::Kind::Memory;
  }
}

OpProgram::Math math_of(std::string_view dtype) {
  if (dtype == "f16") return OpProgram::Math::F16;
  if (dtype == "bf16") return OpProgram::Math::BF16;
  return OpProgram::Math::F32;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); }

}  // namespace

OpProgram::OpProgram(std::string model, std::vector<Op> forward, std::vector<Op> backward)
    : model_(std::move(model)), forward_(std::move(forward)), backward_(std::move(backward)) {}

namespace {

// Multi-tensor apply: the per-parameter update kernels become one launch
// reading and writing the same bytes.
void fuse_optimizer(std::vector<OpProgram::Op>& ops) {
  OpProgram::Op fused;
  fused.kind = OpProgram::Kind::Memory;
  fused.section = OpProgram::Section::Optimizer;
  bool any = false;
  std::vector<OpProgram::Op> kept;
  for (const OpProgram::Op& op : ops) {
    if (op.section != OpProgram::Section::Optimizer) {
      kept.push_back(op);
      continue;
    }
    if (op.kind == OpProgram::Kind::View) continue;
    any = true;
    fused.flops0 += op.flops0;
    fused.flops1 += op.flops1;
    fused.bytes0 += op.bytes0;
    fused.bytes1 += op.bytes1;
  }
  if (any) kept.push_back(fused);
  ops = std::move(kept);
}

// Foreach (multi-tensor) optimizer: the update's per-parameter kernels run
// as one _foreach_ call per step of the update (mul_, add_, addcdiv_, ...)
// over every parameter, issued once; each call keeps the summed FLOPs and
// bytes of its kernels. The per-parameter loop of the traced (for-loop)
// optimizer issues the same sequence of kernels for each parameter, so the
// i-th kernel of every parameter's sequence belongs to the i-th call; when
// the op count is not a multiple of the parameter count, kernels of one kind
// are one call. Views (no kernel) and the GradScaler's kernels (one call each
// already) are not per-parameter work.
void foreach_optimizer(std::vector<OpProgram::Op>& ops, const std::vector<std::string>& kinds, std::size_t params) {
  auto per_parameter = [&](const OpProgram::Op& op, const std::string& kind) {
    return op.section == OpProgram::Section::Optimizer && op.kind != OpProgram::Kind::View && !op.sync_after &&
           !kind.starts_with("_amp_");
  };
  std::size_t n = 0, k = 0;
  for (const OpProgram::Op& op : ops)
    if (op.section == OpProgram::Section::Optimizer) n += per_parameter(op, kinds.at(k++));
  const std::size_t sequence = params > 0 && n % params == 0 ? n / params : 0;
  std::vector<OpProgram::Op> kept;
  std::map<std::string, std::size_t> merged;  // call -> index in kept
  std::size_t i = 0;                          // per-parameter kernels seen
  k = 0;
  for (const OpProgram::Op& op : ops) {
    if (op.section != OpProgram::Section::Optimizer) {
      kept.push_back(op);
      continue;
    }
    const std::string& kind = kinds.at(k++);
    if (op.kind == OpProgram::Kind::View) continue;
    if (!per_parameter(op, kind)) {
      kept.push_back(op);
      kept.back().foreach_call = true;
      continue;
    }
    const std::string call = sequence ? std::to_string(i % sequence) : kind;
    ++i;
    auto [it, fresh] = merged.emplace(call, kept.size());
    if (fresh) {
      kept.push_back(op);
      kept.back().foreach_call = true;
      continue;
    }
    OpProgram::Op& m = kept[it->second];
    m.flops0 += op.flops0;
    m.flops1 += op.flops1;
    m.bytes0 += op.bytes0;
    m.bytes1 += op.bytes1;
  }
  ops = std::move(kept);
}

}  // namespace

std::string_view to_string(StepSync s) { return s == StepSync::Pipelined ? "pipelined" : "phases"; }

OpProgram OpProgram::compile(const zoo::ModelGraph& model, const AnalyticalOptions& options) {
  const ProgramVariant& variant = options.variant;
  if (auto missing = unsupported_part(variant))
    throw InputError(fmt::format("{} for {}: {}", describe(variant), model.name(), *missing));
  // A variant whose program is a graph of its own is refused on another graph,
  // not run as that graph (variant_model() picks the right one).
  auto refuse_unless = [&](bool asked, bool graph_is_it, std::string_view what, std::string_view suffix) {
    if (asked && !graph_is_it)
      throw InputError(fmt::format("{} for {}: {} is the zoo's {}{} graph, not {} (variant_model() picks it)",
                                   describe(variant), model.name(), what, model.name(), suffix, model.name()));
  };
  refuse_unless(variant.fused_chains(), is_fused_graph(model.name()), "fused softmax/LayerNorm/GELU chains", "_fused");
  refuse_unless(variant.attention == AttentionKernel::Fused, is_sdpa_graph(model.name()), "fused attention", "_sdpa");
  const std::int64_t seq = options.seq_len;
  const auto at = [&](std::int64_t b) { return model.ops(zoo::Shape{b, seq}, options.precision, options.optimizer); };
  const std::vector<zoo::OpCost> o1 = at(1), o2 = at(2), o4 = at(4);
  if (o1.size() != o2.size() || o1.size() != o4.size())
    throw InputError(fmt::format("{}: the op list depends on the batch size; expected one graph for every batch size",
                                 model.file().string()));
  std::vector<Op> fwd, bwd;
  std::vector<Op> autograd;
  std::vector<std::string> optimizer_kinds;  // zoo kind of each optimizer-section op, in order (foreach rewrite)
  bool in_loss = false;
  for (std::size_t i = 0; i < o1.size(); ++i) {
    const zoo::OpCost &a = o1[i], &b = o2[i], &d = o4[i];
    Op op;
    op.kind = kind_of(a.op_class);
    op.math = math_of(a.dtype);
    op.direct_conv = a.op_class == zoo::OpClass::Conv3d;
    op.attention = a.kind == "scaled_dot_product_attention" || a.kind == "scaled_dot_product_attention_backward";
    // GradScaler.step reads found_inf back (.item()) after unscaling.
    op.sync_after = a.kind == "_amp_foreach_non_finite_check_and_unscale_";
    op.flops1 = b.flops - a.flops;
    op.flops0 = a.flops - op.flops1;
    const double by1 = a.bytes_read + a.bytes_written, by2 = b.bytes_read + b.bytes_written,
                 by4 = d.bytes_read + d.bytes_written;
    op.bytes1 = by2 - by1;
    op.bytes0 = by1 - op.bytes1;
    if (!close(op.flops0 + 4 * op.flops1, d.flops) || !close(op.bytes0 + 4 * op.bytes1, by4))
      throw InputError(
          fmt::format("{}: op {} ({}) is not affine in the batch size; the analytical model expects "
                      "the zoo's polynomials to be of degree <= 1 in B",
                      model.file().string(), i, a.kind));
    op.flops0 = std::max(0.0, op.flops0);
    op.bytes0 = std::max(0.0, op.bytes0);
    // Half-precision convolutions on tensor cores need NHWC: on NCHW
    // activations cuDNN transposes the operands in and the result out
    // (nchwToNhwc / nhwcToNchw kernels), reading and writing them once more
    // each; channels-last activations need no transposes.
    // (TF32 convolutions on NCHW activations need none: adding them made the
    // H200's TF32 rows worse, docs/host.md.)
    std::optional<Op> transpose;
    if (op.kind == Kind::Conv && op.math != Math::F32 && variant.memory_format == MemoryFormat::NCHW) {
      transpose = Op{};
      transpose->kind = Kind::Memory;
      transpose->bytes0 = 2 * op.bytes0;
      transpose->bytes1 = 2 * op.bytes1;
    }
    switch (a.phase) {
      case zoo::Phase::Forward:
        if (!in_loss && is_loss_kind(a.kind)) in_loss = true;
        op.section = in_loss ? Section::Loss : Section::Forward;
        (in_loss ? bwd : fwd).push_back(op);
        if (transpose) {
          transpose->section = op.section;
          (in_loss ? bwd : fwd).push_back(*transpose);
        }
        break;
      case zoo::Phase::Backward:
        op.section = Section::Backward;
        autograd.push_back(op);
        if (transpose) {
          transpose->section = Section::Backward;
          autograd.push_back(*transpose);
        }
        break;
      case zoo::Phase::Optimizer:
        op.section = Section::Optimizer;
        if (options.legacy_zero_grad) {
          // zero_grad and accumulation kernels come before the step.
          if (!autograd.empty()) {
            const auto grads = model.param_grads(zoo::Shape{1, seq}, options.precision);
            for (const zoo::ParamGrad& g : grads) {
              Op z;
              z.kind = Kind::Memory;
              z.section = Section::ZeroGrad;
              z.bytes0 = static_cast<double>(g.grad_bytes);  // fill: write only
              bwd.push_back(z);
            }
            bwd.insert(bwd.end(), autograd.begin(), autograd.end());
            for (const zoo::ParamGrad& g : grads) {
              Op acc;
              acc.kind = Kind::Memory;
              acc.section = Section::Backward;
              acc.flops0 = static_cast<double>(g.grad_bytes) / 4;
              acc.bytes0 = 3.0 * static_cast<double>(g.grad_bytes);  // grad += new: read 2, write 1
              bwd.push_back(acc);
            }
            autograd.clear();
          }
        } else if (!autograd.empty()) {
          bwd.insert(bwd.end(), autograd.begin(), autograd.end());
          autograd.clear();
        }
        bwd.push_back(op);
        optimizer_kinds.emplace_back(a.kind);
        break;
    }
  }
  if (!autograd.empty()) bwd.insert(bwd.end(), autograd.begin(), autograd.end());
  if (variant.fused_optimizer)
    fuse_optimizer(bwd);
  else if (variant.foreach_optimizer)
    foreach_optimizer(bwd, optimizer_kinds, model.param_grads(zoo::Shape{1, seq}, options.precision).size());
  if (variant.micro_steps > 1)
    for (Op& op : bwd)
      if (op.section == Section::Optimizer || op.section == Section::ZeroGrad) op.weight = 1.0 / variant.micro_steps;
  OpProgram program(model.name(), std::move(fwd), std::move(bwd));
  program.set_issue(options.sync, options.host);
  return program;
}

}  // namespace gpemu
