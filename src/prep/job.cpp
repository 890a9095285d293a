#include "prep/job.h"

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/sampler.h"

namespace gpemu::prep {
namespace {

pipeline::LoaderOptions loader_options(const PrepJob& job) {
  pipeline::LoaderOptions o;
  o.batch_size = job.batch_size;
  o.shuffle = job.shuffle;
  o.seed = job.seed;
  o.drop_last = job.drop_last;
  o.transform = job.transform;
  return o;
}

}  // namespace

pipeline::Dataset open_job_dataset(const PrepJob& job) {
  pipeline::Dataset ds;
  try {
    ds = pipeline::open_dataset_folder(job.dataset);
  } catch (const Error& e) {
    throw InputError(fmt::format("preprocessing job: the dataset '{}' cannot be opened: {}", job.dataset, e.what()));
  }
  if (ds.samples.empty()) throw InputError(fmt::format("preprocessing job: '{}' holds no samples", job.dataset));
  for (const auto& s : ds.samples)
    if (s.format != pipeline::SampleFormat::Jpeg || ds.page_size != 0 || ds.group_size != 1)
      throw InputError(fmt::format(
          "preprocessing job: '{}' is not a folder of JPEG files ('{}' is not one); the service serves JPEG "
          "image folders",
          job.dataset, s.path));
  return ds;
}

std::vector<std::vector<std::size_t>> epoch_batches(const PrepJob& job, std::size_t samples, std::uint64_t epoch) {
  const pipeline::LoaderOptions o = loader_options(job);
  const pipeline::Sampler sampler(samples, pipeline::sampler_options(o));
  const std::vector<std::size_t> order = sampler.indices(epoch);
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < order.size(); i += job.batch_size) {
    const std::size_t end = std::min(order.size(), i + job.batch_size);
    if (end - i < job.batch_size && job.drop_last) break;
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

std::size_t batches_per_epoch(const PrepJob& job, std::size_t samples) {
  return job.drop_last ? samples / job.batch_size : (samples + job.batch_size - 1) / job.batch_size;
}

}  // namespace gpemu::prep
