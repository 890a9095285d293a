// Sharing policies are objects (sharing_policy.h): the built-in ones behind
// one interface, and a new one added from outside gpemu is one class and one
// registration, then known to the GPU and to parse_share_policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/sharing_policy.h"

namespace gpemu {
namespace {

// Kernels in flight split the GPU evenly, with no switching cost: a policy
// gpemu does not ship, written here as a user would.
class Evenly final : public SharingPolicy {
 public:
  std::string_view name() const override { return "test-evenly"; }
  std::optional<LinkShare> compute_share(const ShareOptions&) const override { return LinkShare{}; }
};

TEST(SharingPolicies, TheBuiltInOnesAnswerTheInterfaceAsTheirBasesSay) {
  EXPECT_TRUE(sharing_policy(SharePolicy::Fifo).exclusive_steps());
  EXPECT_FALSE(sharing_policy(SharePolicy::Fifo).compute_share({}).has_value());
  const ShareOptions o{.policy = SharePolicy::TimeSlice, .timeslice = 3000, .switch_cost = 1000};
  const std::optional<LinkShare> ts = sharing_policy(SharePolicy::TimeSlice).compute_share(o);
  ASSERT_TRUE(ts.has_value());
  EXPECT_EQ(ts->rule, ShareRule::TimeSlice);
  EXPECT_DOUBLE_EQ(ts->contended_efficiency, 0.75);
  EXPECT_EQ(sharing_policy(SharePolicy::Priority).compute_share({})->rule, ShareRule::Priority);
  EXPECT_EQ(sharing_policy(SharePolicy::Mps).compute_share({})->rule, ShareRule::Demand);
  const SharingPolicy& mig = sharing_policy(SharePolicy::Mig);
  EXPECT_TRUE(mig.slices());
  const MigProfile& slice = find_mig_profile(find_gpu("A100-SXM4-40GB"), "3g.20gb");
  EXPECT_EQ(mig.kernel_on_slice(3000, {1.0F, 0.5F}, slice), 7000);  // 7/3 of the SMs short
  EXPECT_THROW(mig.check(find_gpu("V100-PCIE-16GB"), {}), InputError);
}

TEST(SharingPolicies, ANewPolicyIsOneClassAndOneRegistration) {
  register_sharing_policy(std::make_shared<Evenly>());
  const SharePolicy evenly = parse_share_policy("test-evenly");
  EXPECT_EQ(to_string(evenly), "test-evenly");
  const std::vector<std::string> names = sharing_policy_names();
  EXPECT_EQ(names.front(), "fifo");
  EXPECT_NE(std::find(names.begin(), names.end(), "test-evenly"), names.end());
  // A name is registered once.
  EXPECT_THROW(register_sharing_policy(std::make_shared<Evenly>()), InputError);

  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline(*clock);
  const GpuSpec& v100 = find_gpu("V100-PCIE-16GB");
  SharedGpu gpu(timeline, v100, ShareOptions{.policy = evenly});
  ASSERT_NE(gpu.compute_link(), nullptr);
  Device a(timeline, v100, DeviceOptions{.index = 0, .share = {&gpu}});
  Device b(timeline, v100, DeviceOptions{.index = 1, .share = {&gpu}});
  // Two kernels of 1000 ns alone, at once: half the GPU each, both end at 2000.
  const Completion ka = a.default_stream().launch_kernel(1000);
  const Completion kb = b.default_stream().launch_kernel(1000);
  EXPECT_EQ(timeline.end_time(ka), 2000);
  EXPECT_EQ(timeline.end_time(kb), 2000);
}

TEST(SharingPolicies, AnUnknownPolicyIsRefusedNamingTheRegisteredOnes) {
  try {
    parse_share_policy("round-robin");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fifo, timeslice, priority, mps, mig"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sharing_policy(SharePolicy("nowhere")), InputError);
}

}  // namespace
}  // namespace gpemu
