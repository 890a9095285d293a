// Which node of a multi-process job this process is, from the launcher's
// environment: torchrun (torch.distributed's RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT) or OpenMPI's mpirun (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, with MASTER_ADDR and
// MASTER_PORT passed by -x). One process is one node: it emulates the node's
// GPUs; the launcher's rank is the node's index (docs/train.md, "Real nodes").
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gpemu::dist {

struct LaunchEnv {
  std::string launcher;  // "torchrun" or "mpirun": which variables were read
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr;
  int master_port = 0;
};

// nullopt when the environment names no job of more than one process;
// InputError naming the variable, its value and what is accepted when it is
// malformed or incomplete. `getenv` is std::getenv unless a test gives another.
std::optional<LaunchEnv> read_launch_env(const std::function<const char*(const char*)>& getenv = {});

}  // namespace gpemu::dist
