// Jobs that share a GPU or a node (cluster.h): the engine's speeds for the
// company they keep, Gandiva's packing and migration.
#include <gtest/gtest.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {
namespace {

constexpr const char* kOneV100 = R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}], "checkpoint_gib": 0})";
constexpr const char* kTwoV100 = R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8}], "checkpoint_gib": 0})";
// A loader-bound job (4 cores for a V100's ResNet-18 over Imagenette-10G)
// and a GPU-bound one: the GPU's idle time under the first is the second's.
constexpr const char* kPackable =
    "job,arrival_s,model,batch,gpus,iterations,dataset\n"
    "a,0,resnet18,128,1,300,imagenette10g\n"
    "b,0,resnet50,64,1,300,\n";

ClusterRun run(const char* cluster, const std::string& trace, const std::string& policy, JobSpeed& speed,
               bool node_interference = false) {
  const auto c = parse_cluster(cluster, "c.json");
  auto p = make_policy(policy);
  SimOptions o;
  o.round_s = 60;
  o.node_interference = node_interference;
  return simulate(c, parse_trace(trace, "t.csv", c), *p, o, speed);
}

TEST(Colocation, PackedJobsRunAtTheEnginesSpeedForThePairMemoised) {
  const auto c = parse_cluster(kOneV100, "c.json");
  const auto t = parse_trace(kPackable, "t.csv", c);
  JobSpeed speed;
  const Allocation a{&find_gpu("v100"), 1, 1, 4, 0};
  const double alone_a = speed.iteration_s(t.jobs[0], a), alone_b = speed.iteration_s(t.jobs[1], a);
  const auto packed = speed.colocated_s({{&t.jobs[0], a, 0}, {&t.jobs[1], a, 0}}, 1, 4);
  ASSERT_TRUE(packed);
  ASSERT_EQ(packed->size(), 2u);
  // Each is slower beside the other, but together they do more than by turns.
  EXPECT_GT((*packed)[0], alone_a * 1.05);
  EXPECT_GT((*packed)[1], alone_b * 1.05);
  EXPECT_GT(alone_a / (*packed)[0] + alone_b / (*packed)[1], 1.02);
  EXPECT_EQ(speed.colocations(), 1u);
  EXPECT_EQ(speed.colocated_s({{&t.jobs[0], a, 0}, {&t.jobs[1], a, 0}}, 1, 4), packed);
  EXPECT_EQ(speed.colocations(), 1u);  // memoised
  // On GPUs of their own (a node of two), nothing they share slows them:
  // their loaders' cores are their own, their copies on their own links.
  const auto apart = speed.colocated_s({{&t.jobs[0], a, 0}, {&t.jobs[1], a, 1}}, 2, 8);
  ASSERT_TRUE(apart);
  EXPECT_NEAR((*apart)[0], alone_a, alone_a * 1e-9);
  EXPECT_NEAR((*apart)[1], alone_b, alone_b * 1e-9);
  // Two ResNet-50s of batch 256 do not fit in one V100's 32 GB together.
  const auto big =
      parse_trace("job,arrival_s,model,batch,gpus,iterations\nx,0,resnet50,256,1,10\ny,0,resnet50,256,1,10\n",
                  "big.csv", c);
  EXPECT_FALSE(speed.colocated_s({{&big.jobs[0], a, 0}, {&big.jobs[1], a, 0}}, 1, 4));
}

TEST(Colocation, APackingSharingPolicyThatCannotPackIsOneLine) {
  const auto c = parse_cluster(kOneV100, "c.json");
  const auto t = parse_trace(kPackable, "t.csv", c);
  JobSpeed speed;
  auto p = make_policy("gandiva");
  for (const auto& [sharing, node] : {std::pair<const char*, bool>{"mig", false}, {"fifo", true}, {"nope", false}}) {
    SimOptions o;
    o.pack_sharing = sharing;
    o.node_interference = node;
    try {
      simulate(c, t, *p, o, speed);
      ADD_FAILURE() << sharing << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--pack-sharing '") + sharing + "'"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("timeslice, mps, priority or fifo"), std::string::npos);
    }
  }
}

TEST(Gandiva, PacksWhileOversubscribedAtThePairsSpeedThenRunsAlone) {
  JobSpeed speed;
  const auto packed = run(kOneV100, kPackable, "gandiva", speed);
  const auto c = parse_cluster(kOneV100, "c.json");
  const auto t = parse_trace(kPackable, "t.csv", c);
  const Allocation a{&find_gpu("v100"), 1, 1, 4, 0};
  const auto pair = *speed.colocated_s({{&t.jobs[0], a, 0}, {&t.jobs[1], a, 0}}, 1, 4);
  const double alone_b = speed.iteration_s(t.jobs[1], a);
  // Both start at once on the one GPU; a ends at its packed speed, b runs
  // alone from then (by hand: the iterations b did beside a, then the rest).
  EXPECT_EQ(packed.jobs[0].start_s, 0);
  EXPECT_EQ(packed.jobs[1].start_s, 0);
  const double a_end = 300 * pair[0];
  EXPECT_NEAR(packed.jobs[0].finish_s, a_end, 1e-9);
  EXPECT_NEAR(packed.jobs[1].finish_s, a_end + (300 - a_end / pair[1]) * alone_b, 1e-9);
  EXPECT_NEAR(packed.jobs[0].packed_s, a_end, 1e-9);
  EXPECT_NEAR(packed.jobs[1].packed_s, a_end, 1e-9);
  EXPECT_NEAR(packed.jobs[0].gpu_s, a_end / 2, 1e-9);  // half the GPU while packed
  // Time slicing runs them by turns: b waits for the next round.
  JobSpeed speed2;
  const auto turns = run(kOneV100, kPackable, "timeslice", speed2);
  EXPECT_EQ(turns.jobs[1].start_s, 60);
  EXPECT_EQ(turns.jobs[1].packed_s, 0);
  EXPECT_LT(packed.makespan_s, turns.makespan_s);
  // Not oversubscribed (a GPU each): no packing.
  JobSpeed speed3;
  const auto roomy = run(kTwoV100, kPackable, "gandiva", speed3);
  EXPECT_EQ(roomy.jobs[0].packed_s, 0);
  EXPECT_EQ(roomy.jobs[1].packed_s, 0);
}

