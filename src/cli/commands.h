// Each subcommand registers itself on the root CLI11 app. Commands hold no
// emulation logic: they parse, call the layers below, and print.
#pragma once

#include <CLI/CLI.hpp>

namespace gpemu::cli {

void add_devices_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_dataset_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_validate_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_analyze_command(CLI::App& app);
void add_share_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_smi_command(CLI::App& app);
void add_torch_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_cluster_command(CLI::App& app);
void add_prep_command(CLI::App& app);  // `gpemu prep serve`
void add_netns_command(CLI::App& app);
// `gpemu torch`: takes the script and its arguments out of argv before CLI11
// parses it (they are the script's, "--" and all); returns the argc CLI11 gets.
int split_torch_script_args(int argc, char** argv);

}  // namespace gpemu::cli
