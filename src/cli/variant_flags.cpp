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

void add_task_option(CLI::App* cmd, std::string& task) {
  cmd->add_option(
      "--task", task,
      "BERT: pretraining (masked-only MLM + NSP heads) or squad (QA head); default: the zoo model as named");
}

}  // namespace gpemu::cli
