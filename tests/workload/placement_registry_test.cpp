// Placement policies registered by a program (register_placement_policy,
// session.h): known by name after the built-in ones, used by a session as a
// built-in one is, and refused when the name is empty or taken.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/session.h"
#include "support/session_jobs.h"

namespace gpemu {
namespace {

using testing::fixed_job;

// Each job alone on the highest-numbered free GPU.
class HighestFree final : public PlacementPolicy {
 public:
  explicit HighestFree(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  int place(const PlacementRequest&, std::span<const GpuLoad> gpus) const override {
    for (auto g = gpus.rbegin(); g != gpus.rend(); ++g)
      if (g->jobs == 0) return g->index;
    return -1;
  }

 private:
  std::string name_;
};

std::string refusal(const std::shared_ptr<const PlacementPolicy>& p) {
  try {
    register_placement_policy(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(registered)";
}

TEST(PlacementRegistry, ARegisteredPolicyIsKnownByNameAfterTheBuiltInOnesAndPlacesASessionsJobs) {
  const auto mine = std::make_shared<HighestFree>("test-highest-free");
  register_placement_policy(mine);
  EXPECT_EQ(placement_policy("test-highest-free"), mine);
  const std::vector<std::string> names = placement_policy_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "pinned");
  EXPECT_EQ(names[1], "first-fit");
  EXPECT_NE(std::find(names.begin() + 2, names.end(), "test-highest-free"), names.end());

  // Three jobs of 2 ms x 3 steps arrive at 0 on 2 GPUs: a on GPU 1, b on GPU
  // 0, c waits for a's end (6 ms) and takes GPU 1 again.
  const std::unique_ptr<Clock> clock = make_virtual_clock();
  const std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  SessionSpec s;
  s.gpu = &find_gpu("A100-SXM4-40GB");
  s.gpus_per_node = 2;
  s.placement = placement_policy("test-highest-free");
  Session session(*clock, *costs, s);
  const JobId a = session.add_job(fixed_job("a", 2 * kMillisecond, 3));
  const JobId b = session.add_job(fixed_job("b", 2 * kMillisecond, 3));
  const JobId c = session.add_job(fixed_job("c", 2 * kMillisecond, 3));
  session.run();
  EXPECT_EQ(session.outcome(a).gpus, std::vector<int>{1});
  EXPECT_EQ(session.outcome(b).gpus, std::vector<int>{0});
  EXPECT_EQ(session.outcome(c).gpu, 1);
  EXPECT_EQ(session.outcome(c).start, 6 * kMillisecond);
  EXPECT_EQ(session.outcome(c).end, 12 * kMillisecond);
}

TEST(PlacementRegistry, AnEmptyOrTakenNameIsRefusedInOneLine) {
  register_placement_policy(std::make_shared<HighestFree>("test-taken"));
  for (const char* taken : {"first-fit", "pinned", "test-taken"}) {
    const std::string e = refusal(std::make_shared<HighestFree>(taken));
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("placement policy '") + taken + "' is registered already"), std::string::npos) << e;
  }
  EXPECT_EQ(refusal(std::make_shared<HighestFree>("")), "register_placement_policy: a policy needs a name");
  EXPECT_EQ(refusal(nullptr), "register_placement_policy: a policy needs a name");
  const std::vector<std::string> names = placement_policy_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "test-taken"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "first-fit"), 1);
  EXPECT_NE(refusal(std::make_shared<HighestFree>("test-taken")).find("registered: pinned, first-fit"),
            std::string::npos);
}

TEST(PlacementRegistry, PoliciesRegisteredFromSeveralThreadsAtOnceAreAllKnown) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        const std::string name = "test-thread-" + std::to_string(t) + "-" + std::to_string(i);
        register_placement_policy(std::make_shared<HighestFree>(name));
        EXPECT_EQ(placement_policy(name)->name(), name);
      }
    });
  for (auto& th : threads) th.join();
  const std::vector<std::string> names = placement_policy_names();
  for (int t = 0; t < 8; ++t)
    for (int i = 0; i < 50; ++i)
      EXPECT_EQ(std::count(names.begin(), names.end(), "test-thread-" + std::to_string(t) + "-" + std::to_string(i)),
                1);
}

}  // namespace
}  // namespace gpemu
