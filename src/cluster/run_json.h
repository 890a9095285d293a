// A cluster run as JSON: what `gpemu cluster --json` writes (cluster.h has the run).
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/cluster.h"

namespace gpemu::cluster {

// Every figure of the run; byte-identical for identical inputs.
nlohmann::json run_json(const ClusterRun& run);

}  // namespace gpemu::cluster
