// The preprocessing service, real against modelled: `gpemu prep serve`'s
// workers (real processes, real reads and decodes, real TCP on loopback)
// and the modelled service of the virtual clock (prep_service.h) with the
// same workers, CPUs and offload, over the same generated JPEGs, side by
// side.
//
// The model's per-sample costs are measured here first: one core runs the
// real loader over the images (an epoch to warm, an epoch measured) and its
// mean read and decode time per sample become the modelled loader's
// read_per_sample and decode_per_sample. Then the real service and the
// modelled one each deliver `epochs` epochs (after one to warm the real
// one) to a consumer that takes each batch at once (no GPU), and each
// gives images/s; `ratio` is real / modelled. The modelled network is
// `network` (a preset, standing in for loopback), the serialisation rates
// the model's defaults (Snappy on incompressible data, near memory speed).
//
// JSON keys: images, batch_size, image_size, workers, worker_cpus, offload,
// local_workers, epochs, network, cores_note (the service's note when its
// cores wrap round, else null), per_sample {read_us, decode_us}, local
// {real_images_per_s, modelled_images_per_s, ratio} (the client's loader
// alone on one core), service {real_images_per_s, modelled_images_per_s,
// ratio, worker_cpu_s, worker_samples_decoded, client_samples_decoded},
// dataset {dir, generated}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "gpemu/prep_serve.h"

namespace gpemu {

struct PrepBenchOptions {
  std::string dataset_dir;  // empty: <temp>/gpemu-prep-bench-<images>-<seed>; reused when it matches
  std::size_t images = 300;
  double median_kb = 20;
  std::uint64_t seed = 1;
  std::size_t batch_size = 32;
  int image_size = 64;
  int workers = 2;
  int worker_cpus = 1;
  std::string offload = "all";
  int local_workers = 1;  // the client's threads (offload read or decode)
  int epochs = 2;
  std::string network = "100gbe";
};

nlohmann::json run_prep_bench(const PrepBenchOptions& options);

// `gpemu prep serve`'s dispatcher inside a bench's process, serving on a
// thread of its own from construction to destruction. Construct it before
// the bench starts any thread: its workers are forked.
class BenchService {
 public:
  BenchService(int workers, int cpus_per_worker);
  ~BenchService();
  BenchService(const BenchService&) = delete;
  BenchService& operator=(const BenchService&) = delete;
  const prep::PrepServer& server() const { return *server_; }

 private:
  std::unique_ptr<prep::PrepServer> server_;
  std::thread thread_;
};

// Images a second of a service job (`client`, its port set) to a consumer
// that takes each batch at once, over `epochs` epochs after one to warm, on
// the real clock: {images_per_s, seconds, images, worker_cpu_s,
// worker_samples_decoded, client_samples_decoded}.
nlohmann::json time_prep_service(const prep::PrepClientOptions& client, int epochs);
void print_prep_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace gpemu
