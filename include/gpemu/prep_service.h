// Disaggregated preprocessing: a preprocessing service in the manner of
// tf.data service (Audibert et al., "tf.data service: A Case for
// Disaggregating ML Input Data Processing", SoCC 2023), for the modelled
// loader under the virtual clock.
//
// A dispatcher deals the epoch's batches to `workers` remote workers, each a
// machine share of `cpus_per_worker` cores of its own. A remote worker runs a
// prefix of the input pipeline (read -> decode/augment -> batch) on its
// batches and sends what that prefix produces to the training job (the
// client) over the network; the client's own loader workers run the rest of
// the pipeline on the client's cores. Offload modes, as tf.data service's
// `distribute` placed in a pipeline:
//   none:   the client does everything (no service);
//   read:   workers read the samples and send their file bytes; the client
//           decodes, augments and batches;
//   decode: workers read, decode and augment, and send each decoded sample;
//           the client batches;
//   all:    workers also batch and send whole batches.
// `local_share` of the epoch's batches (FastFlow's ratio_local: Um et al.,
// "FastFlow: Accelerating Deep Learning Model Training with Smart Offloading
// of Input Data Pipeline", VLDB 2023) are made whole by the client's own
// loader workers, the rest by the service: round(local_share x batches) of
// them, and the client takes batches first come, first served: each batch
// goes to the side (the client's workers or the service) that has it ready
// sooner while that side's quota lasts.
//
// The model of one remote batch (batch i, the j-th remote batch of the epoch):
//   worker      w = j mod workers (the dispatcher's round robin)
//   start       = max(w's previous batch done, the epoch's start,
//                     delivery of the remote batch workers x worker_buffer
//                     before it: a worker holds at most worker_buffer
//                     finished batches the client has not taken)
//   done        = start + (prefix's CPU time + bytes / serialize_bytes_per_s)
//                 / cpus_per_worker   (its cores share the batch's samples)
//   arrived     = max(done + latency, the previous remote batch's arrival)
//                 + bytes / nic_bytes_per_s   (the client's NIC, one batch
//                 at a time, in batch order)
// then the client's loader worker that is free first starts it at max(its
// dispatch, the worker free, arrived) and spends the suffix's CPU time plus
// bytes / deserialize_bytes_per_s, scaled by the client's CPU share (a batch
// the client makes whole goes to the worker free first too). "bytes" is what the prefix produces: the
// samples' file bytes after read, their decoded tensors after decode or all.
// docs/pipeline.md, "Preprocessing service", gives every default's source.
//
// Thread safety: options are values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpemu/time.h"

namespace gpemu::pipeline {

enum class PrepOffload { None, Read, Decode, All };
std::string_view to_string(PrepOffload o);  // "none", "read", "decode", "all"
// Accepts those four; InputError naming `flag` and them otherwise.
PrepOffload parse_prep_offload(std::string_view name, std::string_view flag = "--prep-offload");

struct PrepServiceOptions {
  int workers = 0;  // remote workers; 0: no service
  int cpus_per_worker = 1;
  PrepOffload offload = PrepOffload::All;
  double local_share = 0;  // of the batches, made whole by the client (0 to 1)
  // The client's NIC: payload bytes a second, and a request's latency.
  double nic_bytes_per_s = 10e9 / 8 * 0.94;  // 10 GbE's preset (interconnect.h)
  Duration latency = 50 * kMicrosecond;
  // CPU of a worker's core per byte it sends (tf.data service compresses
  // elements with Snappy unless told not to), and of a client's core per
  // byte it receives (decompression). Decoded float tensors and JPEG files
  // are data Snappy cannot compress, which it passes near memory speed:
  // golang/snappy's benchmark of a JPEG, 15.7 GB/s to compress and 23.5 GB/s
  // to decompress on a core of an i7-3770. (Compressible data costs far
  // more: about 250 and 500 MB/s, google/snappy's README.)
  double serialize_bytes_per_s = 15.7e9;
  double deserialize_bytes_per_s = 23.5e9;
  // Finished batches a worker holds that the client has not taken.
  int worker_buffer = 2;
  std::string network;  // the network's name, for describe()
};

// InputError naming the figure for impossible options (workers < 0,
// cpus_per_worker < 1, a local share outside [0, 1], rates not positive and
// finite, a negative latency, worker_buffer < 1).
void validate(const PrepServiceOptions& o);
// Batches of an epoch of `batches` the client makes whole: round(share x batches).
std::size_t prep_local_batches(std::size_t batches, double local_share);
// One line for people.
std::string describe(const PrepServiceOptions& o);

}  // namespace gpemu::pipeline
