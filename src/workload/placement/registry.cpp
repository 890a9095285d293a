#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpemu/error.h"
#include "workload/placement/policies.h"

namespace gpemu {
namespace {

struct Entry {
  const char* name;
  std::shared_ptr<const PlacementPolicy> (*make)();
};
// The registration: one line per policy.
constexpr Entry kPolicies[] = {
    {"pinned", make_pinned_placement},
    {"first-fit", make_first_fit_placement},
};

}  // namespace

std::vector<std::string> placement_policy_names() {
  std::vector<std::string> out;
  for (const Entry& e : kPolicies) out.emplace_back(e.name);
  return out;
}

std::shared_ptr<const PlacementPolicy> placement_policy(std::string_view name) {
  for (const Entry& e : kPolicies)
    if (name == e.name) return e.make();
  throw InputError(
      fmt::format("placement policy '{}' is not known; expected {}", name, fmt::join(placement_policy_names(), ", ")));
}

}  // namespace gpemu
