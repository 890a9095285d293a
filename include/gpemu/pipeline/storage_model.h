// Storage as a queued server, for the modelled loader: a device serves
// `parallelism` requests at once (a disk's one head; an SSD's or NFS
// server's concurrent requests), first come first served. A request of b
// bytes that starts service at t ends at
//
//   max(t + latency + b / bytes_per_s,  channel_free + b / total_bytes_per_s)
//
// where the second term (only when total_bytes_per_s > 0) is a channel all
// requests' bytes pass one after another (a SATA link, a NIC), and
// channel_free is when it finished the previous request's bytes. A slot is
// busy until its request ends. Presets (docs/pipeline.md "Storage" gives
// every figure's source):
//   hdd:  4.4 ms + b / 108 MB/s, 1 request at a time (GPEmu's testbed HDD,
//         its measured random-read throughput per request size, fitted)
//   ssd:  90 us + b / 530 MB/s, 32 at once, 530 MB/s in all (SATA III SSD)
//   nvme: 80 us + b / 3.2 GB/s, 64 at once, 3.2 GB/s in all (PCIe 3 x4 NVMe)
//   nfs:  500 us + b / 117 MB/s, 16 at once, 117 MB/s in all (NFS over 1 GbE)
// A JSON file gives its own: {"name", "latency_us", "bandwidth_mb_s",
// "parallelism", "total_bandwidth_mb_s" (optional), "iops" (optional), "source" (optional)}.
//
// PageCacheModel is the kernel's page cache in front of it as an LRU of
// samples with a capacity in bytes (what a cgroup memory limit gave the
// original experiments).
//
// StorageShare is a device several jobs' modelled loaders share (a
// session's node disk, or one store every node reads: session.h,
// SessionSpec::data_storage): each job reading it holds a StorageTenancy
// while it runs, and each of its loaders serves its requests at an even
// share of the device among the tenants (shared_by the job's ranks sharing
// it x the tenants), the count read as each request is served, as a CPU
// pool's threads are read as a batch is costed. The loaders keep servers of
// their own: a job's loaders are simulated lazily and apart from the
// others', so their requests do not reach one queue in time order
// (docs/decisions.md, "The jobs' data through the session's storage").
// Thread safety: StorageServer and PageCacheModel one owner each (a modelled
// loader); StorageShare and StorageTenancy any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpemu/time.h"

namespace gpemu::pipeline {

struct StorageDevice {
  std::string name;
  Duration latency = 0;          // per request: seek and rotation, flash read, RPC round trip
  double bytes_per_s = 0;        // one request's transfer rate
  int parallelism = 1;           // requests in service at once
  double total_bytes_per_s = 0;  // the shared channel; 0: none
  // Requests the device (a file server's daemons, a network store) starts
  // per second in all; 0: no limit beyond the slots. A request then starts
  // no earlier than 1 / iops after the previous one started.
  double iops = 0;
  std::string source;  // where the figures come from
};

// "hdd", "ssd", "nvme", "nfs", or a JSON file (see above). InputError naming
// the spec (or the file and key) and what is accepted.
StorageDevice parse_storage(std::string_view spec);
std::vector<std::string> storage_presets();
// InputError unless latency >= 0, bandwidths > 0 (total >= 0) and finite,
// and parallelism in [1, 65536].
void validate(const StorageDevice& d);
// The device as one of `ranks` loaders that share it sees it (each gets an
// even share of its parallelism and bandwidth; fewer slots than ranks
// stretch a slot's service time): the modelled loaders of a job's ranks do
// not queue at one server together.
StorageDevice shared_by(const StorageDevice& d, int ranks);

class StorageServer {
 public:
  explicit StorageServer(StorageDevice device);  // validates it
  // A request of `bytes` that arrives at `arrival` (not earlier than the
  // previous request's arrival); returns when it ends.
  Time serve(Time arrival, std::uint64_t bytes);
  const StorageDevice& device() const { return device_; }
  // Serves the requests from now on as `device` (validated): a loader whose
  // share of a device changed. Requests in service keep their slots and
  // ends: with fewer slots a new request waits until enough of them end,
  // with more the new slots are free at once; the channel and the iops pace
  // carry on.
  void reshare(StorageDevice device);
  std::uint64_t requests() const { return requests_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  StorageDevice device_;
  std::vector<Time> slot_free_;  // a min-heap
  Time channel_free_ = 0;
  Time request_free_ = 0;  // iops: when the next request may start
  Time last_arrival_ = 0;
  std::uint64_t requests_ = 0, bytes_ = 0;
};

// A device's tenants now (jobs reading it); see the top of the file.
struct StorageShare {
  std::atomic<int> tenants{0};
};

// A job's tenancy of a StorageShare: it counts while this object lives (a
// job's loaders hold it through LoaderModelOptions::storage_tenancy).
class StorageTenancy {
 public:
  explicit StorageTenancy(std::shared_ptr<StorageShare> share);
  ~StorageTenancy();
  StorageTenancy(const StorageTenancy&) = delete;
  StorageTenancy& operator=(const StorageTenancy&) = delete;
  int tenants() const { return std::max(1, share_->tenants.load()); }

 private:
  std::shared_ptr<StorageShare> share_;
};

class PageCacheModel {
 public:
  explicit PageCacheModel(std::uint64_t capacity_bytes);
  // Whether sample `key` of `bytes` is resident (a hit, now the most recently
  // used); a miss makes it resident, evicting the least recently used
  // samples, unless it is larger than the capacity.
  bool access(std::size_t key, std::uint64_t bytes);
  bool contains(std::size_t key) const { return where_.count(key) != 0; }  // without touching it
  void clear();
  std::uint64_t capacity_bytes() const { return capacity_; }
  std::uint64_t resident_bytes() const { return used_; }

 private:
  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::list<std::pair<std::size_t, std::uint64_t>> lru_;  // front: most recent
  std::unordered_map<std::size_t, std::list<std::pair<std::size_t, std::uint64_t>>::iterator> where_;
};

}  // namespace gpemu::pipeline
