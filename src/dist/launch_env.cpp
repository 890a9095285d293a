#include "dist/launch_env.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "common/env_number.h"
#include "gpemu/error.h"

namespace gpemu::dist {
std::optional<LaunchEnv> read_launch_env(const std::function<const char*(const char*)>& getenv_fn) {
  const auto get = [&](const char* name) -> const char* {
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  LaunchEnv e;
  const char *size = get("WORLD_SIZE"), *rank = get("RANK"), *local = get("LOCAL_RANK");
  if (size != nullptr) {
    e.launcher = "torchrun";
  } else if ((size = get("OMPI_COMM_WORLD_SIZE")) != nullptr) {
    e.launcher = "mpirun";
    rank = get("OMPI_COMM_WORLD_RANK");
    local = get("OMPI_COMM_WORLD_LOCAL_RANK");
  } else {
    return std::nullopt;
  }
  const char* size_name = e.launcher == "torchrun" ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE";
  const char* rank_name = e.launcher == "torchrun" ? "RANK" : "OMPI_COMM_WORLD_RANK";
  e.world_size = env_whole_number(size_name, size, 1, 4096);
  if (e.world_size == 1) return std::nullopt;
  if (rank == nullptr)
    throw InputError(fmt::format("{}={} is set but {} is not: the launcher gives both", size_name, size, rank_name));
  e.rank = env_whole_number(rank_name, rank, 0, e.world_size - 1);
  if (local != nullptr) e.local_rank = env_whole_number("LOCAL_RANK", local, 0, 4095);
  const char* addr = get("MASTER_ADDR");
  const char* port = get("MASTER_PORT");
  if (addr == nullptr || port == nullptr)
    throw InputError(fmt::format(
        "{}={} makes this one node of a {}-node job, but MASTER_ADDR and MASTER_PORT (where rank 0 listens for "
        "the others) are not both set{}",
        size_name, size, e.world_size,
        e.launcher == "mpirun" ? ": pass them with mpirun -x MASTER_ADDR=<rank 0's address> -x MASTER_PORT=<port>"
                               : ""));
  e.master_addr = addr;
  e.master_port = env_whole_number("MASTER_PORT", port, 1, 65535);
  // torchrun's static rendezvous (its default with --master_addr and
  // --master_port) keeps its agent's own store at MASTER_PORT, where gpemu's
  // rank 0 would listen; with c10d rendezvous MASTER_PORT is a free port.
  if (const char* agent = get("TORCHELASTIC_USE_AGENT_STORE"); agent != nullptr && std::string_view(agent) == "True")
    throw InputError(fmt::format(
        "torchrun's static rendezvous keeps its own store at MASTER_PORT {} (TORCHELASTIC_USE_AGENT_STORE=True), "
        "where gpemu's rank 0 listens for the others: run torchrun with --rdzv_backend c10d --rdzv_endpoint "
        "HOST:PORT instead of --master_addr and --master_port",
        e.master_port));
  return e;
}

}  // namespace gpemu::dist
