#include "cli/rank_nodes.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "common/env_number.h"
#include "gpemu/error.h"
#include "gpemu/interconnect/cluster.h"

namespace gpemu::cli {
namespace {

// The most ranks one job may have (as dist::read_launch_env accepts).
constexpr int kMaxRanks = 4096;

}  // namespace

RankNodes read_rank_nodes(const std::function<const char*(const char*)>& getenv_fn) {
  const auto get = [&](const char* name) -> const char* {
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  RankNodes r;
  const char *size_name = "WORLD_SIZE", *rank_name = "RANK", *local_name = "LOCAL_WORLD_SIZE";
  if (get(size_name) != nullptr) {
    r.launcher = "torchrun";
  } else if (get("OMPI_COMM_WORLD_SIZE") != nullptr) {
    r.launcher = "mpirun";
    size_name = "OMPI_COMM_WORLD_SIZE";
    rank_name = "OMPI_COMM_WORLD_RANK";
    local_name = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else {
    return r;
  }
  const char* size = get(size_name);
  r.world_size = env_whole_number(size_name, size, 1, kMaxRanks);
  const char* local = get(local_name);
  r.ranks_per_node = local != nullptr ? env_whole_number(local_name, local, 1, kMaxRanks) : r.world_size;
  if (r.world_size % r.ranks_per_node != 0)
    throw InputError(fmt::format(
        "{}={} is not a multiple of {}={}: every node runs the same number of ranks; make {} a divisor of {}",
        size_name, r.world_size, local_name, r.ranks_per_node, local_name, size_name));
  r.nodes = r.world_size / r.ranks_per_node;
  if (r.nodes == 1) return r;
  if (r.ranks_per_node > kMaxGpusPerNode)
    throw InputError(fmt::format("{}={}: a node holds at most {} GPUs (one rank each) when the ranks span nodes",
                                 local_name, r.ranks_per_node, kMaxGpusPerNode));
  const char* rank = get(rank_name);
  if (rank == nullptr)
    throw InputError(fmt::format("{}={} is set but {} is not: the launcher gives both", size_name, size, rank_name));
  r.rank = env_whole_number(rank_name, rank, 0, r.world_size - 1);
  r.node = r.rank / r.ranks_per_node;
  if (r.launcher == "torchrun")
    for (const char* node_name : {"GROUP_RANK", "NODE_RANK"})
      if (const char* node = get(node_name);
          node != nullptr && env_whole_number(node_name, node, 0, r.nodes - 1) != r.node)
        throw InputError(fmt::format(
            "{}={} disagrees with {}={} and {}={}: ranks are numbered node by node, so rank {} is on node {}",
            node_name, node, rank_name, r.rank, local_name, r.ranks_per_node, r.rank, r.node));
  return r;
}

}  // namespace gpemu::cli
