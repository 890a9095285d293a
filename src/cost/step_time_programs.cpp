// The step-time CSV's rows as programs gpemu can run (cost/step_times.h):
// each row's stated program mapped onto a zoo graph and a program variant,
// with what is approximated and what cannot be expressed.
#include <algorithm>

#include <fmt/format.h>

#include "cost/step_times.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

std::string_view to_string(RowFit f) {
  switch (f) {
    case RowFit::Exact: return "exact";
    case RowFit::Approximated: return "approximated";
    case RowFit::Unsupported: return "unsupported";
  }
  return "unsupported";
}

RowProgram row_program(const StepTimeRow& row) {
  RowProgram p;
  std::vector<std::string>& approx = p.approximations;
  std::vector<std::string>& unsup = p.unsupported;
  bool model_known = false;
  try {
    p.gpu_id = find_gpu(row.gpu).id;
  } catch (const InputError&) {
    unsup.push_back(fmt::format("GPU '{}' is not in the catalog", row.gpu));
  }

  // The model and its task.
  const std::string base = zoo::canonical_name(row.model);
  std::string nearest = base;
  const bool dle_dlrm = base == "dlrm_mlperf" && row.source_repo() == "NVIDIA/DeepLearningExamples";
  if (dle_dlrm) {
    // The CSV's DLRM rows are DeepLearningExamples' Criteo 1TB "small" model
    // (gpu_training_step_times.md: ~15 GB of tables, sparse embedding
    // gradients and updates): the zoo's dlrm_dle.
    p.zoo_model = "dlrm_dle";
    approx.push_back("DeepLearningExamples' DLRM as the zoo's dlrm_dle (FL=15 tables, sparse gradients)");
  } else if (row.task == "pretraining") {
    if (row.mlm_positions == "masked") {
      p.zoo_model = base + "_pretraining";
    } else if (row.mlm_positions == "all") {
      p.zoo_model = base;
      approx.push_back("no next-sentence head (zoo MLM at every position)");
    } else {
      unsup.push_back(fmt::format("mlm_positions '{}': the MLM head's positions are not stated", row.mlm_positions));
    }
  } else if (row.task == "squad") {
    p.zoo_model = base + "_squad";
  } else if (row.task == "unknown") {
    unsup.push_back("the task is unknown");
  } else {
    p.zoo_model = base;
  }
  if (!p.zoo_model.empty() && !zoo::has_model(p.zoo_model)) {
    unsup.push_back(fmt::format("the zoo has no {} (task {})", p.zoo_model, row.task));
    p.zoo_model.clear();
  }
  model_known = zoo::has_model(nearest);

  // Optimizer and what the step contains.
  AnalyticalOptions o;
  o.legacy_zero_grad = false;  // set_to_none or apex: no fill kernels (PyTorch >= 2.0 default)
  if (row.optimizer == "sgd") {
    o.optimizer = zoo::Optimizer::SGD;
  } else if (row.optimizer == "adam" || row.optimizer == "adamw") {
    o.optimizer = zoo::Optimizer::Adam;
    if (row.optimizer == "adamw") approx.push_back("AdamW as Adam's update kernels");
  } else if (row.optimizer == "lamb") {
    o.optimizer = zoo::Optimizer::Adam;
    approx.push_back("LAMB as Adam's update kernels (without LAMB's per-tensor norms)");
  } else {
    unsup.push_back(fmt::format("optimizer '{}'", row.optimizer));
  }
  if (row.includes_loss_and_optimizer != "yes")
    unsup.push_back(
        fmt::format("includes_loss_and_optimizer '{}': gpemu's step has both", row.includes_loss_and_optimizer));
  if (row.micro_steps == 0) unsup.push_back("micro_steps unknown");

  // The program variant.
  ProgramVariant v;
  v.micro_steps = std::max(row.micro_steps, 1);
  const bool half_mm = row.matmul_precision == "fp16" || row.matmul_precision == "bf16";
  if (row.amp == "none") {
    if (half_mm) unsup.push_back(fmt::format("matmul_precision {} without AMP", row.matmul_precision));
    if (row.matmul_precision == "tf32")
      v.matmul_precision = MatmulPrecision::High;
    else if (row.matmul_precision != "fp32")
      unsup.push_back(fmt::format("matmul_precision '{}'", row.matmul_precision));
  } else if (row.amp == "autocast" || row.amp == "pure_half") {
    v.amp = row.amp == "autocast" ? AmpFlavour::Autocast : AmpFlavour::PureHalf;
    if (row.matmul_precision == "bf16")
      v.half = HalfType::BF16;
    else if (row.matmul_precision != "fp16")
      unsup.push_back(fmt::format("AMP with matmul_precision '{}'", row.matmul_precision));
  } else {
    unsup.push_back("the AMP flavour is unknown");
  }
  if (row.conv_precision == "fp32")
    v.tf32_conv = false;
  else if (row.conv_precision == "unknown")
    unsup.push_back("conv_precision unknown");
  if (row.memory_format == "channels_last")
    v.memory_format = MemoryFormat::ChannelsLast;
  else if (row.memory_format == "unknown")
    unsup.push_back("memory_format unknown");
  if (row.attention == "fused")
    v.attention = AttentionKernel::Fused;
  else if (row.attention == "unknown")
    unsup.push_back("attention kernel unknown");
  // gpemu's own measurements (shared/tools/real-gpu/measure.py) state their
  // program exactly: PyTorch 2's defaults, a foreach optimizer ('some'),
  // steps issued back to back, on the host that measured them.
  const bool measured_here = row.source.starts_with("gpemu reference measurement");
  if (measured_here) {
    p.host = std::string(kDefaultHost);
    o.sync = StepSync::Pipelined;
  }
  // PyTorch 2's nn.MultiheadAttention calls F.scaled_dot_product_attention
  // in training too (torchvision's ViT): the model's fused-attention graph.
  if (measured_here && row.attention == "n/a" && !p.zoo_model.empty() && runs_multihead_attention(p.zoo_model))
    v.attention = AttentionKernel::Fused;
  if (row.fused_ops == "some" && measured_here) {
    v.foreach_optimizer = true;
  } else if (row.fused_ops == "some") {
    approx.push_back("fused_ops 'some' (which kernels is not stated) as unfused kernels");
  } else if (row.fused_ops == "most") {
    // The zoo's fused graphs: scale-softmax-dropout, bias-GELU and
    // bias-dropout-residual-LayerNorm chains as one kernel each (what NVFuser
    // makes of the scripted layers), and a multi-tensor optimizer; dlrm_dle has
    // DeepLearningExamples' fused kernels in its one graph.
    if (dle_dlrm) {
      approx.push_back(
          "fused_ops 'most' as dlrm_dle's fused gather, dot-interaction and sparse-update kernels; CUDA graphs "
          "and apex's fused MLP not modelled");
    } else if (!p.zoo_model.empty() && zoo::has_model(p.zoo_model + "_fused")) {
      v.fused_softmax = v.fused_layer_norm = v.fused_gelu = v.fused_optimizer = true;
      p.zoo_model += "_fused";
      approx.push_back(
          "fused_ops 'most' as the zoo's fused graph (scale-softmax-dropout, bias-GELU and "
          "bias-dropout-residual-LayerNorm chains, multi-tensor optimizer); other elementwise work eager");
    } else {
      unsup.push_back(fmt::format(
          "fused_ops 'most': most elementwise and normalisation work fused (the zoo has no fused graph of {})",
          p.zoo_model.empty() ? base : p.zoo_model));
    }
  } else if (row.fused_ops == "unknown") {
    unsup.push_back("fused_ops unknown");
  }
  if (v.attention == AttentionKernel::Fused && !p.zoo_model.empty()) {
    try {
      p.zoo_model = variant_model(p.zoo_model, v, "fused_ops");
    } catch (const InputError& e) {
      unsup.push_back(e.what());
    }
  }
  if (auto missing = unsupported_part(v)) unsup.push_back(*missing);
  if (row.includes_h2d == "yes")
    approx.push_back("the batch's host-to-device copy is inside the measured time (overlapped); not added");

  o.seq_len = row.seq_len;
  p.options = to_analytical_options(v, o);
  if (!unsup.empty()) {
    p.fit = RowFit::Unsupported;
    p.nearest_available = !p.gpu_id.empty() && model_known;
    if (p.nearest_available && p.zoo_model.empty()) p.zoo_model = nearest;
    return p;
  }
  p.fit = approx.empty() ? RowFit::Exact : RowFit::Approximated;
  return p;
}

}  // namespace gpemu
