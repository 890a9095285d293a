#include <algorithm>
#include <mutex>

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

// The policies a program registered (register_placement_policy), after the
// built-in ones; never shrinks.
struct Registered {
  std::mutex mu;
  std::vector<std::shared_ptr<const PlacementPolicy>> policies;
};
Registered& registered() {
  static Registered r;
  return r;
}

// Every name, built-in ones first; r.mu held.
std::vector<std::string> names_locked(const Registered& r) {
  std::vector<std::string> out;
  for (const Entry& e : kPolicies) out.emplace_back(e.name);
  for (const auto& p : r.policies) out.emplace_back(p->name());
  return out;
}

}  // namespace

std::vector<std::string> placement_policy_names() {
  Registered& r = registered();
  std::lock_guard lock(r.mu);
  return names_locked(r);
}

std::shared_ptr<const PlacementPolicy> placement_policy(std::string_view name) {
  for (const Entry& e : kPolicies)
    if (name == e.name) return e.make();
  Registered& r = registered();
  std::lock_guard lock(r.mu);
  for (const auto& p : r.policies)
    if (p->name() == name) return p;
  throw InputError(
      fmt::format("placement policy '{}' is not known; expected {}", name, fmt::join(names_locked(r), ", ")));
}

void register_placement_policy(std::shared_ptr<const PlacementPolicy> policy) {
  if (!policy || policy->name().empty()) throw InputError("register_placement_policy: a policy needs a name");
  Registered& r = registered();
  std::lock_guard lock(r.mu);
  const std::vector<std::string> names = names_locked(r);
  if (std::find(names.begin(), names.end(), policy->name()) != names.end())
    throw InputError(fmt::format("placement policy '{}' is registered already; registered: {}", policy->name(),
                                 fmt::join(names, ", ")));
  r.policies.push_back(std::move(policy));
}

}  // namespace gpemu
