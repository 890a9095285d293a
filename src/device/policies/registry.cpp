#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "device/policies/policies.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

struct Registry {
  std::mutex mu;
  // Never shrinks: a SharePolicy handle's name points into a policy here.
  std::vector<std::shared_ptr<const SharingPolicy>> policies{
      // The registration of the built-in policies: one line each.
      policies::fifo(), policies::timeslice(), policies::priority(), policies::mps(), policies::mig(),
  };
};

Registry& registry() {
  static Registry r;
  return r;
}

const SharingPolicy* find(Registry& r, std::string_view name) {
  for (const auto& p : r.policies)
    if (p->name() == name) return p.get();
  return nullptr;
}

std::string known(Registry& r) {
  std::vector<std::string_view> names;
  for (const auto& p : r.policies) names.push_back(p->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string_view to_string(SharePolicy p) { return p.name(); }

SharePolicy parse_share_policy(std::string_view text) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (const SharingPolicy* p = find(r, text)) return SharePolicy(p->name());
  throw InputError(fmt::format("sharing policy '{}' is not known; expected {}", text, known(r)));
}

const SharingPolicy& sharing_policy(SharePolicy policy) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (const SharingPolicy* p = find(r, policy.name())) return *p;
  throw InputError(fmt::format("sharing policy '{}' is not known; expected {}", policy.name(), known(r)));
}

void register_sharing_policy(std::shared_ptr<const SharingPolicy> policy) {
  if (!policy || policy->name().empty()) throw InputError("register_sharing_policy: a policy needs a name");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (find(r, policy->name()))
    throw InputError(
        fmt::format("sharing policy '{}' is registered already; registered: {}", policy->name(), known(r)));
  r.policies.push_back(std::move(policy));
}

std::vector<std::string> sharing_policy_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& p : r.policies) out.emplace_back(p->name());
  return out;
}

}  // namespace gpemu
