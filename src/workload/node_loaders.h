// The modelled loaders of a job over several nodes: which node a rank's
// loader is on, what of the node it shares with the node's other ranks, the
// shared storage server, and the distributed cache spanning the nodes
// (job.h, DataSpec; pipeline.h, "distributed cache").
#pragma once

#include <memory>

#include "gpemu/job.h"
#include "gpemu/pipeline.h"

namespace gpemu {

// Ranks on one node: an even split of the job's GPUs (a job on one node: all).
int ranks_per_node(const JobSpec& spec);
// The cache the job's loaders share, or null (no distributed cache).
std::shared_ptr<pipeline::DistributedCache> make_distributed_cache(const JobSpec& spec);
// Rank `rank`'s loader model for a phase's data (the job's, or its
// evaluation's), placed on the rank's node.
pipeline::LoaderModelOptions node_loader_model(const JobSpec& spec, const DataSpec& phase, int rank,
                                               std::shared_ptr<pipeline::DistributedCache> cache);
// InputError naming the field for a distributed cache or shared storage the
// job cannot have (no modelled loader, no loader cache, no storage device).
void validate_node_data(const JobSpec& spec);

}  // namespace gpemu
