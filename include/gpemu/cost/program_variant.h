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

// How the host and the GPU meet within a step.
enum class StepSync {
  // Each phase (forward; loss + zero_grad + backward + optimizer) starts on
  // an idle GPU and ends synchronised: how GPEmu timed its profiles.
  Phases,
  // The step as a training loop issues it back to back: the host runs ahead
  // of the GPU up to CUDA's launch queue depth and waits only at the
  // program's sync points (GradScaler's inf check: found_inf.item()); the
  // step time is the steady state of consecutive steps.
  Pipelined,
};
std::string_view to_string(StepSync s);  // "phases", "pipelined"

struct ProgramVariant {
  MatmulPrecision matmul_precision = MatmulPrecision::Highest;
  // torch.backends.cudnn.allow_tf32 (True by default since PyTorch 1.7).
  bool tf32_conv = true;
  AmpFlavour amp = AmpFlavour::None;
  HalfType half = HalfType::FP16;
  MemoryFormat memory_format = MemoryFormat::NCHW;
  AttentionKernel attention = AttentionKernel::Eager;
  // Fused kernels: the attention scores' scale + softmax + dropout (NVFuser,
  // Megatron's fused softmax), LayerNorm (apex FusedLayerNorm), bias + GELU,
  // and a multi-tensor optimizer (FusedAdam / FusedLAMB / foreach).
  bool fused_softmax = false, fused_layer_norm = false, fused_gelu = false, fused_optimizer = false;
  // A foreach (multi-tensor) optimizer, PyTorch 2's default: each kind of
  // per-parameter update kernel is one call over every parameter (a few
  // launches) instead of one launch per parameter; same bytes.
  bool foreach_optimizer = false;
  // Whether any of the chains the zoo's fused graphs fuse is asked
  // (softmax, LayerNorm, GELU; the optimizer is a rewrite of any graph).
  bool fused_chains() const { return fused_softmax || fused_layer_norm || fused_gelu; }
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
// "none", or a comma-separated set of "softmax", "layer_norm", "gelu",
// "optimizer", or "all".
void parse_fused_ops(std::string_view text, ProgramVariant& into, std::string_view what = "--fused");
std::string fused_ops_string(const ProgramVariant& v);  // "none" or "softmax,layer_norm,gelu,..."

// The zoo precision the variant's graph is traced in: FP32 without AMP,
// AMP_FP16 / AMP_BF16 otherwise.
zoo::Precision zoo_precision(const ProgramVariant& v);
// The variant from the older --precision names ("fp32", "amp", "bf16").
ProgramVariant variant_from_precision(zoo::Precision p);

// A variant as its options spell it: the command line's flags and the
// Python module's keywords (the same names and defaults).
struct ProgramVariantNames {
  std::string matmul_precision = "highest", amp = "autocast", memory_format = "nchw", attention = "eager",
              fused = "none", cudnn_tf32 = "on", foreach = "off";
  int micro_steps = 1;
};
// The variant for a run at `precision` (fp32, amp or bf16 picks AMP on or
// off and the half type; `amp` picks the AMP flavour). Throws InputError
// naming the option as a flag ("--matmul-precision") or, with keywords, as a
// keyword ("matmul_precision"), with the values it accepts.
ProgramVariant to_variant(const ProgramVariantNames& names, zoo::Precision precision, bool keywords = false);

// How a PyTorch major version runs an unchanged training script by default
// (docs/host.md): what `--torch 1|2` sets, each flag still overriding its part.
struct TorchPreset {
  int major = 1;
  bool zero_grad_to_none = false;    // optimizer.zero_grad() sets grads to None (2.0's default)
  bool foreach_optimizer = false;    // SGD/Adam default to foreach (multi-tensor) kernels on CUDA (2.0)
  bool multihead_sdpa = false;       // nn.MultiheadAttention calls scaled_dot_product_attention in training (2.0)
  StepSync sync = StepSync::Phases;  // 1: GPEmu's timing (each phase synchronised); 2: steps back to back
  bool default_host = false;         // 2: the default host profile (host.h, kDefaultHost) issues the steps
};
// "1" (also "1.x", "1.13") or "2" ("2.x", "2.11"); InputError naming `what` otherwise.
TorchPreset torch_preset(std::string_view version, std::string_view what = "--torch");
// The names with the preset's defaults where a name is "" (not given):
// attention ("fused" for a model that runs_multihead_attention under 2, else
// "eager") and foreach ("on" under 2, else "off").
ProgramVariantNames with_torch_defaults(ProgramVariantNames names, const TorchPreset& preset, std::string_view model);

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

// The zoo graph a variant of `model` runs. Fused attention is a graph of its
// own, `<model>_sdpa` (one scaled-dot-product kernel per layer each way;
// traced for the BERT, GPT-2 and Llama models): with v.attention Fused the
// result is that graph, and a model named `..._sdpa` sets it in `v`. The
// zoo has no graph with both fused attention and fused chains (InputError).
// The fused chains are graphs of
// their own, `<model>_fused` (scale + softmax + dropout of the attention
// scores, bias + dropout + residual add + LayerNorm, and bias + GELU, one
// kernel each, as DeepLearningExamples' NVFuser-scripted BERT runs them;
// traced for BERT's pretraining and squad heads): with v.fused_softmax,
// v.fused_layer_norm and v.fused_gelu the result is that graph, and a model
// named `..._fused` sets the three in `v`. Throws InputError naming `what`
// (the flag or keyword) when only some of the three are asked, or when the
// model has no fused graph.
std::string variant_model(const std::string& model, ProgramVariant& v, std::string_view what = "--fused");
// Whether `model`'s attention is torch.nn.MultiheadAttention (torchvision's
// ViT), which PyTorch 2 runs through F.scaled_dot_product_attention in
// training: its torch-2 program is the model's `_sdpa` graph.
bool runs_multihead_attention(std::string_view model);
// Whether the zoo graph `model` is a fused one (named `..._fused`).
bool is_fused_graph(std::string_view model);
// Whether the zoo graph `model` has fused attention (named `..._sdpa`).
bool is_sdpa_graph(std::string_view model);

}  // namespace gpemu
