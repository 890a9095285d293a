// How a training program runs on the GPU, named as PyTorch users name it:
// matmul precision (torch.set_float32_matmul_precision), whether cuDNN may use
// TF32, the AMP flavour (autocast, or the whole model in half precision with
// FP32 master weights, as apex O2), FP16 or BF16, the activation memory format,
// the attention kernel, fused kernels, and gradient accumulation. Two runs of
// one model that differ here are different programs with different step times
// (docs/analytical-model.md, "Program variants").
//
// A plain value type of the cost layer; `gpemu predict` and `gpemu validate`
// fill it from flags, the step-time CSV reader (step_times.h) from its columns.
// to_analytical_options() (analytical_model.h) maps it onto what the
// analytical model evaluates.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpemu/zoo.h"

namespace gpemu {

// torch.set_float32_matmul_precision: "highest" keeps FP32 matmuls in FP32
// (PyTorch's default since 1.12); "high" lets them run as TF32 on GPUs that
// have it (allow_tf32 = True, the NGC containers' default).
enum class MatmulPrecision { Highest, High };
// None: FP32 everywhere. Autocast: torch.autocast + GradScaler (per-op casts,
// FP32 weights). PureHalf: the model itself in half precision, FP32 master
// weights in the optimizer (apex O2, DeepLearningExamples' BERT "AMP").
enum class AmpFlavour { None, Autocast, PureHalf };
enum class HalfType { FP16, BF16 };
// Activation layout of convolutional networks.
enum class MemoryFormat { NCHW, ChannelsLast };
// Eager: batched matmuls and a softmax kernel. Fused: one scaled-dot-product
// (flash / memory-efficient) attention kernel per layer.
enum class AttentionKernel { Eager, Fused };

struct ProgramVariant {
  MatmulPrecision matmul_precision = MatmulPrecision::Highest;
  // torch.backends.cudnn.allow_tf32 (True by default since PyTorch 1.7).
  bool tf32_conv = true;
  AmpFlavour amp = AmpFlavour::None;
  HalfType half = HalfType::FP16;
  MemoryFormat memory_format = MemoryFormat::NCHW;
  AttentionKernel attention = AttentionKernel::Eager;
  // Fused kernels: LayerNorm (apex FusedLayerNorm), bias + GELU, and a
  // multi-tensor optimizer (FusedAdam / FusedLAMB / foreach).
  bool fused_layer_norm = false, fused_gelu = false, fused_optimizer = false;
  // Gradient-accumulation micro-steps per optimizer update: the update's cost
  // is spread over this many steps.
  int micro_steps = 1;
  bool operator==(const ProgramVariant&) const = default;
};

// Names as on the command line: "highest"/"high", "none"/"autocast"/
// "pure_half", "fp16"/"bf16", "nchw"/"channels_last", "eager"/"fused".
std::string_view to_string(MatmulPrecision v);
std::string_view to_string(AmpFlavour v);
std::string_view to_string(HalfType v);
std::string_view to_string(MemoryFormat v);
std::string_view to_string(AttentionKernel v);
// Parsers (case-insensitive; '-' read as '_'). Each throws InputError naming
// `what` (a flag or a file:line:column), the value and the accepted ones.
MatmulPrecision parse_matmul_precision(std::string_view text, std::string_view what = "--matmul-precision");
AmpFlavour parse_amp_flavour(std::string_view text, std::string_view what = "--amp");
HalfType parse_half_type(std::string_view text, std::string_view what = "--half");
MemoryFormat parse_memory_format(std::string_view text, std::string_view what = "--memory-format");
AttentionKernel parse_attention(std::string_view text, std::string_view what = "--attention");
// "none", or a comma-separated set of "layer_norm", "gelu", "optimizer", or "all".
void parse_fused_ops(std::string_view text, ProgramVariant& into, std::string_view what = "--fused");
std::string fused_ops_string(const ProgramVariant& v);  // "none" or "layer_norm,gelu,..."

// The zoo precision the variant's graph is traced in: FP32 without AMP,
// AMP_FP16 / AMP_BF16 otherwise.
zoo::Precision zoo_precision(const ProgramVariant& v);
// The variant from the older --precision names ("fp32", "amp", "bf16").
ProgramVariant variant_from_precision(zoo::Precision p);

// What a variant asks that the model cannot express yet: nullopt when
// everything is modelled, otherwise a sentence naming what is not.
std::optional<std::string> unsupported_part(const ProgramVariant& v);

// One line for notes and reports, e.g. "amp autocast fp16, matmul highest,
// channels_last, eager attention, fused none, 1 micro-step".
std::string describe(const ProgramVariant& v);

// The zoo model that runs `task` for a model: "" or the model's own task
// returns the model; BERT's "pretraining" (masked-only MLM head + NSP) and
// "squad" (QA head) are the zoo's <model>_pretraining and <model>_squad.
// Throws InputError naming the task and the accepted ones for that model.
std::string task_model(std::string_view model, std::string_view task);

}  // namespace gpemu
