#include "cli/real_nodes.h"

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "dist/launch_env.h"
#include "gpemu/error.h"
#include "workload/backward_plan.h"

namespace gpemu::cli {

std::shared_ptr<dist::NodeGroup> join_real_nodes(JobSpec& spec, ClockKind clock, const CostModel& costs,
                                                 double timeout_s) {
  const std::optional<dist::LaunchEnv> env = dist::read_launch_env();
  if (!env) return nullptr;
  const std::string lead = fmt::format("{}: {}={} makes this process node {} of a {}-node job", env->launcher,
                                       env->launcher == "mpirun" ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE",
                                       env->world_size, env->rank, env->world_size);
  if (clock != ClockKind::Real)
    throw InputError(lead +
                     ", which runs under the real clock (its all-reduce crosses a real network): give "
                     "--clock real, or unset the variable for a run of modelled nodes (--nodes)");
  if (spec.cluster.nodes != 1)
    throw InputError(
        fmt::format("{}: the launcher gives the nodes, one process each; drop --nodes {} (--gpus or "
                    "--gpus-per-node is this node's GPUs)",
                    lead, spec.cluster.nodes));
  if (spec.compute.step_time != StepTime::CostModel || !spec.compute.all_reduce || spec.compute.time_divisor != 1)
    throw InputError(lead + ", whose steps all-reduce a model's gradients: --gpemu-gpus has none");
  const GpuSpec& gpu = *spec.cluster.gpu;
  const StepCost cost = costs.step_cost(gpu, spec.compute.model.name, spec.batch_size);
  const BackwardPlan plan = plan_backward(gpu, spec.compute.model.name, cost, spec.batch_size,
                                          spec.cluster.backward_even_chunks, spec.cluster.backward_max_chunks);
  dist::NodeGroupOptions o;
  o.local_gpus = spec.cluster.gpus;
  o.gradient_bytes = std::accumulate(plan.gradient_bytes.begin(), plan.gradient_bytes.end(), std::uint64_t{0});
  o.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  auto group = std::make_shared<dist::NodeGroup>(*env, o);
  spec.cluster.real_node = env->rank;
  spec.cluster.real_nodes = env->world_size;
  spec.cluster.real_exchange = [g = group.get()](int local, std::uint64_t step) { g->exchange(local, step); };
  return group;
}

nlohmann::json real_nodes_json(const dist::NodeGroup& g) {
  return {{"node", g.node()},
          {"nodes", g.nodes()},
          {"address", g.address()},
          {"bytes_per_exchange", g.rail_bytes()},
          {"exchanges", g.exchanges()},
          {"exchange_s", g.exchange_seconds()},
          {"transport", "gloo ring all-reduce over TCP"}};
}

std::string real_nodes_note(const dist::NodeGroup& g) {
  return fmt::format(
      "real nodes: this is node {} of {} ({}); {} network all-reduces of {:.1f} MB per GPU (gloo's ring over TCP) "
      "took {:.2f} s of real time in all",
      g.node(), g.nodes(), g.address(), g.exchanges(), static_cast<double>(g.rail_bytes()) / 1e6, g.exchange_seconds());
}

}  // namespace gpemu::cli
