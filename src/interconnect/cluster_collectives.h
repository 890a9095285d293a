// Collectives over a Cluster's GPUs besides the hierarchical all-reduce
// (ClusterCommunicator, gpemu/interconnect/cluster.h), built as it is: ring
// phases inside each node and, per local GPU index ("rail"), a ring among the
// nodes over the network, emulated as one transfer per GPU (the ring's total
// bytes after its step latencies). What one collective takes alone on idle
// links, for a caller that charges collectives one call at a time (the torch
// backend's emulated NCCL group, src/torch/runtime.h).
//
//   reduce_scatter(B): each node's ring reduce-scatter (GPU g holds B/L of
//     its node's sum), then per rail a ring reduce-scatter of that share
//     among the M nodes ((M-1)/M of it per GPU, M-1 step latencies).
//   all_gather(B, the output): per rail a ring all-gather among the nodes of
//     the rail's B/L share, then each node's ring all-gather of B.
//   broadcast(B, root): the root's rail carries B from node to node
//     (pipelined: every node's GPU of that rail moves B, M-1 step
//     latencies), then each node broadcasts from its GPU of that rail.
//
// Thread safety: as Cluster.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/interconnect/cluster.h"

namespace gpemu {

// The network phase of a cluster collective: from `entry`, on every rail
// (local GPU index), or on `only_rail` when it is 0 or more, every node's GPU
// of that rail sends `bytes` over its rail's NIC and the switch after `steps`
// network step latencies (GPUDirect RDMA: capped at the GPU's pinned PCIe
// rate). Returns, per rail (index: the rail; an unresolved Completion for a
// rail left out), when every node's transfer of it is done. streams: one per
// GPU, rank order.
std::vector<Completion> network_phase(Cluster& cluster, std::span<Stream* const> streams, const Completion& entry,
                                      double bytes, int steps, std::optional<Engine> engine, const std::string& name,
                                      int only_rail = -1);

// The collectives at the top of the file; one Completion per rank. On one
// node they are that node's Communicator's.
std::vector<Completion> cluster_reduce_scatter(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                               const CollectiveOptions& options = {});
std::vector<Completion> cluster_all_gather(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                           const CollectiveOptions& options = {});
std::vector<Completion> cluster_broadcast(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                          int root, const CollectiveOptions& options = {});

// How long one collective (`kind`: all_reduce, broadcast from rank 0,
// all_gather or reduce_scatter; `bytes` as above) takes alone on idle links
// among `ranks` GPUs of `gpu`: one node's ring when `nodes` is 1 (any number
// of GPUs), else `nodes` nodes of ranks / nodes GPUs joined by `network` and
// the cluster's hierarchy, laid out as `gpemu train --nodes` lays out its
// GPUs (plan_cluster). InputError for another kind or an impossible layout.
Duration collective_time_alone(const GpuSpec& gpu, std::string_view kind, std::uint64_t bytes, int ranks, int nodes,
                               const NetworkSpec& network);

}  // namespace gpemu
