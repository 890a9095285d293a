#include "cli/variant_flags.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::cli {

void add_variant_flags(CLI::App* cmd, VariantFlags& f) {
  // Not given: the --torch preset decides (with_torch_defaults).
  f.attention.clear();
  f.foreach.clear();
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
                  "Self-attention: eager (batched matmuls + softmax) or fused (scaled-dot-product kernel); default: "
                  "eager, with --torch 2 fused for nn.MultiheadAttention models (vit_b_16)");
  cmd->add_option("--fused", f.fused,
                  "Fused kernels: none, all, or a comma-separated set of layer_norm, gelu, optimizer")
      ->capture_default_str();
  cmd->add_option("--foreach", f.foreach,
                  "Optimizer kernels: on (foreach multi-tensor calls, PyTorch 2's default) or off (one kernel per "
                  "parameter); default: the --torch preset's");
  cmd->add_option("--micro-steps", f.micro_steps,
                  "Gradient-accumulation steps per optimizer update (the update's cost is spread over them)")
      ->capture_default_str();
}

void add_torch_options(CLI::App* cmd, std::string& torch, std::string& host) {
  cmd->add_option("--torch", torch,
                  "PyTorch major version whose defaults the program takes: 1 (as GPEmu's profiles were measured: "
                  "zero_grad keeps grads, per-parameter optimizer kernels, each phase synchronised) or 2 (zero_grad "
                  "to None, foreach optimizers, MultiheadAttention through SDPA, steps back to back on the default "
                  "host); each flag still overrides its part")
      ->capture_default_str();
  cmd->add_option("--host", host,
                  "Host profile that issues the steps: default (h200-2026, a 16-core H200 host with PyTorch 2.11), "
                  "gpemu-2022-<family> (the hosts of GPEmu's profiles), or a file from `gpemu bench host --out "
                  "FILE`; default: --torch 2's default host, with --torch 1 the GPU family's calibrated launch times");
}

void add_task_option(CLI::App* cmd, std::string& task) {
  cmd->add_option(
      "--task", task,
      "BERT: pretraining (masked-only MLM + NSP heads) or squad (QA head); default: the zoo model as named");
}

}  // namespace gpemu::cli
