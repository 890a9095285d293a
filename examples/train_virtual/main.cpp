// One emulated node of two V100s training ResNet-50 for one epoch of
// in-memory batches on the virtual clock, through gpemu's one engine
// (gpemu::Job): the run takes milliseconds of wall time and prints the same
// figures every time.
#include <cstdio>
#include <exception>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/job.h"
#include "gpemu/zoo.h"

int main() try {
  using namespace gpemu;
  auto clock = make_virtual_clock();
  EstimateCostModel costs;  // the analytical model with the shipped calibration

  JobSpec spec;
  spec.compute.model.name = "resnet50";
  spec.batch_size = 64;
  spec.cluster.gpu = &find_gpu("v100");
  spec.cluster.gpus = 2;
  spec.data.source = DataSource::Synthetic;
  spec.data.synthetic_batches = 20;

  Job job(*clock, costs, spec);
  const RunSummary r = summarize(job.run());

  std::printf("data from %s\n", zoo::data_dir().c_str());
  std::printf("model %s on %d x %s, batch %d, %s clock\n", r.model.c_str(), r.gpus, r.gpu.c_str(), r.batch_size,
              r.clock.c_str());
  std::printf("iterations per GPU  %lld\n", static_cast<long long>(r.iterations));
  std::printf("samples             %lld\n", static_cast<long long>(r.samples));
  std::printf("emulated time       %.6f s\n", to_seconds(r.elapsed));
  std::printf("samples/s           %.1f\n", r.samples_per_s);
  std::printf("GPU utilisation     %.2f %%\n", r.gpu_util_pct);
  std::printf("all-reduce exposed  %.2f %%\n", r.all_reduce_pct);
  std::printf("peak reserved       %.1f MiB\n", static_cast<double>(r.peak_reserved_bytes) / (1 << 20));
  return r.iterations == 20 && r.samples == 20 * 64 * 2 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_virtual: %s\n", e.what());
  return 1;
}
