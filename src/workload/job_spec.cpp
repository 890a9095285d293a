// The JobSpec's own rules: validate(), what the record of a run keeps
// (kept_record_bytes) and whether a step program moves bytes over links
// (uses_links). include/gpemu/job/spec.h.
#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/job/spec.h"
#include "gpemu/spec_error.h"
#include "workload/node_loaders.h"

namespace gpemu {

double kept_record_bytes(const JobSpec& s, std::int64_t planned_steps) {
  const double gpus = std::max(1, s.cluster.gpus);
  const double phases =
      s.schedule.train ? static_cast<double>(s.schedule.epochs) * (s.schedule.eval.steps > 0 ? 2 : 1) : 0;
  const double epochs = s.record.epochs ? gpus * phases : 0;
  const double all_steps = gpus * static_cast<double>(std::max<std::int64_t>(0, planned_steps));
  return epochs * kRecordBytesPerEpoch + (s.record.steps ? all_steps * kRecordBytesPerStep : 0) +
         (s.trace ? all_steps * kTraceBytesPerStep : 0);
}

void validate(const JobSpec& s) {
  if (s.cluster.gpu == nullptr) throw SpecError("cluster.gpu", "", "is missing; give a GPU from the catalog");
  if (s.batch_size < 1) throw SpecError("batch_size", std::to_string(s.batch_size), "it must be at least 1");
  if (s.cluster.gpus < 1) throw SpecError("cluster.gpus", std::to_string(s.cluster.gpus), "it must be at least 1");
  if (s.schedule.epochs < (s.schedule.train ? 1 : 0))
    throw SpecError("schedule.epochs", std::to_string(s.schedule.epochs), "it must be at least 1");
  if (s.schedule.max_iterations < -1)
    throw SpecError("schedule.max_iterations", std::to_string(s.schedule.max_iterations), "it must be 0 or more");
  if (s.data.source == DataSource::Synthetic && !s.data.synthetic_over_dataset && s.data.synthetic_batches < 0)
    throw SpecError("data.synthetic_batches", std::to_string(s.data.synthetic_batches), "it must be 0 or more");
  if (s.data.source == DataSource::Custom && !s.data.custom)
    throw InputError("job: data.source is Custom but data.custom is not set");
  if (s.compute.step_time == StepTime::CostModel && s.compute.model.name.empty())
    throw SpecError("compute.model.name", "", "is empty; give a model (see 'gpemu models')");
  if (s.compute.model.seq_len < 0)
    throw SpecError("compute.model.seq_len", std::to_string(s.compute.model.seq_len), "it must be at least 1");
  if (s.cluster.nodes < 1) throw SpecError("cluster.nodes", std::to_string(s.cluster.nodes), "it must be at least 1");
  if (uses_links(s) && (s.cluster.gpus > 1 || s.cluster.nodes > 1)) {
    // Even split, at most kMaxGpusPerNode a node: refused with what to give.
    plan_cluster(s.cluster.gpus, s.cluster.nodes, s.cluster.node, s.cluster.network);
    if (s.cluster.nodes > 1 && !(s.cluster.network.line_rate_gbps > 0))
      throw SpecError("cluster.network", "",
                      fmt::format("is not set for {} nodes; give 10gbe|25gbe|100gbe|400gbe|FILE", s.cluster.nodes));
  }
  if (s.cluster.buckets.bucket_cap_bytes == 0)
    throw SpecError("cluster.buckets.bucket_cap_bytes", "0", "it must be positive");
  if (s.cluster.device.share.gpu && (s.cluster.gpus != 1 || s.cluster.nodes != 1))
    throw InputError(fmt::format("job: a job on a shared GPU runs on one GPU, not {} on {} node(s)", s.cluster.gpus,
                                 s.cluster.nodes));
  if (const NodeGpus& on = s.cluster.on_node; on.timeline) {
    if (static_cast<std::size_t>(s.cluster.gpus) != on.gpus.size() ||
        (s.cluster.nodes != 1 && (on.node || (!on.shares.empty() && uses_links(s)))))
      throw InputError(fmt::format("job: cluster.on_node gives {} GPU(s){} for cluster.gpus {} on {} node(s)",
                                   on.gpus.size(), on.node || !on.shares.empty() ? " of one node" : "", s.cluster.gpus,
                                   s.cluster.nodes));
    if (!on.shares.empty() && on.shares.size() != on.gpus.size())
      throw InputError(fmt::format("job: cluster.on_node.shares has {} entries for {} GPUs: give one per GPU, or none",
                                   on.shares.size(), on.gpus.size()));
    if (s.cluster.device.share.gpu)
      throw InputError(
          "job: cluster.device.share and cluster.on_node both set: give the shared GPUs in on_node.shares");
    if (s.cluster.gpus > 1 && s.cluster.nodes == 1 && uses_links(s) && !on.node)
      throw InputError(fmt::format(
          "job: cluster.on_node.node is not set: {} GPUs that copy batches or all-reduce need their node's links",
          s.cluster.gpus));
  } else if (s.cluster.on_node.node) {
    throw InputError("job: cluster.on_node.node is set without on_node.timeline, the GPUs' timeline");
  }
  if (const ClusterGpus& c = s.cluster.on_cluster; c.network) {
    bool ok = s.cluster.on_node.timeline && static_cast<int>(c.nodes.size()) == s.cluster.nodes &&
              c.network_nodes.size() == c.nodes.size();
    for (const NodeGpus& n : c.nodes)
      ok = ok && n.timeline == s.cluster.on_node.timeline &&
           static_cast<int>(n.gpus.size()) * s.cluster.nodes == s.cluster.gpus;
    if (!ok)
      throw InputError(fmt::format(
          "job: cluster.on_cluster gives {} node(s) for cluster.gpus {} on {} node(s): give one entry per node, each "
          "with gpus / nodes GPUs on cluster.on_node.timeline",
          c.nodes.size(), s.cluster.gpus, s.cluster.nodes));
  }
  if (s.compute.time_divisor < 1 || s.compute.time_divisor > 1'000'000)
    throw SpecError("compute.time_divisor", std::to_string(s.compute.time_divisor), "accepted 1 to 1000000");
  if (s.compute.time_divisor > 1 && s.cluster.gpus > s.cluster.nodes)
    throw SpecError("compute.time_divisor", std::to_string(s.compute.time_divisor),
                    fmt::format("GPEmu's one process standing for {} GPUs (one per node) excludes {} {} on {} "
                                "node(s): give one GPU per node (or {} 1 for {} data-parallel ranks with all-reduce)",
                                s.compute.time_divisor, spec_field("cluster.gpus"), s.cluster.gpus, s.cluster.nodes,
                                spec_field("compute.time_divisor"), s.cluster.gpus));
  validate_node_data(s);
  if (s.cluster.real_nodes < 1 || s.cluster.real_node < 0 || s.cluster.real_node >= s.cluster.real_nodes ||
      (s.cluster.real_nodes > 1 && s.cluster.nodes != 1))
    throw InputError(
        fmt::format("job: cluster.real_node {} of real_nodes {} with nodes {}: a node of several "
                    "processes is one node of 0 to real_nodes - 1, and emulates only its own",
                    s.cluster.real_node, s.cluster.real_nodes, s.cluster.nodes));
  if (!s.schedule.checkpoints.empty() && !s.schedule.checkpoint)
    throw InputError("job: schedule.checkpoints are given but schedule.checkpoint (the I/O) is not set");
  if (s.schedule.eval.first_epoch > 0 && s.schedule.eval.every < 1)
    throw SpecError("schedule.eval.every", std::to_string(s.schedule.eval.every), "it must be at least 1");
}

bool uses_links(const JobSpec& spec) {
  return spec.compute.copy_batch || (spec.compute.all_reduce && spec.compute.step_time == StepTime::CostModel);
}

}  // namespace gpemu
