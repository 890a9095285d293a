// gpemu torch's ranks across nodes from torchrun's or mpirun's environment
// (cli/rank_nodes.h): the node layout, and one line naming the variable when
// the variables disagree.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cli/rank_nodes.h"
#include "gpemu/error.h"

namespace gpemu::cli {
namespace {

RankNodes nodes_of(const std::map<std::string, std::string>& vars) {
  return read_rank_nodes([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    nodes_of(vars);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RankNodes, TorchrunsAndMpirunsRanksSpanNodes) {
  EXPECT_EQ(nodes_of({}).nodes, 1);
  EXPECT_EQ(nodes_of({}).launcher, "");
  // No ranks per node given: every rank on one node, as before.
  EXPECT_EQ(nodes_of({{"WORLD_SIZE", "2"}, {"RANK", "1"}}).nodes, 1);
  const RankNodes t = nodes_of(
      {{"WORLD_SIZE", "8"}, {"RANK", "5"}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(t.launcher, "torchrun");
  EXPECT_EQ(t.nodes, 4);
  EXPECT_EQ(t.ranks_per_node, 2);
  EXPECT_EQ(t.node, 2);
  EXPECT_EQ(t.rank, 5);
  const RankNodes m = nodes_of({{"OMPI_COMM_WORLD_SIZE", "2"},
                                {"OMPI_COMM_WORLD_RANK", "1"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(m.launcher, "mpirun");
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(m.node, 1);
}

TEST(RankNodes, VariablesThatDisagreeAreNamed) {
  EXPECT_EQ(error_of({{"WORLD_SIZE", "3"}, {"RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}}),
            "WORLD_SIZE=3 is not a multiple of LOCAL_WORLD_SIZE=2: every node runs the same number of ranks; make "
            "LOCAL_WORLD_SIZE a divisor of WORLD_SIZE");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}, {"NODE_RANK", "1"}}),
            "NODE_RANK=1 disagrees with RANK=0 and LOCAL_WORLD_SIZE=1: ranks are numbered node by node, so rank 0 "
            "is on node 0");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "1"}}),
            "WORLD_SIZE=2 is set but RANK is not: the launcher gives both");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"LOCAL_WORLD_SIZE", "1"}}),
            "RANK=2: give a whole number from 0 to 1");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_WORLD_SIZE", "two"}}),
            "LOCAL_WORLD_SIZE=two: give a whole number from 1 to 4096");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "32"}, {"RANK", "0"}, {"LOCAL_WORLD_SIZE", "16"}}),
            "LOCAL_WORLD_SIZE=16: a node holds at most 8 GPUs (one rank each) when the ranks span nodes");
  EXPECT_EQ(error_of(
                {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}),
            "OMPI_COMM_WORLD_SIZE=4 is not a multiple of OMPI_COMM_WORLD_LOCAL_SIZE=3: every node runs the same "
            "number of ranks; make OMPI_COMM_WORLD_LOCAL_SIZE a divisor of OMPI_COMM_WORLD_SIZE");
}

}  // namespace
}  // namespace gpemu::cli
