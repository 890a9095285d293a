#include "workload/node_loaders.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/spec_error.h"

namespace gpemu {
namespace {

// A node's remote reads of a distributed cache as a queued server: a
// request's round trip, then its bytes at the NIC's payload rate, which all
// of the node's requests pass one after another.
pipeline::StorageDevice fetch_device(const JobSpec& spec) {
  const NetworkSpec& net = spec.cluster.network;
  const DataSpec& d = spec.data;
  pipeline::StorageDevice f;
  f.name = fmt::format("{} NIC", net.name.empty() ? std::string("network") : net.name);
  f.latency = d.remote_fetch_latency >= 0 ? d.remote_fetch_latency : 2 * net.latency;
  f.bytes_per_s = net.nic_bytes_per_s() > 0 ? net.nic_bytes_per_s() : 1e12;
  f.total_bytes_per_s = f.bytes_per_s;
  const int workers = ranks_per_node(spec) * std::max(1, d.loader.num_workers);
  f.parallelism = std::clamp(d.remote_fetch_slots > 0 ? d.remote_fetch_slots : workers, 1, 65536);
  f.source = fmt::format("{}: {} us per request, {} at once", net.source, to_us(f.latency), f.parallelism);
  return f;
}

}  // namespace

int ranks_per_node(const JobSpec& spec) {
  const int nodes = std::max(1, spec.cluster.nodes);
  return spec.cluster.gpus % nodes == 0 ? std::max(1, spec.cluster.gpus / nodes) : spec.cluster.gpus;
}

void validate_node_data(const JobSpec& spec) {
  const DataSpec& d = spec.data;
  const bool modelled = d.source == DataSource::Modelled;
  if (d.distributed_cache != pipeline::DistributedCacheKind::None) {
    if (!modelled)
      throw SpecError("data.distributed_cache", std::string(pipeline::to_string(d.distributed_cache)),
                      fmt::format("a distributed cache is modelled: it needs the modelled loader (the virtual clock), "
                                  "not the {} source",
                                  d.source == DataSource::Loader ? "real loader" : "in-memory"));
    if (d.model.cache_bytes == 0)
      throw SpecError("data.model.cache_bytes", "0",
                      fmt::format("a {} distributed cache is made of the nodes' loader caches: give each node's",
                                  pipeline::to_string(d.distributed_cache)));
  }
  if (d.remote_fetch_slots < 0 || d.remote_fetch_slots > 65536)
    throw SpecError("data.remote_fetch_slots", std::to_string(d.remote_fetch_slots),
                    "accepted 0 (as many as the workers) to 65536");
  if (d.io_depth < 0 || d.io_depth > 65536)
    throw SpecError("data.io_depth", std::to_string(d.io_depth), "accepted 0 (no limit) to 65536");
  if (d.io_depth > 0 && !(modelled && d.model.storage))
    throw SpecError("data.io_depth", std::to_string(d.io_depth),
                    fmt::format("an I/O depth limits a modelled storage device's requests: give {} and the "
                                "modelled loader (the virtual clock) too",
                                spec_field("data.model.storage")));
  if (d.shared_storage && !(modelled && d.model.storage))
    throw SpecError("data.shared_storage", "",
                    fmt::format("is one modelled storage server for every node: give a storage device ({}) and the "
                                "modelled loader (the virtual clock)",
                                spec_field("data.model.storage")));
}

std::shared_ptr<pipeline::DistributedCache> make_distributed_cache(const JobSpec& spec) {
  const DataSpec& d = spec.data;
  if (d.source != DataSource::Modelled || d.distributed_cache == pipeline::DistributedCacheKind::None) return nullptr;
  return std::make_shared<pipeline::DistributedCache>(d.dataset.size(), std::max(1, spec.cluster.nodes),
                                                      d.distributed_cache, fetch_device(spec));
}

pipeline::LoaderModelOptions node_loader_model(const JobSpec& spec, const DataSpec& phase, int rank,
                                               std::shared_ptr<pipeline::DistributedCache> cache) {
  pipeline::LoaderModelOptions m = phase.model;
  const int per_node = ranks_per_node(spec);
  // The node's loader threads share its cores; its page cache, loader cache
  // and storage device are split among its ranks.
  if (m.loader_threads == 0) m.loader_threads = per_node * std::max(1, phase.loader.num_workers);
  m.ranks_sharing = per_node;
  m.storage_ranks_sharing = spec.data.shared_storage ? spec.cluster.gpus : 0;
  if (spec.data.io_depth > 0) m.storage_slots = std::max(1, spec.data.io_depth / per_node);
  m.node = std::min(rank / per_node, std::max(1, spec.cluster.nodes) - 1);
  m.distributed_cache = std::move(cache);
  return m;
}

}  // namespace gpemu
