// The processes of a multi-node job in real mode, one per node (launch_env.h),
// and the network part of each step's gradient all-reduce as a real
// collective among them: gloo's ring all-reduce over its TCP transport,
// moving the gradient's bytes, so the real network (or `gpemu netns`'s
// shaped links) decides how long it takes.
//
// What is exchanged (docs/train.md, "Real nodes"): the hierarchical
// all-reduce's middle step. A node of G emulated GPUs all-reduces a step's
// B gradient bytes inside the node on its modelled links; then each local
// GPU g (a rail) all-reduces B/G bytes with the GPUs g of the other nodes
// over gloo, one gloo context per rail, so a node's NIC carries the
// 2(M-1)/M x B bytes of the modelled network's ring. The buffer's first two
// floats carry 1 and the step's number, so a rank that is out of step with
// the others is an error, not a silent mismatch.
//
// A rank that dies: its TCP connections close and the others' collective
// fails at once; a rank that hangs: the others' collective times out. Either
// way the error names the rank that went away (the rendezvous store saw its
// connection close, tcp_store.h), or says that none did and which timeout passed.
//
// Thread safety: exchange() for different local ranks may run at once (each
// its own rail); one call per rail at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dist/launch_env.h"
#include "dist/tcp_store.h"

namespace gpemu::dist {

struct NodeGroupOptions {
  int local_gpus = 1;                // G: rails
  std::uint64_t gradient_bytes = 0;  // B: a step's gradients on one GPU
  std::chrono::milliseconds timeout{30'000};
};

class NodeGroup {
 public:
  // Rendezvous with the other ranks (rank 0 serves the store at
  // MASTER_ADDR:MASTER_PORT) and connect one gloo context per rail.
  // InputError when the rendezvous fails, naming what did not answer.
  NodeGroup(const LaunchEnv& env, const NodeGroupOptions& options);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  int node() const;
  int nodes() const;
  // The address other nodes reach this one at (the source address of its route to MASTER_ADDR).
  const std::string& address() const;
  std::uint64_t rail_bytes() const;  // B/G, rounded up to whole floats

  // The all-reduce of `step`'s bytes on rail `local_gpu`; blocks for the real
  // transfer. Error naming the rank that went away, or the timeout.
  void exchange(int local_gpu, std::uint64_t step);
  // The rendezvous store, for what else the nodes trade (cache_peer.h's
  // addresses and directory), and the timeout of every wait on it.
  TcpStoreClient& store();
  std::chrono::milliseconds timeout() const;
  // Throws the Error a failed exchange throws: this rank, the rank the store
  // saw go away (or that none did), `during` and `reason`.
  [[noreturn]] void fail(const std::string& during, const std::string& reason) const;
  // Exchanges so far, and their summed wall time (all rails).
  std::uint64_t exchanges() const;
  double exchange_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether this gpemu was built with gloo (libgloo-dev); without it NodeGroup
// throws InputError saying so.
bool have_gloo();

}  // namespace gpemu::dist
