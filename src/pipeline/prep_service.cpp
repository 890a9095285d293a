// A preprocessing service's remote workers and network for the modelled
// loader (include/gpemu/prep_service.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "pipeline/prep_service_model.h"

namespace gpemu::pipeline {
namespace {

Duration cpu_for_bytes(std::uint64_t bytes, double bytes_per_s) {
  const double s = static_cast<double>(bytes) / bytes_per_s;
  return ns_from_double(s * 1e9, s, "s");
}

void check_rate(double v, const char* what) {
  if (!(v > 0) || !std::isfinite(v))
    throw InputError(fmt::format("preprocessing service: {} {} is impossible: it must be positive", what, v));
}

}  // namespace

std::string_view to_string(PrepOffload o) {
  switch (o) {
    case PrepOffload::None: return "none";
    case PrepOffload::Read: return "read";
    case PrepOffload::Decode: return "decode";
    case PrepOffload::All: return "all";
  }
  return "?";
}

PrepOffload parse_prep_offload(std::string_view name, std::string_view flag) {
  for (PrepOffload o : {PrepOffload::None, PrepOffload::Read, PrepOffload::Decode, PrepOffload::All})
    if (name == to_string(o)) return o;
  throw InputError(
      fmt::format("unknown {} '{}': accepted none, read (workers read, the client decodes), decode "
                  "(workers read and decode, the client batches) or all",
                  flag, name));
}

void validate(const PrepServiceOptions& o) {
  if (o.workers < 0)
    throw InputError(fmt::format("preprocessing service: {} workers is impossible: use 0 or more", o.workers));
  if (o.cpus_per_worker < 1)
    throw InputError(
        fmt::format("preprocessing service: {} CPUs a worker is impossible: at least 1", o.cpus_per_worker));
  if (!(o.local_share >= 0 && o.local_share <= 1))
    throw InputError(fmt::format(
        "preprocessing service: a local share of {} is impossible: the client's share of the batches is 0 to 1",
        o.local_share));
  check_rate(o.nic_bytes_per_s, "NIC rate (bytes/s)");
  check_rate(o.serialize_bytes_per_s, "serialisation rate (bytes/s)");
  check_rate(o.deserialize_bytes_per_s, "deserialisation rate (bytes/s)");
  if (o.latency < 0) throw InputError("preprocessing service: a negative network latency is impossible");
  if (o.worker_buffer < 1)
    throw InputError(
        fmt::format("preprocessing service: a worker buffer of {} batches is impossible: at least 1", o.worker_buffer));
}

std::size_t prep_local_batches(std::size_t batches, double local_share) {
  return static_cast<std::size_t>(std::llround(std::clamp(local_share, 0.0, 1.0) * static_cast<double>(batches)));
}

std::string describe(const PrepServiceOptions& o) {
  return fmt::format("preprocessing service: {} remote worker{} of {} CPU{}, offload {}{}, {:.3g} GB/s network{}",
                     o.workers, o.workers == 1 ? "" : "s", o.cpus_per_worker, o.cpus_per_worker == 1 ? "" : "s",
                     to_string(o.offload),
                     o.local_share > 0 ? fmt::format(" ({:.3g} of the batches made locally)", o.local_share)
                                       : std::string(),
                     o.nic_bytes_per_s / 1e9, o.network.empty() ? std::string() : " (" + o.network + ")");
}

PrepServiceModel::PrepServiceModel(PrepServiceOptions options) : o_(std::move(options)) {
  validate(o_);
  if (o_.workers < 1) throw InputError("preprocessing service: it needs at least one worker");
}

void PrepServiceModel::begin_epoch(Time start, std::size_t batches) {
  epoch_start_ = start;
  remote_.clear();
  local_quota_ = prep_local_batches(batches, o_.local_share);
  remote_quota_ = batches - local_quota_;
  local_taken_ = 0;
  worker_free_.assign(static_cast<std::size_t>(o_.workers), start);
  nic_free_ = std::max(nic_free_, start);
}

Time PrepServiceModel::arrival(std::size_t batch, Duration prefix_cpu, std::uint64_t bytes,
                               const std::vector<Time>& delivered, bool take) {
  const std::size_t j = remote_.size();
  const auto workers = static_cast<std::size_t>(o_.workers);
  const std::size_t ahead = workers * static_cast<std::size_t>(o_.worker_buffer);
  Time start = std::max(worker_free_[j % workers], epoch_start_);
  if (j >= ahead) start = std::max(start, delivered[remote_[j - ahead]]);
  const Duration cpu = prefix_cpu + cpu_for_bytes(bytes, o_.serialize_bytes_per_s);
  const Time done = start + static_cast<Duration>(std::llround(static_cast<double>(cpu) / o_.cpus_per_worker));
  const Time arrived = std::max(done + o_.latency, nic_free_) + cpu_for_bytes(bytes, o_.nic_bytes_per_s);
  if (take) {
    remote_.push_back(batch);
    ++remote_batches_;
    worker_free_[j % workers] = done;
    nic_free_ = arrived;
  }
  return arrived;
}

Duration PrepServiceModel::receive_cpu(std::uint64_t bytes) const {
  return cpu_for_bytes(bytes, o_.deserialize_bytes_per_s);
}

}  // namespace gpemu::pipeline
