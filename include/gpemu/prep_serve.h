// `gpemu prep serve`: a preprocessing service over real TCP under the real
// clock, in the manner of tf.data service's distributed mode (Audibert et
// al., SoCC 2023; tensorflow/data/experimental/service: a dispatcher that
// registers jobs and hands their work to workers, workers that run the input
// pipeline and that the client reads from directly). The modelled service
// of the virtual clock is prep_service.h; this is its real counterpart.
//
//   dispatcher (PrepServer)         one process: listens on HOST:PORT,
//     |  fork                       registers jobs, reports its workers;
//     +-- worker 0 .. N-1           each its own process, pinned to its C
//                                   cores, listening on a port of its own.
//   client (PrepServiceSource)      registers a job with the dispatcher,
//                                   then reads batches from every worker.
//
// A job is a JPEG image folder (its path as the workers see it), a batch
// size, a seed and shuffle (the epoch's order: the loader's sampler, the
// same on every side), the output image size and what the workers run
// (`offload`, prep_service.h's names): read (they read and send the files'
// bytes; the client decodes, transforms and batches), decode (they also
// decode and transform, and send the decoded samples; the client batches),
// all (they send whole batches). Batch j of an epoch is worker j mod N's,
// as the modelled dispatcher deals them; each worker makes its batches in
// order with its C cores sharing each batch's samples, and streams them.
// Decoding is the real loader's (pipeline/sample_decode.h): the same crop,
// flip and normalisation of a sample whoever decodes it.
//
// Wire protocol (version 1; docs/pipeline.md, "Preprocessing service over
// TCP"): every message is a frame of a 24-byte header (magic "GPEP",
// version, JSON length, payload length; little-endian), a JSON object and a
// binary payload. A peer that does not start with the magic, speaks another
// version, or sends a malformed or oversized frame gets one error frame
// naming what was wrong and is disconnected.
//
// Thread safety: a PrepServer is run by one thread (stop() from any);
// a PrepServiceSource belongs to one rank's host thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/jpeg.h"
#include "gpemu/pipeline/transform.h"
#include "gpemu/prep_service.h"
#include "gpemu/time.h"

namespace gpemu::prep {

inline constexpr int kProtocolVersion = 1;

struct PrepServerOptions {
  std::string host = "127.0.0.1";  // the dispatcher's and workers' address (loopback by default)
  int port = 0;                    // 0: any free port (port() says which)
  int workers = 1;
  int cpus_per_worker = 1;
  // A connection that sends nothing for this long is closed (a client between
  // epochs included); a frame that stops halfway for reply_timeout is a bad peer.
  Duration idle_timeout = 600 * kSecond;
  Duration reply_timeout = 30 * kSecond;
  bool quiet = false;  // no lines on stderr about workers that died
};

// One worker as the dispatcher sees it.
struct PrepWorkerInfo {
  int index = 0;
  pid_t pid = 0;
  int port = 0;
  std::vector<int> cpus;  // the cores it is pinned to
  bool alive = true;
  std::string exit;  // how it ended ("killed by SIGKILL", "exited with status 1"); empty while alive
};

class PrepServer {
 public:
  // Binds host:port and starts the workers (forked: call it before the
  // process starts threads). InputError for bad options or an address that
  // cannot be bound.
  explicit PrepServer(PrepServerOptions options);
  // Stops; sends SIGTERM to the workers still alive and reaps them (SIGKILL
  // after 5 s).
  ~PrepServer();
  PrepServer(const PrepServer&) = delete;
  PrepServer& operator=(const PrepServer&) = delete;

  int port() const;
  std::vector<PrepWorkerInfo> workers() const;
  // Why the workers share cores (more asked for than the process may use), or empty.
  const std::string& cpu_note() const;
  // Serves until stop() or SIGINT/SIGTERM (common/interrupt.h's handlers),
  // then shuts the workers down.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A job as a client registers it.
struct PrepJob {
  std::string dataset;  // a JPEG image folder, as the workers see it
  std::size_t batch_size = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  pipeline::PrepOffload offload = pipeline::PrepOffload::All;
  pipeline::ImageTransformOptions transform;  // its output size travels; the rest is torchvision's default
  pipeline::JpegValidation jpeg_validation = pipeline::JpegValidation::Truncation;
};

// What the workers did for a client, summed over them (each worker's
// figures at the end of each epoch it finished), and what the client did.
struct PrepServiceCounters {
  std::uint64_t worker_samples_read = 0, worker_bytes_read = 0;
  std::uint64_t worker_samples_decoded = 0, worker_batches_collated = 0;
  std::uint64_t worker_batches_sent = 0, worker_bytes_sent = 0;
  double worker_cpu_s = 0;  // the worker processes' CPU time (all their threads)
  std::uint64_t client_samples_decoded = 0, client_batches_collated = 0, client_bytes_received = 0;
  std::string describe() const;
};

struct PrepClientOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  PrepJob job;
  int local_workers = 1;    // the client's threads for what is left of the pipeline (at least 1)
  int prefetch_factor = 2;  // batches in flight per worker connection
  // Connecting and registering; and the longest a batch may take to come
  // (a worker that is alive but sends nothing for this long is an error).
  Duration reply_timeout = 30 * kSecond;
  Duration batch_timeout = 600 * kSecond;
};

// "HOST:PORT" (IPv4, a name, or [IPv6]:PORT) as host and port; InputError naming `flag` otherwise.
std::pair<std::string, int> parse_host_port(const std::string& text, const std::string& flag = "--prep-service");

// The training job's side: a BatchSource whose batches come from the
// service. Error when the service cannot be reached, refuses the job (the
// folder is missing or not JPEGs), or a worker dies or falls silent
// (naming the worker, its pid and, once the dispatcher saw it, how it ended).
class PrepServiceSource : public pipeline::BatchSource {
 public:
  PrepServiceSource(Clock& clock, PrepClientOptions options);
  ~PrepServiceSource() override;
  void begin_epoch(std::uint64_t epoch) override;
  std::optional<pipeline::LoadedBatch> next(const pipeline::SleepFn& sleep_until) override;
  std::size_t batches_per_epoch() const override;
  std::size_t samples_per_epoch() const override;
  std::string describe() const override;
  pipeline::LoaderStats stats() const override;
  PrepServiceCounters counters() const;
  // The workers as the dispatcher described them at registration.
  std::vector<PrepWorkerInfo> workers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpemu::prep
