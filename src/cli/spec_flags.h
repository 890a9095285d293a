// The CLI's words for the job spec's fields: a SpecError from the engine is
// printed with the flag that set the field (docs/architecture.md, "Front ends
// only translate").
#pragma once

#include <string>
#include <string_view>

namespace gpemu::cli {

// The flag that sets `field` ("cluster.gpus" -> "--gpus"), or "" when no flag does.
std::string flag_of_spec_field(std::string_view field);

}  // namespace gpemu::cli
