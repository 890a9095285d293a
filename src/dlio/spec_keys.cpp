#include "dlio/spec_keys.h"

#include "gpemu/spec_error.h"

namespace gpemu::dlio {

std::string yaml_key_of_spec_field(std::string_view field) {
  static constexpr SpecFieldWord kKeys[] = {
      {"batch_size", "reader.batch_size"},  {"cluster.gpu", "gpemu.gpu"},
      {"cluster.gpus", "gpemu.world_size"}, {"cluster.network", "gpemu.network"},
      {"cluster.nodes", "gpemu.nodes"},     {"compute.model.name", "gpemu.model"},
      {"schedule.epochs", "train.epochs"},  {"schedule.eval.every", "evaluation.epochs_between_evals"},
  };
  return word_of_spec_field(kKeys, field);
}

}  // namespace gpemu::dlio
