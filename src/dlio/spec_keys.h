// DLIO's words for the job spec's fields: a SpecError from the engine is
// raised again with the YAML key that set the field (docs/architecture.md,
// "Front ends only translate").
#pragma once

#include <string>
#include <string_view>

namespace gpemu::dlio {

// The workload's YAML key for `field` ("schedule.epochs" -> "train.epochs"), or "" when none sets it.
std::string yaml_key_of_spec_field(std::string_view field);

}  // namespace gpemu::dlio
