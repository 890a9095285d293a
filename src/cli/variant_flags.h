// The program-variant flags of `gpemu predict` (the names and their mapping:
// ProgramVariantNames and to_variant in include/gpemu/cost_model.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "gpemu/cost_model.h"
#include "gpemu/zoo.h"

namespace gpemu::cli {

using VariantFlags = ProgramVariantNames;

void add_variant_flags(CLI::App* cmd, VariantFlags& flags);
// --torch (1 or 2: TorchPreset) and --host (a host profile: find_host).
void add_torch_options(CLI::App* cmd, std::string& torch, std::string& host);
// --task (BERT's heads: pretraining, squad; see task_model).
void add_task_option(CLI::App* cmd, std::string& task);

}  // namespace gpemu::cli
