// The distributed cache across real nodes (one process per node, launch_env.h):
// each node serves the samples its loader cache holds to the other nodes over
// TCP, and asks them for the samples they hold (docs/pipeline.md,
// "Distributed cache across real nodes").
//
// Frames (integers big-endian): a client opens with the 8 bytes "GPCACHE1",
// which the server answers with the same 8; then each request is 'F' and the
// sample's index (u64), answered by 'H', its length (u64) and its bytes, or
// by 'M' (not held). A frame of another kind, or a length above
// CachePeerLimits::max_item_bytes, ends the connection: the server closes it,
// the client throws an Error saying what came.
//
// Thread safety: a server's lookup runs on its connection threads at once; a
// client may fetch from several threads at once (each takes a connection of
// its own from a pool).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dist/node_group.h"

namespace gpemu::dist {

struct CachePeerLimits {
  std::uint64_t max_item_bytes = std::uint64_t{1} << 30;  // a sample larger than this is a bad frame
  std::chrono::milliseconds timeout{30'000};              // connecting, and each answer
};

// The bytes of sample `index` this node's cache holds, or nullopt. The span
// must stay valid (a loader cache's bytes do: it never evicts).
using CachePeerLookup = std::function<std::optional<std::span<const std::byte>>(std::uint64_t index)>;

class CachePeerServer {
 public:
  // Listens on `addr` (an IPv4 address or a name) at a port the kernel picks;
  // InputError naming the address when it cannot.
  CachePeerServer(const std::string& addr, CachePeerLookup lookup, CachePeerLimits limits = {});
  ~CachePeerServer();
  CachePeerServer(const CachePeerServer&) = delete;
  CachePeerServer& operator=(const CachePeerServer&) = delete;
  int port() const { return port_; }
  std::uint64_t hits_served() const { return hits_; }
  std::uint64_t misses_served() const { return misses_; }
  std::uint64_t bytes_served() const { return bytes_; }

 private:
  void accept_loop();
  void serve(int fd);

  CachePeerLookup lookup_;
  CachePeerLimits limits_;
  int listen_fd_ = -1, port_ = 0, wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, bytes_{0};
  std::mutex mu_;
  std::vector<int> clients_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

class CachePeerClient {
 public:
  // The server of node `rank` at `addr`:`port` (nothing is connected yet).
  CachePeerClient(int rank, std::string addr, int port, CachePeerLimits limits = {});
  ~CachePeerClient();
  CachePeerClient(const CachePeerClient&) = delete;
  CachePeerClient& operator=(const CachePeerClient&) = delete;

  // Sample `index` from the peer: true with its bytes in `out`, false when the
  // peer does not hold it. Error naming the rank and its address when the
  // peer cannot be reached, closes the connection (its process ended), does
  // not answer within the timeout, or answers with a bad frame.
  bool fetch(std::uint64_t index, std::vector<std::byte>& out);
  int rank() const { return rank_; }
  const std::string& where() const { return where_; }

 private:
  int connect_one();
  int rank_;
  std::string addr_, where_;
  int port_;
  CachePeerLimits limits_;
  std::mutex mu_;
  std::vector<int> idle_;  // connections no fetch is using
};

// A node's cache server and its clients of the other nodes' servers, found
// through the node group's rendezvous store (each server's address under
// gpemu/cache/addr/<rank>), and the trade of the lists each node admitted in
// an epoch, through the store as well (real_distributed_cache.h keeps the
// directory they make). Errors name the rank that went away as a failed
// all-reduce does (NodeGroup::fail).
class CachePeers {
 public:
  // Serves `lookup` at the node's address (NodeGroup::address()) and publishes
  // it. `what` says what is served (the cache's kind and dataset): every rank
  // must serve the same, else an index would name another sample there;
  // InputError naming two ranks that differ, and what to give.
  CachePeers(std::shared_ptr<NodeGroup> group, CachePeerLookup lookup, std::uint64_t max_item_bytes,
             const std::string& what);
  // Sample `index` from node `node`'s cache (CachePeerClient::fetch).
  bool fetch(int node, std::uint64_t index, std::vector<std::byte>& out);
  // Every node's list for `round` (this node's is `mine`), indexed by rank.
  std::vector<std::vector<std::uint64_t>> exchange(std::uint64_t round, const std::vector<std::uint64_t>& mine);
  const CachePeerServer& server() const { return *server_; }
  NodeGroup& group() { return *group_; }

 private:
  CachePeerClient& client(int node);
  std::shared_ptr<NodeGroup> group_;
  CachePeerLimits limits_;
  std::unique_ptr<CachePeerServer> server_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<CachePeerClient>> clients_;
};

}  // namespace gpemu::dist
