#include "cli/real_nodes.h"

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "dist/cache_peer.h"
#include "dist/launch_env.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "workload/backward_plan.h"

namespace gpemu::cli {

std::shared_ptr<dist::NodeGroup> join_real_nodes(JobSpec& spec, ClockKind clock, const CostModel& costs,
                                                 double timeout_s, pipeline::DistributedCacheKind distributed_cache) {
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
  if (spec.data.source == DataSource::Loader) join_distributed_cache(spec, group, distributed_cache);
  return group;
}

void join_distributed_cache(JobSpec& spec, const std::shared_ptr<dist::NodeGroup>& group,
                            pipeline::DistributedCacheKind kind) {
  if (kind == pipeline::DistributedCacheKind::None) return;
  const std::shared_ptr<pipeline::LoaderCache> cache = spec.data.loader.cache;
  if (!cache) throw std::logic_error("join_distributed_cache: no loader cache");
  // What other nodes ask of this one: the samples its loader cache holds.
  auto samples = std::make_shared<const std::vector<pipeline::Sample>>(spec.data.dataset.samples);
  std::uint64_t largest = 0, total = 0, lengths = 1469598103934665603ull;  // FNV-1a over the samples' lengths
  for (const pipeline::Sample& s : *samples) {
    largest = std::max(largest, s.length);
    total += s.length;
    lengths = (lengths ^ s.length) * 1099511628211ull;
  }
  // Every rank must number the same samples alike: an index names a sample to the others.
  const std::string what =
      fmt::format("a {} cache ({}) of {} samples, {} bytes (lengths {:016x})", pipeline::to_string(kind),
                  pipeline::to_string(cache->admission().policy), samples->size(), total, lengths);
  auto peers = std::make_shared<dist::CachePeers>(
      group,
      [cache, samples](std::uint64_t i) -> std::optional<std::span<const std::byte>> {
        if (i >= samples->size()) return std::nullopt;
        const pipeline::Sample& s = (*samples)[i];
        return cache->peek(s.path, s.offset);
      },
      largest, what);
  pipeline::RealCacheLinks links;
  links.node = group->node();
  links.nodes = group->nodes();
  links.timeout = group->timeout();
  links.exchange = [peers](std::uint64_t round, const std::vector<std::uint64_t>& mine) {
    return peers->exchange(round, mine);
  };
  links.fetch = [peers, samples](int node, std::uint64_t index, std::vector<std::byte>& out) {
    const bool held = peers->fetch(node, index, out);
    if (held && out.size() != (*samples)[index].length)
      throw Error(fmt::format("rank {}'s sample {} is {} bytes, where this rank's is {}: give every rank the same data",
                              node, index, out.size(), (*samples)[index].length));
    return held;
  };
  spec.data.loader.distributed_cache =
      std::make_shared<pipeline::RealDistributedCache>(kind, samples->size(), spec.cluster.gpus, std::move(links));
}

std::vector<train::NodeEpochReads> real_node_epoch_reads(const JobSpec& spec, const RunRecord& rec) {
  std::vector<train::NodeEpochReads> out = train::node_epoch_reads(rec);
  for (train::NodeEpochReads& n : out) n.node = spec.cluster.real_node;
  return out;
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
