// Collectives (all-reduce, reduce-scatter, all-gather, broadcast) among GPUs
// of a Node, issued as operations on one stream per GPU, as NCCL does: each
// GPU's part waits for earlier work on its stream, later work on the stream
// waits for it, and work on other streams runs alongside.
//
// Ring algorithm. The GPUs form the node's ring (Node::plan_ring). An
// all-reduce of B bytes over N GPUs takes 2(N-1) steps; in each step every GPU
// sends B/N bytes to its successor over that hop's path, first reducing
// (N-1 steps, reduce-scatter), then forwarding (N-1 steps, all-gather). A
// step on a GPU starts when its own previous step is done and its
// predecessor's previous step (the data it forwards) has arrived, so a late
// GPU delays the whole ring, as with NCCL. The first step also waits for the
// successor to reach the collective (it must be receiving), and a GPU's part
// ends when its last step is done and its last data has arrived.
// Time, on idle links: launch_latency + 2(N-1) * (step_latency + B/N / bw).
//
// Collective transfers use no copy engine (NCCL moves data with SM threads)
// and, by default, no compute engine either: NCCL kernels take a few SMs and
// run concurrently with compute kernels, which is what lets gradient
// all-reduce overlap backward. CollectiveOptions::engine puts them on an
// engine instead. Details and what is left out: docs/interconnect.md.
//
// Thread safety: as Stream; a Communicator is used by one host thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gpemu/device/device.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

enum class CollectiveAlgorithm { Ring };
std::string_view to_string(CollectiveAlgorithm a);

struct CollectiveOptions {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  // Fixed cost of starting the collective on each GPU (kernel launch, setup).
  Duration launch_latency = 10 * kMicrosecond;
  // Latency of each step before its bytes flow. Default: the hop's path latency.
  std::optional<Duration> step_latency;
  // Reduction steps read the local and the received chunk and write the
  // result: 3 bytes of memory traffic per byte reduced, which caps a reducing
  // step at memory bandwidth / 3. Off: data moves at link speed only.
  bool reduction_cost = true;
  // Engine the steps occupy; none by default (see top of file).
  std::optional<Engine> engine;
  // Ring collectives (all_reduce, reduce_scatter, all_gather) emulated as one
  // transfer per GPU and phase instead of one per step: each GPU moves its
  // phase's bytes, steps x B/N, over its ring hop after steps x the step
  // latency, starting when every GPU has entered the phase and done, for
  // every GPU, when all have. The same time as the steps when the GPUs enter
  // together and each hop's rate holds for the phase; a late GPU then delays
  // the whole phase rather than the steps after it. O(1) operations per GPU
  // instead of O(N): the cluster's in-node phases use it (docs/interconnect.md).
  bool ring_as_flows = false;
  // Broadcast is pipelined in chunks of this size along the ring.
  std::uint64_t pipeline_chunk_bytes = 4ull << 20;
  // Trace name; default the collective's ("all_reduce", ...).
  std::string_view name;
};

// What data-parallel training needs of a group of GPUs: its ranks' devices
// and an all-reduce over them (one node's ring, or a cluster's hierarchy).
class AllReduceGroup {
 public:
  virtual ~AllReduceGroup();
  virtual int size() const = 0;
  virtual Device& device(int rank) const = 0;
  // Sum of `bytes` on every rank, result on every rank; one Completion per rank.
  // With `after` (one per rank, or empty), rank r also starts only after
  // after[r], as if its stream had waited for it (DDP: the point where the
  // rank's backward produced the bucket), without an operation for the wait.
  virtual std::vector<Completion> all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                             const CollectiveOptions& options = {},
                                             std::span<const Completion> after = {}) = 0;
};

// The GPUs a collective runs among, in rank order, and the ring it uses (like
// an ncclComm). Streams are passed per call, one per rank.
class Communicator : public AllReduceGroup {
 public:
  // All GPUs of the node, rank = position.
  explicit Communicator(Node& node);
  // These node positions as ranks 0..n-1 (InputError for unknown or repeated GPUs).
  Communicator(Node& node, std::vector<int> gpus);
  ~Communicator() override;

  Node& node() const { return *node_; }
  int size() const override { return static_cast<int>(gpus_.size()); }
  Device& device(int rank) const override { return node_->device(gpus_.at(rank)); }
  const std::vector<int>& gpus() const { return gpus_; }
  const RingPlan& ring() const { return ring_; }

  // Each returns one Completion per rank: when that rank's part is done (its
  // stream's tail afterwards). streams[r] must be a stream of rank r's device.
  //
  // Sum of `bytes` on every rank, result on every rank.
  std::vector<Completion> all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                     const CollectiveOptions& options = {},
                                     std::span<const Completion> after = {}) override;
  // Each rank ends with the reduction of its 1/N share of `bytes` (the input size).
  std::vector<Completion> reduce_scatter(std::span<Stream* const> streams, std::uint64_t bytes,
                                         const CollectiveOptions& options = {});
  // Each rank contributes bytes/N; every rank ends with all `bytes` (the output size).
  std::vector<Completion> all_gather(std::span<Stream* const> streams, std::uint64_t bytes,
                                     const CollectiveOptions& options = {});
  // `bytes` from rank `root` to every rank, pipelined along the ring from the root.
  std::vector<Completion> broadcast(std::span<Stream* const> streams, std::uint64_t bytes, int root,
                                    const CollectiveOptions& options = {});

 private:
  friend class ClusterCommunicator;
  void check_streams(std::span<Stream* const> streams, std::string_view what) const;
  // Ranks enter after their stream's tail and after[r] (when `after` is not empty).
  std::vector<Completion> run_ring(std::span<Stream* const> streams, double chunk_bytes, int reduce_steps,
                                   int forward_steps, const CollectiveOptions& options, std::string_view what,
                                   std::span<const Completion> after = {});
  // The ring as flows (CollectiveOptions::ring_as_flows). `gate` completes
  // when every rank's part has; with exits, each rank's stream then gets a
  // marker that ends there (`done`, per rank); without, the streams' tails
  // are their own last transfer and a caller composing a larger collective
  // orders what follows after the gate.
  struct RingFlows {
    std::vector<Completion> done;
    Completion gate;
  };
  RingFlows run_ring_flows(std::span<Stream* const> streams, double chunk_bytes, int reduce_steps, int forward_steps,
                           const CollectiveOptions& options, std::string_view what, std::span<const Completion> after,
                           bool exits);

  Node* node_;
  std::vector<int> gpus_;
  RingPlan ring_;
  std::vector<int> rank_at_;  // ring position -> rank
};

}  // namespace gpemu
