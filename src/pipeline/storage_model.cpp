// The storage model: device presets and files, the queued server, and the
// page cache in front of it. Every preset's figures and their sources:
// docs/pipeline.md, "Storage".
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "common/json_spec_file.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/spec_error.h"

namespace gpemu::pipeline {
namespace {

constexpr int kMaxParallelism = 65536;
constexpr double kMinBandwidthMbS = 1e-3;

StorageDevice device(std::string name, double latency_us, double mb_s, int parallelism, double total_mb_s,
                     std::string source) {
  StorageDevice d;
  d.name = std::move(name);
  d.latency = static_cast<Duration>(std::llround(latency_us * kMicrosecond));
  d.bytes_per_s = mb_s * 1e6;
  d.parallelism = parallelism;
  d.total_bytes_per_s = total_mb_s * 1e6;
  d.source = std::move(source);
  return d;
}

const std::vector<StorageDevice>& presets() {
  static const std::vector<StorageDevice> all = {
      // Least squares of request time = latency + size / rate over the five
      // points of GPEmu's measured random-read throughput of its testbed HDD
      // (64 KB to 1 MB requests, KB = 1000 bytes): 4.47 ms, 109.4 MB/s; the
      // fit is within 5 % of every point.
      device("hdd", 4470, 109.4, 1, 0,
             "GPEmu (VLDB 2025) testbed HDD, random-read throughput vs request size, fitted: 4.47 ms + size / "
             "109.4 MB/s, one request at a time"),
      device("ssd", 90, 530, 32, 530,
             "SATA III SSD class: 6 Gb/s link (8b/10b) of which about 530 MB/s is data; about 90 us per random "
             "read; NCQ depth 32"),
      device("nvme", 80, 3200, 64, 3200,
             "PCIe 3.0 x4 NVMe SSD class: about 3.2 GB/s sequential read, about 80 us per random read"),
      device("nfs", 500, 117, 16, 117,
             "NFS over 1 GbE: 125 MB/s line rate, about 117 MB/s of TCP payload (1500-byte MTU); about 0.5 ms "
             "per request (RPC round trip and server lookup); 16 requests in flight (the Linux client's default "
             "RPC slots)"),
  };
  return all;
}

std::string preset_list() {
  std::string names;
  for (const StorageDevice& d : presets()) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

Duration seconds_ns(double bytes, double rate) { return ns_from_double(bytes * 1e9 / rate, bytes / rate, "s"); }

}  // namespace

std::vector<std::string> storage_presets() {
  std::vector<std::string> names;
  for (const StorageDevice& d : presets()) names.push_back(d.name);
  return names;
}

void validate(const StorageDevice& d) {
  if (d.latency < 0 || !std::isfinite(d.bytes_per_s) || !(d.bytes_per_s > 0) || !std::isfinite(d.total_bytes_per_s) ||
      d.total_bytes_per_s < 0 || d.parallelism < 1 || d.parallelism > kMaxParallelism || !std::isfinite(d.iops) ||
      d.iops < 0)
    throw InputError(fmt::format(
        "storage '{}': the latency must not be negative, the bandwidth must be positive (the total one positive or "
        "0), the IOPS positive or 0 (no limit), and the parallelism from 1 to {}",
        d.name, kMaxParallelism));
}

StorageDevice parse_storage(std::string_view spec) {
  for (const StorageDevice& d : presets())
    if (d.name == spec) return d;
  if (spec.empty())
    throw SpecError("data.model.storage", "", fmt::format("is empty: give {} or a JSON file", preset_list()));
  const std::string path(spec);
  const JsonSpecFile j("storage file", path,
                       {"name", "latency_us", "bandwidth_mb_s", "parallelism", "total_bandwidth_mb_s", "iops",
                        "source"},
                       fmt::format("a preset ({})", preset_list()));
  // Bandwidths from 1 KB/s: anything slower would put a sample's read past the clock's range.
  const double total = j.number("total_bandwidth_mb_s", false, 0, 0, 1e9);
  if (total > 0 && total < kMinBandwidthMbS)
    throw InputError(
        fmt::format("storage file {}: 'total_bandwidth_mb_s' is {}; accepted 0 (no shared channel) or {} "
                    "to 1e9",
                    path, total, kMinBandwidthMbS));
  StorageDevice d = device(j.text("name", path), j.number("latency_us", true, 0, 0, 1e7),
                           j.number("bandwidth_mb_s", true, 0, kMinBandwidthMbS, 1e9),
                           static_cast<int>(j.whole("parallelism", false, 1, 1, kMaxParallelism)), total, "");
  // From 1e-3 requests a second (one a quarter hour); 0: no limit.
  d.iops = j.number("iops", false, 0, 0, 1e9);
  if (d.iops > 0 && d.iops < 1e-3)
    throw InputError(fmt::format("storage file {}: 'iops' is {}; accepted 0 (no limit) or 0.001 to 1e9", path, d.iops));
  d.source = j.text("source", fmt::format("user file {}", path));
  validate(d);
  return d;
}

StorageDevice shared_by(const StorageDevice& d, int ranks) {
  if (ranks <= 1) return d;
  StorageDevice s = d;
  s.total_bytes_per_s = d.total_bytes_per_s / ranks;
  s.iops = d.iops / ranks;
  if (ranks <= d.parallelism) {
    s.parallelism = d.parallelism / ranks;
  } else {
    // Fewer slots than loaders: each gets one slot that serves at
    // parallelism / ranks of a slot's pace.
    const double stretch = static_cast<double>(ranks) / d.parallelism;
    s.parallelism = 1;
    s.latency = static_cast<Duration>(std::llround(static_cast<double>(d.latency) * stretch));
    s.bytes_per_s = d.bytes_per_s / stretch;
  }
  return s;
}

StorageServer::StorageServer(StorageDevice device) : device_(std::move(device)) {
  validate(device_);
  slot_free_.assign(static_cast<std::size_t>(device_.parallelism), 0);
}

Time StorageServer::serve(Time arrival, std::uint64_t bytes) {
  if (arrival < last_arrival_)
    throw std::logic_error(fmt::format("storage server: request at {} ns arrived before the previous one at {} ns",
                                       arrival, last_arrival_));
  last_arrival_ = arrival;
  // The slot free first; every slot is busy until its request ends, so FIFO.
  std::pop_heap(slot_free_.begin(), slot_free_.end(), std::greater<>());
  Time start = std::max(arrival, slot_free_.back());
  if (device_.iops > 0) {
    start = std::max(start, request_free_);
    request_free_ = start + seconds_ns(1.0, device_.iops);
  }
  const double b = static_cast<double>(bytes);
  Time end = start + device_.latency + seconds_ns(b, device_.bytes_per_s);
  if (device_.total_bytes_per_s > 0) {
    channel_free_ = std::max(channel_free_, start + device_.latency) + seconds_ns(b, device_.total_bytes_per_s);
    end = std::max(end, channel_free_);
  }
  slot_free_.back() = end;
  std::push_heap(slot_free_.begin(), slot_free_.end(), std::greater<>());
  ++requests_;
  bytes_ += bytes;
  return end;
}

void StorageServer::reshare(StorageDevice device) {
  validate(device);
  // The slots' ends, latest first: those in service keep theirs.
  std::sort(slot_free_.begin(), slot_free_.end(), std::greater<>());
  slot_free_.resize(static_cast<std::size_t>(device.parallelism), 0);
  std::make_heap(slot_free_.begin(), slot_free_.end(), std::greater<>());
  device_ = std::move(device);
}

StorageTenancy::StorageTenancy(std::shared_ptr<StorageShare> share) : share_(std::move(share)) {
  if (!share_) throw std::invalid_argument("StorageTenancy: null share");
  ++share_->tenants;
}

StorageTenancy::~StorageTenancy() { --share_->tenants; }

PageCacheModel::PageCacheModel(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

bool PageCacheModel::access(std::size_t key, std::uint64_t bytes) {
  if (const auto it = where_.find(key); it != where_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return true;
  }
  if (bytes > capacity_) return false;
  while (used_ + bytes > capacity_) {
    used_ -= lru_.back().second;
    where_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, bytes);
  where_.emplace(key, lru_.begin());
  used_ += bytes;
  return false;
}

void PageCacheModel::clear() {
  lru_.clear();
  where_.clear();
  used_ = 0;
}

}  // namespace gpemu::pipeline
