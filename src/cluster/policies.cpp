// The policies by name (cluster.h).
#include <fmt/format.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {

std::vector<std::string> policy_names() {
  return {"fifo", "srtf", "las", "drf-fifo", "drf", "allox", "es", "max-min", "timeslice", "max-min-perf", "gandiva"};
}

std::unique_ptr<Policy> make_policy(std::string_view name, const LasOptions& las, const AlloxOptions& allox) {
  if (name == "fifo") return make_fifo_policy();
  if (name == "srtf") return make_srtf_policy();
  if (name == "las") return make_las_policy(las);
  if (name == "drf-fifo") return make_drf_fifo_policy();
  if (name == "drf") return make_drf_policy();
  if (name == "allox") return make_allox_policy(allox);
  if (name == "es") return make_es_policy();
  if (name == "max-min") return make_max_min_policy();
  if (name == "max-min-perf") return make_max_min_perf_policy();
  if (name == "timeslice") return make_timeslice_policy();
  if (name == "gandiva") return make_gandiva_policy();
  std::string accepted;
  for (const auto& n : policy_names()) accepted += (accepted.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("--policy '{}': unknown; accepted: {}", name, accepted));
}

}  // namespace gpemu::cluster