TEST(Gandiva, DoesNotPackJobsThatDoNotFitOrDoNotGain) {
  // Two ResNet-50s of batch 256 do not fit on one V100 together; two of
  // batch 32, both GPU-bound, gain nothing from sharing it.
  for (const char* trace :
       {"job,arrival_s,model,batch,gpus,iterations\nx,0,resnet50,256,1,100\ny,0,resnet50,256,1,100\n",
        "job,arrival_s,model,batch,gpus,iterations\nx,0,resnet50,32,1,100\ny,0,resnet50,32,1,100\n"}) {
    JobSpeed speed;
    const auto r = run(kOneV100, trace, "gandiva", speed);
    EXPECT_EQ(r.jobs[0].packed_s, 0) << trace;
    EXPECT_EQ(r.jobs[1].packed_s, 0) << trace;
    EXPECT_EQ(r.jobs[1].start_s, 60) << trace;  // by turns
  }
}

// FIFO that defragments (Gandiva's migration) where plain FIFO spreads.
class DefragmentingFifo final : public Policy {
 public:
  std::string name() const override { return "fifo+migration"; }
  bool defragments() const override { return true; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override { fifo_->order(view, order); }

 private:
  std::unique_ptr<Policy> fifo_ = make_fifo_policy();
};

TEST(Gandiva, MigrationMovesAJobSoThatAMultiGpuJobGetsOneNode) {
  EXPECT_TRUE(make_policy("gandiva")->defragments());
  EXPECT_FALSE(make_policy("fifo")->defragments());
  // Two nodes of two GPUs. a, c end at 5 s, leaving one GPU free on each
  // node beside b and d; e (2 GPUs) arrives at 10 s.
  const auto c = parse_cluster(
      R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8, "count": 2}], "checkpoint_gib": 1, "storage_gb_per_s": 2})",
      "c.json");
  const auto t =
      parse_trace("job,arrival_s,gpus,iterations,step_s\na,0,1,5,1\nb,0,1,100,1\nc,0,1,5,1\nd,0,1,100,1\ne,10,2,10,1\n",
                  "t.csv", c);
  SimOptions o;
  o.round_s = 10;
  JobSpeed speed;
  auto fifo = make_fifo_policy();
  const auto spread = simulate(c, t, *fifo, o, speed);
  for (const auto& r : spread.jobs) EXPECT_EQ(r.migrations, 0) << r.id;
  EXPECT_DOUBLE_EQ(spread.jobs[1].finish_s, 100);
  EXPECT_DOUBLE_EQ(spread.jobs[3].finish_s, 100);
  DefragmentingFifo defrag;
  const auto moved = simulate(c, t, defrag, o, speed);
  // One of b and d moves to the other's node and pays its checkpoint's
  // write and read: 1 GiB each way at 2 GB/s.
  const double checkpoint = 2 * 1.073741824 / 2;
  EXPECT_EQ(moved.jobs[1].migrations + moved.jobs[3].migrations, 1);
  const auto& mover = moved.jobs[1].migrations ? moved.jobs[1] : moved.jobs[3];
  const auto& stayer = moved.jobs[1].migrations ? moved.jobs[3] : moved.jobs[1];
  EXPECT_NEAR(mover.finish_s, 100 + checkpoint, 1e-9);
  EXPECT_DOUBLE_EQ(stayer.finish_s, 100);
  EXPECT_DOUBLE_EQ(moved.jobs[4].finish_s, 20);
  EXPECT_EQ(moved.jobs[4].migrations, 0);
}

TEST(Colocation, NodeInterferenceRunsEachNodesJobsTogetherInTheEngine) {
  // A packed pair and a third job on a node of two GPUs: with
  // node_interference the node's three jobs run together in one session;
  // the third shares nothing with the pair (its own GPU, cores and link),
  // so the pair keeps the speeds it has alone on its GPU (within the
  // steady state's window: the node's session runs more steps, to the
  // third job's length).
  const std::string trace = std::string(kPackable) + "c,0,resnet50,64,1,300,\n";
  JobSpeed pair_only, whole_node;
  const auto by_pair = run(kTwoV100, trace, "gandiva", pair_only);
  const auto by_node = run(kTwoV100, trace, "gandiva", whole_node, true);
  EXPECT_GT(by_pair.jobs[0].packed_s + by_pair.jobs[1].packed_s + by_pair.jobs[2].packed_s, 0);
  EXPECT_GT(whole_node.colocations(), pair_only.colocations());  // the node's set was run
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(by_node.jobs[i].finish_s, by_pair.jobs[i].finish_s, 5e-3 * by_pair.jobs[i].finish_s) << i;
    EXPECT_EQ(by_node.jobs[i].packed_s > 0, by_pair.jobs[i].packed_s > 0) << i;
  }
}

}  // namespace
}  // namespace gpemu::cluster
