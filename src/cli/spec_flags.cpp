#include "cli/spec_flags.h"

#include "gpemu/spec_error.h"

namespace gpemu::cli {

std::string flag_of_spec_field(std::string_view field) {
  static constexpr SpecFieldWord kFlags[] = {
      {"batch_size", "--batch-size"},
      {"cluster.buckets.bucket_cap_bytes", "--bucket-cap-mb"},
      {"cluster.gpu", "--gpu"},
      {"cluster.gpus", "--gpus"},
      {"cluster.network", "--network"},
      {"cluster.nodes", "--nodes"},
      {"compute.model.name", "--model"},
      {"compute.model.seq_len", "--seq-len"},
      {"compute.time_divisor", "--gpemu-gpus"},
      {"data.dataset", "--virtual-dataset"},
      {"data.distributed_cache", "--distributed-cache"},
      {"data.io_depth", "--io-depth"},
      {"data.model.cache_bytes", "--cache-bytes"},
      {"data.model.storage", "--storage"},
      {"data.remote_fetch_slots", "--remote-fetch-slots"},
      {"data.shared_storage", "--storage-shared"},
      {"data.synthetic_batches", "--iterations"},
      {"record.steps", "--report"},
      {"schedule.epochs", "--epochs"},
      {"schedule.max_iterations", "--iterations"},
      {"trace", "--trace"},
  };
  return word_of_spec_field(kFlags, field);
}

}  // namespace gpemu::cli
