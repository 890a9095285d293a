#include "cli/variant_flags.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::cli {

void add_variant_flags(CLI::App* cmd, VariantFlags& f) {
  cmd->add_option("--matmul-precision", f.matmul_precision,
                  "FP32 matmuls: highest (FP32, PyTorch's default) or high (TF32 on Ampere and later), as "
                  "torch.set_float32_matmul_precision")
      ->capture_default_str();
  cmd->add_option(
         "--cudnn-tf32", f.cudnn_tf32,
         "on: FP32 convolutions run as TF32 on Ampere and later (torch.backends.cudnn.allow_tf32, default); off")
      ->capture_default_str();
  cmd->add_option(
         "--amp", f.amp,
         "AMP flavour with --precision amp/bf16: autocast (torch.autocast + GradScaler) or pure_half (model in "
         "half precision, FP32 master weights, as apex O2)")
      ->capture_default_str();
  cmd->add_option("--memory-format", f.memory_format, "Activation layout of CNNs: nchw or channels_last")
      ->capture_default_str();
  cmd->add_option("--attention", f.attention,
                  "Self-attention: eager (batched matmuls + softmax) or fused (scaled-dot-product kernel)")
      ->capture_default_str();
  cmd->add_option("--fused", f.fused,
                  "Fused kernels: none, all, or a comma-separated set of layer_norm, gelu, optimizer")
      ->capture_default_str();
  cmd->add_option("--micro-steps", f.micro_steps,
                  "Gradient-accumulation steps per optimizer update (the update's cost is spread over them)")
      ->capture_default_str();
}

ProgramVariant to_variant(const VariantFlags& f, zoo::Precision precision) {
  ProgramVariant v = variant_from_precision(precision);
  v.matmul_precision = parse_matmul_precision(f.matmul_precision, "--matmul-precision");
  if (f.cudnn_tf32 == "on")
    v.tf32_conv = true;
  else if (f.cudnn_tf32 == "off")
    v.tf32_conv = false;
  else
    throw InputError(fmt::format("--cudnn-tf32: unknown value '{}'; accepted: on, off", f.cudnn_tf32));
  const AmpFlavour amp = parse_amp_flavour(f.amp, "--amp");
  if (v.amp != AmpFlavour::None) {
    if (amp == AmpFlavour::None)
      throw InputError("--amp none contradicts --precision amp/bf16; use --precision fp32 for a run without AMP");
    v.amp = amp;
  }
  v.memory_format = parse_memory_format(f.memory_format, "--memory-format");
  v.attention = parse_attention(f.attention, "--attention");
  parse_fused_ops(f.fused, v, "--fused");
  if (f.micro_steps < 1)
    throw InputError(fmt::format("--micro-steps {}: must be at least 1 (1: no gradient accumulation)", f.micro_steps));
  v.micro_steps = f.micro_steps;
  return v;
}

}  // namespace gpemu::cli
