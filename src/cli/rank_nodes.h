// Which nodes the ranks of a job span, from the launcher's environment, for
// `gpemu torch` (one process per rank, docs/torch.md "Distributed"):
// torchrun's WORLD_SIZE, RANK, LOCAL_WORLD_SIZE (ranks per node) and
// GROUP_RANK or NODE_RANK (the node), or OpenMPI's OMPI_COMM_WORLD_SIZE,
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_LOCAL_SIZE. Ranks are numbered
// node by node (torchrun's rule; mpirun's default mapping by slot), so a
// rank's node is RANK / LOCAL_WORLD_SIZE.
#pragma once

#include <functional>
#include <string>

namespace gpemu::cli {

struct RankNodes {
  std::string launcher;  // "torchrun", "mpirun", or empty: no launcher's ranks
  int world_size = 1, rank = 0;
  int ranks_per_node = 1;  // LOCAL_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE
  int nodes = 1, node = 0;
};

// One node (nodes 1) when the environment names no job of ranks, or gives no
// ranks-per-node (LOCAL_WORLD_SIZE unset: all ranks on one node, as before).
// InputError naming the variable, its value and what is accepted when the
// variables disagree: a size not a multiple of the ranks per node, a rank
// outside the world, a node variable that is not RANK / LOCAL_WORLD_SIZE, or
// more ranks on a node than a node has GPUs (kMaxGpusPerNode) when there are
// several nodes. `getenv` is std::getenv unless a test gives another.
RankNodes read_rank_nodes(const std::function<const char*(const char*)>& getenv = {});

}  // namespace gpemu::cli
