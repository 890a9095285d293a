// `gpemu train` as one node of a job of several processes (torchrun, mpirun):
// the launcher's environment to a NodeGroup (src/dist) and the job spec's
// real_exchange (docs/train.md, "Real nodes").
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "dist/node_group.h"
#include "gpemu/clock.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/job/spec.h"
#include "gpemu/train.h"

namespace gpemu::cli {

// nullptr when the environment names no job of several processes. Otherwise
// checks the flags (the real clock, one node per process, a step that
// all-reduces), joins the other ranks and fills spec.cluster's real_node,
// real_nodes and real_exchange, and with a distributed cache and the real
// loader joins that too (join_distributed_cache); InputError naming what is wrong.
std::shared_ptr<dist::NodeGroup> join_real_nodes(
    JobSpec& spec, ClockKind clock, const CostModel& costs, double timeout_s,
    pipeline::DistributedCacheKind distributed_cache = pipeline::DistributedCacheKind::None);

// With a distributed cache (`kind` not None) and the real loader: the node's
// loaders share it with the other nodes' (spec.data.loader.distributed_cache,
// over dist::CachePeers). Needs the node's loader cache (spec.data.loader.cache).
void join_distributed_cache(JobSpec& spec, const std::shared_ptr<dist::NodeGroup>& group,
                            pipeline::DistributedCacheKind kind);
// This node's reads per epoch under the distributed cache (node: its rank).
std::vector<train::NodeEpochReads> real_node_epoch_reads(const JobSpec& spec, const RunRecord& rec);

// What the JSON says of it, and the note the text prints.
nlohmann::json real_nodes_json(const dist::NodeGroup& g);
std::string real_nodes_note(const dist::NodeGroup& g);

}  // namespace gpemu::cli
