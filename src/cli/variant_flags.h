// The program-variant flags shared by `gpemu predict` and `gpemu validate`
// (include/gpemu/program_variant.h names them as PyTorch users do).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "gpemu/cost_model.h"
#include "gpemu/zoo.h"

namespace gpemu::cli {

struct VariantFlags {
  std::string matmul_precision = "highest", amp = "autocast", memory_format = "nchw", attention = "eager",
              fused = "none", cudnn_tf32 = "on";
  int micro_steps = 1;
};

void add_variant_flags(CLI::App* cmd, VariantFlags& flags);

// The variant for a run at `precision` (--precision: fp32, amp or bf16 picks
// AMP on or off and the half type; --amp picks the AMP flavour). Throws
// InputError naming the flag for a value it does not accept.
ProgramVariant to_variant(const VariantFlags& flags, zoo::Precision precision);

}  // namespace gpemu::cli
