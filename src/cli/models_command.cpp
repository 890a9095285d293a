// `gpemu models`: the model zoo (zoo/*.json, docs/model-zoo.md).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "gpemu/zoo.h"

namespace gpemu::cli {
namespace {

void list_models(bool json) {
  const auto names = zoo::zoo_models();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : names) {
      const zoo::ModelGraph& g = zoo::load_model(n);
      out.push_back({{"name", g.name()},
                     {"family", g.family()},
                     {"params", g.params()},
                     {"forward_gflops_per_sample", g.forward_flops_per_sample() / 1e9},
                     {"default_batch", g.default_batch()},
                     {"default_seq_len", g.has_seq_len() ? nlohmann::json(g.default_seq_len()) : nlohmann::json()},
                     {"input", g.input_description()},
                     {"input_bytes_per_sample", g.input_bytes_per_sample()}});
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  if (names.empty()) {
    std::cout << fmt::format("The model zoo {} holds no models (set GPEMU_DATA_DIR to the folder that holds zoo/).\n",
                             zoo::zoo_dir().string());
    return;
  }
  Table t({"model", "family", "params M", "fwd GFLOPs/sample", "default batch", "seq len"});
  for (const auto& n : names) {
    const zoo::ModelGraph& g = zoo::load_model(n);
    t.add({g.name(), g.family(), fixed(static_cast<double>(g.params()) / 1e6, 1),
           fixed(g.forward_flops_per_sample() / 1e9, 2), std::to_string(g.default_batch()),
           g.has_seq_len() ? std::to_string(g.default_seq_len()) : "-"});
  }
  t.print(std::cout);
  std::cout << fmt::format("\n{} models in {}. FLOPs count a multiply-add as 2, loss included (docs/model-zoo.md).\n",
                           names.size(), zoo::zoo_dir().string());
}

}  // namespace

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the model zoo: per-operator training graphs gpemu predicts from");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->callback([json] { list_models(*json); });
}

}  // namespace gpemu::cli
